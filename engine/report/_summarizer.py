"""A kind's summariser written as data: a typed summary and the blocks that show it; the three renderings
(report.md, the terminal, report.html) come from the engine, so they cannot disagree."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

from markupsafe import Markup
from pydantic import BaseModel
from rich.console import Group, RenderableType
from rich.text import Text

from engine.core._records import EpisodeRecord
from engine.report._blocks import Block, provenance_of
from engine.report._console import console_blocks
from engine.report._html_blocks import html_blocks
from engine.report._markdown import markdown_blocks
from engine.report._upgrade import upgrade_summary

__all__ = ("BlockSummarizer", "with_protocol")

SummaryT = TypeVar("SummaryT", bound=BaseModel)


class BlockSummarizer(ABC, Generic[SummaryT]):
    """Subclass with `summary_model` (its JSON is the kind's part of summary.json), `summarize` and `blocks`.

    The renderers take summary.json as read back (a mapping), so a report rebuilt from disk is drawn from the
    same validated model as the one a run just produced.
    """

    summary_model: type[SummaryT]

    @abstractmethod
    def summarize(self, records: Sequence[EpisodeRecord], manifest: Mapping[str, Any], /) -> SummaryT: ...

    @abstractmethod
    def blocks(self, summary: SummaryT, /) -> list[Block]: ...

    def read(self, summary: Mapping[str, Any] | SummaryT, /) -> SummaryT:
        """The kind's typed summary from a whole summary.json (other keys, e.g. "run", are ignored)."""
        if isinstance(summary, self.summary_model):
            return summary
        assert isinstance(summary, Mapping)
        fields = self.summary_model.model_fields
        # a summary.json written before the typed contrast rows (docs/run-directory.md, "Migration") reads too
        return self.summary_model.model_validate(
            upgrade_summary({key: summary[key] for key in fields if key in summary})
        )

    def render_markdown(self, summary: Mapping[str, Any], /) -> str:
        return markdown_blocks(self.blocks(self.read(summary)))

    def render_console(self, summary: Mapping[str, Any], /) -> RenderableType:
        return with_protocol(summary, console_blocks(self.blocks(self.read(summary))))

    def provenance(self, summary: SummaryT, /) -> list[dict[str, str]]:
        """Each report section with what it reproduces or "simrun's addition", for summary.json."""
        return provenance_of(self.blocks(summary))

    def render_html(self, summary: Mapping[str, Any], /) -> Markup:
        return html_blocks(self.blocks(self.read(summary)))


def with_protocol(summary: Mapping[str, Any], shown: RenderableType) -> RenderableType:
    """The console's tables under the line naming the protocol (and scenario file) that produced the run."""
    run = summary.get("run") or {}
    protocol, source = run.get("protocol") or "", run.get("scenario_file") or ""
    if not protocol:
        return shown
    return Group(Text(f"protocol: {protocol}" + (f" ({source})" if source else ""), style="bold"), shown)
