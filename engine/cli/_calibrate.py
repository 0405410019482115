"""`simrun calibrate`: run judges over a human-labelled file and print (and write) their agreement with the humans."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import orjson
from pydantic import ValidationError
from rich.console import Console
from rich.text import Text

from engine.core._errors import ScenarioError
from engine.core._inputs import parse_yaml
from engine.core._text import brief
from engine.runtime._plugins import JUDGES
from engine.scenario._load import parse_model_override
from engine.scenario._spec import ModelSpec
from engine.tools.calibrate._html import render_calibration_html
from engine.tools.calibrate._labels import LABEL_SOURCES
from engine.tools.calibrate._report import render_console, render_markdown
from engine.tools.calibrate._run import calibrate

__all__ = ("calibrate_command",)


def _model_specs(text: str) -> list[ModelSpec]:
    role, sep, spec = text.partition("=")
    if not sep or role != "judge" or not spec:
        raise ScenarioError(f"--model {text!r}: expected judge=provider/model (or judge={{model: ..., params: ...}})")
    data = parse_model_override(spec, f"--model {text!r}")
    try:
        return [ModelSpec.model_validate(one) for one in (data if isinstance(data, list) else [data])]
    except ValidationError as exc:
        raise ScenarioError(f"--model {text!r}: not a model spec ({brief(str(exc))})") from None


def _assignments(values: Sequence[str], what: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for value in values:
        key, sep, raw = value.partition("=")
        if not sep or not key:
            raise ScenarioError(f"{what} {value!r}: expected key=VALUE")
        found[key], _ = parse_yaml(raw, f"{what} {value!r}")
    return found


def _judge_options(settings: Sequence[str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for key, value in _assignments(settings, "--judge-option").items():
        name, dot, option = key.partition(".")
        if not dot:
            raise ScenarioError(f"--judge-option {key!r}: expected JUDGE.KEY=VALUE")
        found.setdefault(name, {})[option] = value
    return found


def _write_reports(result: Mapping[str, Any], out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "calibration.json").write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
        (out / "calibration.md").write_text(render_markdown(result), encoding="utf-8")
        (out / "calibration.html").write_text(render_calibration_html(result), encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"cannot write the calibration report to {out}: {exc.strerror or exc}") from None


@click.command(name="calibrate")
@click.argument("labels", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--source", default="mrbench", show_default=True, help="Label source: the file's layout.")
@click.option("--judge", "judge_names", multiple=True, help="Judge to calibrate (repeatable; default: all readable).")
@click.option("--model", "models", multiple=True, metavar="judge=SPEC", help="Judge model (repeatable: they vote).")
@click.option("--votes", type=click.IntRange(min=1), default=3, show_default=True, help="Votes per judgment.")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE", help="Label-source option, e.g. limit=50.")
@click.option("--judge-option", "judge_settings", multiple=True, metavar="JUDGE.KEY=VALUE", help="A judge's option.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--concurrency", type=click.IntRange(min=1), default=16, show_default=True)
@click.option("--confusion/--no-confusion", default=False, help="Print every confusion matrix too.")
@click.option(
    "--out", type=click.Path(path_type=Path, file_okay=False), help="Write calibration.json, .md and .html here."
)
def calibrate_command(
    labels: Path,
    source: str,
    judge_names: tuple[str, ...],
    models: tuple[str, ...],
    votes: int,
    settings: tuple[str, ...],
    judge_settings: tuple[str, ...],
    seed: int,
    concurrency: int,
    confusion: bool,
    out: Path | None,
) -> int:
    """Run judges over human-labelled responses in LABELS and report their agreement with the humans."""
    if not labels.is_file():
        raise ScenarioError(f"{labels}: no such labels file")
    label_set = LABEL_SOURCES.get(source)(labels, _assignments(settings, "--set"))
    if label_set.intake is not None and label_set.intake.skipped:
        Console(stderr=True).print(Text(f"labels: {label_set.intake.line()}", style="yellow"))
    if not label_set.examples:
        raise ScenarioError(f"{labels}: no labelled responses were read (check --source and --set)")
    judge_options = _judge_options(judge_settings)
    specs = [spec for m in models for spec in _model_specs(m)]
    names = list(judge_names) or [n for n in sorted(label_set.readers) if n in JUDGES]
    if not specs:
        names = list(judge_names) or [n for n in names if getattr(JUDGES.get(n), "model_calls", 1) == 0]
    result = calibrate(
        label_set, names, specs, votes=votes, concurrency=concurrency, seed=seed, judge_options=judge_options
    ).as_dict()
    console = Console(soft_wrap=True)
    console.print(render_console(result, confusion=confusion))
    if any(spec.provider == "sim" for spec in specs):
        console.print("[dim]Judge verdicts come from the `sim` provider (a deterministic simulator).[/]")
    console.print(
        f"{result['examples']} responses · {result['calls']['requests']} model calls · {result['duration_s']}s"
    )
    if out is not None:
        _write_reports(result, out)
        console.print(f"wrote calibration.json, calibration.md and calibration.html to {out}")
    if failed := sum(int(data["errors"]) for data in result["judges"].values()):
        Console(stderr=True, soft_wrap=True).print(
            Text(f"{failed} judgments failed: the rows above leave them out (exit 3)", style="bold red")
        )
        return 3
    return 0
