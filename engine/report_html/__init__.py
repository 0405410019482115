"""report.html and its building blocks; a scenario kind adds its plots through its summariser (see sections).

Extension point, for a kind's summariser registered in `SUMMARIZERS` (all three methods optional):

    def render_html(self, summary: Mapping[str, Any], /) -> Markup | str      # its results, plots + tables
    def episode_verdict(self, record: EpisodeRecord, /) -> str               # transcripts filter label
    def episode_scores(self, record: EpisodeRecord, /) -> Mapping[str, float]  # `simrun compare` metrics

Build `render_html` from `section`, `plot`, `table`, `paragraph` and `new_figure`; they escape every string.
"""

from markupsafe import Markup, escape

from .blocks import Cell, figure, new_figure, paragraph, plot, section, table
from .page import MAX_TRANSCRIPTS, render_episode_page, render_page, render_report
from .sections import (
    EpisodeScores,
    EpisodeVerdict,
    HtmlSection,
    default_scores,
    default_verdict,
    generic_section,
)

__all__ = (
    "MAX_TRANSCRIPTS",
    "Cell",
    "EpisodeScores",
    "EpisodeVerdict",
    "HtmlSection",
    "Markup",
    "default_scores",
    "default_verdict",
    "escape",
    "figure",
    "generic_section",
    "new_figure",
    "paragraph",
    "plot",
    "render_episode_page",
    "render_page",
    "render_report",
    "section",
    "table",
)
