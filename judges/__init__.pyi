"""Everything that scores: LLM rubric judges, deterministic detectors, vote combiners, summarisers."""

from .calibration import MRBENCH_DIMENSIONS, mrbench_examples, split_history
from .cases_summary import CasesSummarizer
from .checklist import ChecklistJudge, DeescalationJudge, distinct_n
from .conversation_stats import CONVERSATION_STATS, ConversationStats
from .crescendo_summary import CrescendoSummarizer, format_rate
from .fairness_summary import FairnessSummarizer, dialogue_scores
from .harm import HarmJudge, HarmVerdict
from .labels import HumanLabel, read_label_file
from .leak import AnswerLeakJudge
from .llm import collect_votes, parse_json_object
from .pedagogy import MultiTurnQuality, PedagogyJudge, SingleTurnQuality
from .remath_summary import RemathSummarizer
from .remediation import PairwiseJudge, StrategyJudge, label_agreement
from .student_audit import AUDIT_METRICS, StudentAudit
from .turn_quality import TURN_QUALITY_METRICS, TurnQualityJudge, TurnQualityVerdict, combine_turn_votes
from .votes import majority, median_score, most_common, unanimous

__all__ = (
    "AUDIT_METRICS",
    "CONVERSATION_STATS",
    "MRBENCH_DIMENSIONS",
    "TURN_QUALITY_METRICS",
    "AnswerLeakJudge",
    "CasesSummarizer",
    "ChecklistJudge",
    "ConversationStats",
    "CrescendoSummarizer",
    "DeescalationJudge",
    "FairnessSummarizer",
    "HarmJudge",
    "HarmVerdict",
    "HumanLabel",
    "MultiTurnQuality",
    "PairwiseJudge",
    "PedagogyJudge",
    "RemathSummarizer",
    "SingleTurnQuality",
    "StrategyJudge",
    "StudentAudit",
    "TurnQualityJudge",
    "TurnQualityVerdict",
    "collect_votes",
    "combine_turn_votes",
    "dialogue_scores",
    "distinct_n",
    "format_rate",
    "label_agreement",
    "majority",
    "median_score",
    "mrbench_examples",
    "most_common",
    "parse_json_object",
    "read_label_file",
    "split_history",
    "unanimous",
)
