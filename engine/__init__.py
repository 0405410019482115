"""simrun's engine: load a scenario, run tutor / student / judge episodes concurrently, summarise the records.

    import engine
    scenario = engine.load_scenario("scenarios/crescendo.yaml", overrides=["limit=20"])
    result = engine.run_sync(scenario, out=Path("runs"))
    print(result.summary["harm"])

Importing `engine` configures nothing global (no logging, no event loop policy) and loads no provider SDK. Its
names are imported on first use, so a command that parses arguments does not pay for the statistics and
report libraries it never reaches.
"""

import importlib
import typing

if typing.TYPE_CHECKING:
    from .built import BuiltScenario, build, load_built
    from .client import CallStats, ModelClient
    from .errors import (
        BadModelOutput,
        JudgeError,
        MissingCredentials,
        ProviderError,
        ProviderTimeout,
        QuotaExhausted,
        RateLimited,
        ScenarioError,
        SimError,
        UnknownPluginError,
    )
    from .inputs import load_yaml_file, parse_yaml
    from .items import ITEM_SOURCES, Item
    from .lazy import lazy_module
    from .loading import apply_overrides, build_scenario, check_scenario, load_scenario
    from .plan import DESIGNS, Design, Episode, derive_seed, load_items, make_design, plan_episodes
    from .plugins import (
        JUDGES,
        PROTOCOLS,
        STUDENTS,
        SUMMARIZERS,
        TUTORS,
        Agent,
        CallEstimate,
        DialogueProtocol,
        EpisodeContext,
        Judge,
        Summarizer,
        Utterance,
        judge_calls,
        options_model,
        planning_notes,
    )
    from .providers import PROVIDERS, ChatModel, ChatReply, ChatRequest, RequestContext
    from .providers.sim_tasks import sim_knobs, sim_task
    from .records import EpisodeRecord, ErrorInfo, Judgment, Turn, Usage
    from .registry import Registry, load_plugins
    from .report import write_report
    from .runner import RunHandle, Runner, RunResult, open_run, preflight, run, run_sync
    from .spec import DesignSpec, ItemSourceSpec, JudgeSpec, ModelSpec, ModelsSpec, Scenario, StudentSpec, TutorSpec

_WHERE = {
    "Agent": ".plugins",
    "BadModelOutput": ".errors",
    "BuiltScenario": ".built",
    "CallEstimate": ".plugins",
    "CallStats": ".client",
    "ChatModel": ".providers",
    "ChatReply": ".providers",
    "ChatRequest": ".providers",
    "DESIGNS": ".plan",
    "Design": ".plan",
    "DesignSpec": ".spec",
    "DialogueProtocol": ".plugins",
    "Episode": ".plan",
    "EpisodeContext": ".plugins",
    "EpisodeRecord": ".records",
    "ErrorInfo": ".records",
    "ITEM_SOURCES": ".items",
    "Item": ".items",
    "ItemSourceSpec": ".spec",
    "JUDGES": ".plugins",
    "Judge": ".plugins",
    "JudgeError": ".errors",
    "JudgeSpec": ".spec",
    "Judgment": ".records",
    "MissingCredentials": ".errors",
    "ModelClient": ".client",
    "ModelSpec": ".spec",
    "ModelsSpec": ".spec",
    "PROTOCOLS": ".plugins",
    "PROVIDERS": ".providers",
    "ProviderError": ".errors",
    "ProviderTimeout": ".errors",
    "QuotaExhausted": ".errors",
    "RateLimited": ".errors",
    "Registry": ".registry",
    "RequestContext": ".providers",
    "RunHandle": ".runner",
    "RunResult": ".runner",
    "Runner": ".runner",
    "STUDENTS": ".plugins",
    "SUMMARIZERS": ".plugins",
    "Scenario": ".spec",
    "ScenarioError": ".errors",
    "SimError": ".errors",
    "StudentSpec": ".spec",
    "Summarizer": ".plugins",
    "TUTORS": ".plugins",
    "Turn": ".records",
    "TutorSpec": ".spec",
    "UnknownPluginError": ".errors",
    "Usage": ".records",
    "Utterance": ".plugins",
    "apply_overrides": ".loading",
    "build": ".built",
    "build_scenario": ".loading",
    "check_scenario": ".loading",
    "derive_seed": ".plan",
    "judge_calls": ".plugins",
    "lazy_module": ".lazy",
    "load_built": ".built",
    "load_items": ".plan",
    "load_plugins": ".registry",
    "load_scenario": ".loading",
    "load_yaml_file": ".inputs",
    "make_design": ".plan",
    "open_run": ".runner",
    "options_model": ".plugins",
    "parse_yaml": ".inputs",
    "plan_episodes": ".plan",
    "planning_notes": ".plugins",
    "preflight": ".runner",
    "run": ".runner",
    "run_sync": ".runner",
    "sim_knobs": ".providers.sim_tasks",
    "sim_task": ".providers.sim_tasks",
    "write_report": ".report",
}

__all__ = (
    "DESIGNS",
    "ITEM_SOURCES",
    "JUDGES",
    "PROTOCOLS",
    "PROVIDERS",
    "STUDENTS",
    "SUMMARIZERS",
    "TUTORS",
    "Agent",
    "BadModelOutput",
    "BuiltScenario",
    "CallEstimate",
    "CallStats",
    "ChatModel",
    "ChatReply",
    "ChatRequest",
    "Design",
    "DesignSpec",
    "DialogueProtocol",
    "Episode",
    "EpisodeContext",
    "EpisodeRecord",
    "ErrorInfo",
    "Item",
    "ItemSourceSpec",
    "Judge",
    "JudgeError",
    "JudgeSpec",
    "Judgment",
    "MissingCredentials",
    "ModelClient",
    "ModelSpec",
    "ModelsSpec",
    "ProviderError",
    "ProviderTimeout",
    "QuotaExhausted",
    "RateLimited",
    "Registry",
    "RequestContext",
    "RunHandle",
    "RunResult",
    "Runner",
    "Scenario",
    "ScenarioError",
    "SimError",
    "StudentSpec",
    "Summarizer",
    "Turn",
    "TutorSpec",
    "UnknownPluginError",
    "Usage",
    "Utterance",
    "apply_overrides",
    "build",
    "build_scenario",
    "check_scenario",
    "derive_seed",
    "judge_calls",
    "lazy_module",
    "load_built",
    "load_items",
    "load_plugins",
    "load_scenario",
    "load_yaml_file",
    "make_design",
    "open_run",
    "options_model",
    "parse_yaml",
    "plan_episodes",
    "planning_notes",
    "preflight",
    "run",
    "run_sync",
    "sim_knobs",
    "sim_task",
    "write_report",
)


def __getattr__(name: str) -> typing.Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
