"""`simrun compare --tutors RUN RUN [...]`: runs of one scenario that differ only in the tutor, joined into the
run directory of one study of several tutors, so they get the very tables a run of that study writes.

Each run's records keep their ids when their tutor has a label (a run with `label:` set is a part of a study:
its ids and seeds are the study's); an unlabelled run's records are labelled here, by the tutor's model name
(or the run's letter where names repeat). Runs of different scenarios are refused, naming the keys that differ.
A unit the design declares tutor-free (`TutorFreeConditions`) is kept once, from the first run, as a study plays it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from engine.core._errors import ScenarioError
from engine.core._records import EpisodeRecord
from engine.report._rebuild import write_report
from engine.runtime._modes import mode_of
from engine.runtime._rundir import MANIFEST, RunDir
from engine.scenario._plan import TutorFreeConditions, make_design
from engine.scenario._spec import Scenario, measured
from engine.tools.compare._runs import _changed

__all__ = ("join_tutor_runs",)

_FREE = ("name", "description")


def _without_tutor(manifest: dict[str, Any]) -> dict[str, Any]:
    scenario = measured(manifest.get("scenario") or {})
    models = {role: spec for role, spec in (scenario.get("models") or {}).items() if role != "tutor"}
    return {**{k: v for k, v in scenario.items() if k not in _FREE}, "models": models}


def _tutor_specs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    tutor = ((manifest.get("scenario") or {}).get("models") or {}).get("tutor")
    specs = tutor if isinstance(tutor, list) else [tutor]
    return [spec if isinstance(spec, dict) else {"model": str(spec)} for spec in specs]


def _label(spec: dict[str, Any]) -> str:
    return str(spec.get("label") or str(spec.get("model", "tutor")).split("/", 1)[-1])


def _read(path: Path) -> tuple[dict[str, Any], list[EpisodeRecord]]:
    run = RunDir(path)
    manifest = run.read_manifest()
    mode = mode_of(manifest)
    if mode is not None:
        raise ScenarioError(f"{path} is the run directory of {mode.noun}; compare --tutors takes scenario runs")
    return manifest, run.current_records(manifest=manifest).records


def _tutor_free(manifest: dict[str, Any]) -> Callable[[dict[str, str]], bool] | None:
    try:
        design = make_design(Scenario.model_validate(manifest.get("scenario") or {}))
    except (ValidationError, ScenarioError):  # a scenario this version cannot read: every unit stays per tutor
        return None
    return design.tutor_free if isinstance(design, TutorFreeConditions) else None


def _once(records: list[EpisodeRecord], free: Callable[[dict[str, str]], bool]) -> tuple[list[EpisodeRecord], int]:
    """The tutor-free units once (the first run's copy, unlabelled, with the study's id); how many there are."""
    kept: list[EpisodeRecord] = []
    seen: set[str] = set()
    for record in records:
        if not free(record.condition):
            kept.append(record)
            continue
        base = record.id.split("|tutor=", 1)[0]
        if base not in seen:
            seen.add(base)
            kept.append(record.model_copy(update={"tutor": None, "id": base}))
    return kept, len(seen)


def _check_same_study(paths: Sequence[Path], manifests: Sequence[dict[str, Any]]) -> None:
    base = _without_tutor(manifests[0])
    for path, manifest in zip(paths[1:], manifests[1:], strict=True):
        differ, one_sided = _changed(base, _without_tutor(manifest))
        if differ or one_sided:
            raise ScenarioError(
                f"cannot join {path} with {paths[0]}: they are not one study differing only in the tutor; "
                f"they differ in: {', '.join(differ + one_sided)}"
            )


def join_tutor_runs(paths: Sequence[Path], out: Path) -> dict[str, Any]:
    """Write the joined study into `out` (a new run directory) with its report; returns its summary."""
    if len(paths) < 2:
        raise ScenarioError("compare --tutors needs at least two run directories")
    if (out / MANIFEST).exists():
        raise ScenarioError(f"{out} is already a run directory: choose another --out")
    read = [_read(Path(path)) for path in paths]
    manifests = [manifest for manifest, _ in read]
    _check_same_study(paths, manifests)
    specs: list[dict[str, Any]] = []
    records: list[EpisodeRecord] = []
    for index, (manifest, own) in enumerate(read):
        for spec in _tutor_specs(manifest):
            label = _label(spec)
            if label in {_label(s) for s in specs}:
                label = f"{label}-{chr(ord('A') + index)}"
            specs.append({**spec, "label": label})
        if len(_tutor_specs(manifest)) == 1:
            label = specs[-1]["label"]
            records += [
                r if r.tutor == label else r.model_copy(update={"tutor": label, "id": f"{r.id}|tutor={label}"})
                for r in own
            ]
        else:
            records += own
    labels = [spec["label"] for spec in specs]
    if len(set(labels)) != len(labels):
        raise ScenarioError(f"the runs' tutors share labels ({', '.join(labels)}): give each run's tutor a label")
    first = manifests[0]
    free = _tutor_free(first)
    shared = 0
    if free is not None and len(labels) > 1:
        records, shared = _once(records, free)
    scenario = {**(first.get("scenario") or {}), "models": {**(first["scenario"]["models"]), "tutor": specs}}
    planned = sum(int((m.get("counts") or {}).get("planned") or 0) for m in manifests) - (len(read) - 1) * shared
    ok = sum(r.status == "ok" for r in records)
    manifest = {
        **{k: v for k, v in first.items() if k not in ("calls", "cost_usd", "plan_hash")},
        "scenario": scenario,
        "scenario_hash": None,
        "models": {**(first.get("models") or {}), "tutor": [f"{s['label']}: {s['model']}" for s in specs]},
        "status": "finished" if all(m.get("status") == "finished" for m in manifests) else "interrupted",
        "counts": {
            "planned": planned,
            "ok": ok,
            "error": len(records) - ok,
            **({"tutor_free": shared} if shared else {}),
        },
        "joined": [str(path) for path in paths],
    }
    out.mkdir(parents=True, exist_ok=True)
    run = RunDir(out)
    run.write_manifest(manifest)
    lines = (orjson.dumps(r.model_dump(mode="json", exclude_none=False)) + b"\n" for r in records)
    run.episodes_path.write_bytes(b"".join(lines))
    return write_report(run)
