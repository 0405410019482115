"""The public API with its types; `engine/__init__.py` loads each name on first use."""

from .core._errors import (
    BadModelOutput,
    JudgeError,
    ProviderError,
    ProviderTimeout,
    QuotaExhausted,
    RateLimited,
    ScenarioError,
    Unjudged,
)
from .core._format import format_rate, nanmean, pct_or_none
from .core._inputs import load_yaml_file, read_input_bytes
from .core._lazy import lazy_module
from .core._records import EpisodeRecord, Judgment, Turn, Usage
from .core._seeds import derive_seed
from .core._templates import check_template, render
from .core._text import brief, content_words, mentions_answer, numbers_in, parse_json_object, word_count
from .models._provider import PROVIDERS, ChatModel, ChatReply, ChatRequest, RequestContext
from .models.sim._provider import (
    ACTION_PATTERN,
    ENCOURAGEMENT_MARKERS,
    RECOGNITION_MARKERS,
    REFUSAL_MARKERS,
    SimJudgeParams,
    format_number,
    last_message,
    wrong_numbers,
)
from .models.sim._tasks import sim_knobs, sim_task
from .report._blocks import (
    SIMRUN_ADDITION,
    Block,
    BlockCell,
    Brief,
    Bullets,
    Forest,
    ForestPanel,
    Heatmap,
    Interval,
    Note,
    Section,
    Strong,
    Table,
)
from .report._dots import Dot, DotPanel, Dots, DotSeries
from .report._grid import GridPanel, HeatGrid
from .report._histogram import Bar, BarPanel, Histogram
from .report._judge_agreement import judge_agreement_html
from .report._rates import SUMMARY_CONFIG, ClusteredRateSummary, ContrastSummary, RateSummary
from .report._rebuild import write_report
from .report._summarizer import BlockSummarizer
from .report._survival import Curve, CurvePoint, Survival
from .report._svg import table
from .runtime._build import BuiltScenario, build, load_built
from .runtime._checks import build_scenario, load_scenario
from .runtime._fan_out import fan_out
from .runtime._plugins import (
    JUDGES,
    PROTOCOLS,
    STUDENTS,
    SUMMARIZERS,
    TUTORS,
    UNJUDGED,
    Agent,
    CallEstimate,
    DialogueProtocol,
    EpisodeContext,
    InputMemo,
    Judge,
    Summarizer,
    Utterance,
    judge_calls,
)
from .runtime._runner import Runner, RunResult
from .scenario._intake import CountedItems, Intake
from .scenario._items import ITEM_SOURCES, Item
from .scenario._plan import DESIGNS, Design, Episode
from .scenario._spec import ModelSpec, Scenario
from .stats._agreement import VotedUnit, agreement, judge_agreement, label_entropy, label_shares
from .stats._families import adjust_p, contrast_rows, correct_family, format_effect, format_p, omnibus_row
from .stats._null import NULL_DRAWS, label_permutations, null_reference, rank_biserial_rows
from .stats._paired import (
    MEANINGFUL_R,
    MIN_PAIRS,
    N_BOOT,
    Contrast,
    difference_contrast,
    friedman_then_pairwise,
    paired_contrast,
)
from .stats._power import detectable_r, items_for_r
from .stats._rates import clustered_difference, clustered_rate, discrete_hazard, rate, survival_table
from .tools._run import RunHandle, RunOptions, open_run, run, run_sync
from .tools.calibrate._labels import LABEL_SOURCES, Dimension, Example, LabelMap, LabelSet, Reader
from .tools.loadtest._config import LoadConfig
from .tools.loadtest._run import LoadResult, run_load

__all__ = [
    "ACTION_PATTERN",
    "Agent",
    "BadModelOutput",
    "Bar",
    "BarPanel",
    "Block",
    "BlockCell",
    "BlockSummarizer",
    "Brief",
    "BuiltScenario",
    "Bullets",
    "CallEstimate",
    "ChatModel",
    "ChatReply",
    "ChatRequest",
    "ClusteredRateSummary",
    "Contrast",
    "ContrastSummary",
    "CountedItems",
    "Curve",
    "CurvePoint",
    "DESIGNS",
    "Design",
    "DialogueProtocol",
    "Dimension",
    "Dot",
    "DotPanel",
    "DotSeries",
    "Dots",
    "ENCOURAGEMENT_MARKERS",
    "Episode",
    "EpisodeContext",
    "EpisodeRecord",
    "Example",
    "Forest",
    "ForestPanel",
    "GridPanel",
    "HeatGrid",
    "Heatmap",
    "Histogram",
    "ITEM_SOURCES",
    "InputMemo",
    "Intake",
    "Interval",
    "Item",
    "JUDGES",
    "Judge",
    "JudgeError",
    "Judgment",
    "LABEL_SOURCES",
    "LabelMap",
    "LabelSet",
    "LoadConfig",
    "LoadResult",
    "MEANINGFUL_R",
    "MIN_PAIRS",
    "ModelSpec",
    "NULL_DRAWS",
    "N_BOOT",
    "Note",
    "PROTOCOLS",
    "PROVIDERS",
    "ProviderError",
    "ProviderTimeout",
    "QuotaExhausted",
    "RECOGNITION_MARKERS",
    "REFUSAL_MARKERS",
    "RateLimited",
    "RateSummary",
    "Reader",
    "RequestContext",
    "RunHandle",
    "RunOptions",
    "RunResult",
    "Runner",
    "SIMRUN_ADDITION",
    "STUDENTS",
    "SUMMARIZERS",
    "SUMMARY_CONFIG",
    "Scenario",
    "ScenarioError",
    "Section",
    "SimJudgeParams",
    "Strong",
    "Summarizer",
    "Survival",
    "TUTORS",
    "Table",
    "Turn",
    "UNJUDGED",
    "Unjudged",
    "Usage",
    "Utterance",
    "VotedUnit",
    "adjust_p",
    "agreement",
    "brief",
    "build",
    "build_scenario",
    "check_template",
    "clustered_difference",
    "clustered_rate",
    "content_words",
    "contrast_rows",
    "correct_family",
    "derive_seed",
    "detectable_r",
    "difference_contrast",
    "discrete_hazard",
    "fan_out",
    "format_effect",
    "format_number",
    "format_p",
    "format_rate",
    "friedman_then_pairwise",
    "items_for_r",
    "judge_agreement",
    "judge_agreement_html",
    "judge_calls",
    "label_permutations",
    "lazy_module",
    "label_entropy",
    "label_shares",
    "last_message",
    "load_built",
    "load_scenario",
    "load_yaml_file",
    "mentions_answer",
    "nanmean",
    "null_reference",
    "numbers_in",
    "omnibus_row",
    "open_run",
    "paired_contrast",
    "parse_json_object",
    "pct_or_none",
    "rank_biserial_rows",
    "rate",
    "read_input_bytes",
    "render",
    "run",
    "run_load",
    "run_sync",
    "sim_knobs",
    "sim_task",
    "survival_table",
    "table",
    "word_count",
    "write_report",
    "wrong_numbers",
]
