"""Everything that scores: LLM rubric judges, deterministic detectors, vote combiners, summarisers."""

from .crescendo_summary import CrescendoSummarizer, format_rate
from .harm import HarmJudge, HarmVerdict
from .leak import AnswerLeakJudge
from .llm import collect_votes, parse_json_object
from .pedagogy import MultiTurnQuality, PedagogyJudge, SingleTurnQuality
from .votes import majority, median_score, most_common, unanimous

__all__ = (
    "AnswerLeakJudge",
    "CrescendoSummarizer",
    "HarmJudge",
    "HarmVerdict",
    "MultiTurnQuality",
    "PedagogyJudge",
    "SingleTurnQuality",
    "collect_votes",
    "format_rate",
    "majority",
    "median_score",
    "most_common",
    "parse_json_object",
    "unanimous",
)
