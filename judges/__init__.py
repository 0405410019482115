"""Everything that scores: LLM rubric judges, deterministic detectors, vote combiners, summarisers."""

from .conversation_stats import CONVERSATION_STATS, ConversationStats
from .crescendo_summary import CrescendoSummarizer, format_rate
from .fairness_summary import FairnessSummarizer, dialogue_scores
from .harm import HarmJudge, HarmVerdict
from .leak import AnswerLeakJudge
from .llm import collect_votes, parse_json_object
from .pedagogy import MultiTurnQuality, PedagogyJudge, SingleTurnQuality
from .student_audit import AUDIT_METRICS, StudentAudit
from .turn_quality import TURN_QUALITY_METRICS, TurnQualityJudge, TurnQualityVerdict, combine_turn_votes
from .votes import majority, median_score, most_common, unanimous

__all__ = (
    "AUDIT_METRICS",
    "CONVERSATION_STATS",
    "TURN_QUALITY_METRICS",
    "AnswerLeakJudge",
    "ConversationStats",
    "CrescendoSummarizer",
    "FairnessSummarizer",
    "HarmJudge",
    "HarmVerdict",
    "MultiTurnQuality",
    "PedagogyJudge",
    "SingleTurnQuality",
    "StudentAudit",
    "TurnQualityJudge",
    "TurnQualityVerdict",
    "collect_votes",
    "combine_turn_votes",
    "dialogue_scores",
    "format_rate",
    "majority",
    "median_score",
    "most_common",
    "parse_json_object",
    "unanimous",
)
