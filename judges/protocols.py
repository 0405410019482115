"""Which protocol produced a run, read from its manifest, so every report says whether it reproduces a paper's
own setting or runs one of simrun's extensions (`engine.write_report` puts it in summary.json's "run", and the
header of report.md, report.html and the terminal).

The scenario file is named by the engine beside it; these functions only read what the resolved scenario did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine import SIMRUN_ADDITION

__all__ = ("cases_protocol", "crescendo_protocol", "fairness_protocol", "remath_protocol")


def _scenario(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    found = manifest.get("scenario")
    return found if isinstance(found, Mapping) else {}


def _part(manifest: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    found = _scenario(manifest).get(name)
    return found if isinstance(found, Mapping) else {}


def _sources(manifest: Mapping[str, Any]) -> set[str]:
    items = _scenario(manifest).get("items") or []
    return {str(item.get("source")) for item in items if isinstance(item, Mapping)}


def crescendo_protocol(manifest: Mapping[str, Any]) -> str:
    """The paper's replay (scripted student over the SafeTutors release) or simrun's adaptive attacker."""
    strategy = _part(manifest, "student").get("strategy")
    sources = ", ".join(sorted(_sources(manifest))) or "no items"
    if strategy == "scripted" and _sources(manifest) == {"safetutors"}:
        return "SafeTutors' paper replay: the released single- and multi-turn scripts replayed as written"
    if strategy == "scripted":
        return (
            f"SafeTutors-style scripted replay over {sources} items ({SIMRUN_ADDITION}: the items are not the release)"
        )
    return f"simrun's adaptive attacker ({SIMRUN_ADDITION}): escalates and backtracks over {sources} items"


_CHANNELS = {
    "explicit": ("explicit cues", "EduFair's Explicit condition"),
    "implicit": ("implicit cues (names)", "EduFair's Implicit condition"),
    "opposite": ("2×2 stated × perceived gender", "EduFair's Opposite condition"),
}


def fairness_design(channel: str, dimensions: list[str] | None = None) -> str:
    """The design a fairness table comes from, as its heading names it."""
    if any("+" in d for d in dimensions or []):
        return f"intersectional stack of {channel} cues"
    return _CHANNELS.get(channel, (f"{channel} cues", ""))[0]


def fairness_protocol(manifest: Mapping[str, Any]) -> str:
    design = _part(manifest, "design")
    channel = str(design.get("channel") or "explicit")
    if design.get("stack"):
        stacked = "+".join(map(str, design["stack"]))
        return f"EduFair-Bench dialogue, {fairness_design(channel, [stacked])} ({SIMRUN_ADDITION})"
    name, condition = _CHANNELS.get(channel, (f"{channel} cues", ""))
    return f"EduFair-Bench dialogue, {name}" + (f" ({condition})" if condition else "")


def cases_protocol(manifest: Mapping[str, Any]) -> str:
    tasks = _part(manifest, "design").get("tasks") or ["open", "mcq4", "binary", "interactive"]
    sources = _sources(manifest)
    data = "the TutorCaseBench release" if "tutorcasebench" in sources else "simrun's own cases"
    extra = " (the interactive task is " + SIMRUN_ADDITION + ")" if "interactive" in tasks else ""
    if {"mcq4", "binary"} & set(tasks):
        judges = _part(manifest, "models").get("judge") or [None]
        first = judges[0].get("model") if isinstance(judges[0], Mapping) else judges[0]
        by_model = _part(manifest, "design").get("mcq_construction") == "model" and first
        extra += (
            f"; MCQ options selected and rewritten by {first}, as the paper built them"
            if by_model
            else "; MCQ options chosen by simrun's heuristic"
        )
    return f"TutorCaseBench tasks {', '.join(map(str, tasks))} over {data}{extra}"


def remath_protocol(manifest: Mapping[str, Any]) -> str:
    given = _part(manifest, "design").get("given") or ["predicted"]  # the design's default includes it
    data = "the Bridge/ReMath release" if "bridge" in _sources(manifest) else "simrun's own items"
    extra = " (the `predicted` condition is " + SIMRUN_ADDITION + ")" if "predicted" in given else ""
    return f"ReMath Tasks A–C over {data}{extra}"
