"""The built scenario: plug-ins resolved, options validated and the plan computed once; no I/O in constructors."""

from __future__ import annotations

import builtins
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, model_validator

import engine
import engine.runtime._build
import engine.scenario._plan
from engine import JUDGES, Runner, ScenarioError
from engine.cli._main import main
from judges.leak import AnswerLeakJudge
from tests.helpers import make_scenario, scenario_data, write_bank


class CountedLeak(AnswerLeakJudge):
    """The real answer-leak judge, counting how often it is built and its options validated."""

    built = 0
    validated = 0

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        note: str = ""

        @model_validator(mode="after")
        def _count(self) -> CountedLeak.Options:
            CountedLeak.validated += 1
            return self

    def __init__(self, options: object = None) -> None:
        super().__init__(options)
        CountedLeak.built += 1


@pytest.fixture
def counted() -> Iterator[type[CountedLeak]]:
    with JUDGES.temporarily("counted_leak", CountedLeak):
        CountedLeak.built = CountedLeak.validated = 0
        yield CountedLeak


@pytest.fixture
def plans(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often the plan is computed and the item files read (a spy around the real functions)."""
    calls = {"plan": 0, "items": 0}

    def spy(name: str, real: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)

        return counted

    plan = spy("plan", engine.scenario._plan.plan_designed)
    items = spy("items", engine.scenario._plan.load_counted_items)
    for module in (engine.scenario._plan, engine.runtime._build):
        monkeypatch.setattr(module, "plan_designed", plan)
        monkeypatch.setattr(module, "load_counted_items", items)
    return calls


def _scenario_file(tmp_path: Path, **overrides: Any) -> Path:
    write_bank(tmp_path / "bank.yaml")
    data = scenario_data(judges=["harm", {"name": "counted_leak", "note": "x"}, "pedagogy"], **overrides)
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "command", [["validate"], ["run", "--dry-run"], ["run", "--no-probe", "--out", "runs"]], ids=" ".join
)
def test_each_command_builds_once(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    counted: type[CountedLeak],
    plans: dict[str, int],
    command: list[str],
) -> None:
    """Load → validate → build once: one options validation and one judge per command, one plan, one read."""
    path = _scenario_file(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main([command[0], str(path), *command[1:]]) == 0
    assert (counted.validated, counted.built) == (1, 1)
    assert plans == {"plan": 1, "items": 1}


@pytest.mark.parametrize("limit", [1, 12])
def test_judges_are_built_once_whatever_the_plan_size(
    tmp_path: Path, counted: type[CountedLeak], plans: dict[str, int], limit: int
) -> None:
    scenario = make_scenario(tmp_path, limit=limit, judges=["harm", "counted_leak", "pedagogy"])
    after_loading = counted.built
    built = engine.build(scenario)
    result = engine.run_sync(built, out=tmp_path / "runs")
    assert result.ok == result.planned == limit
    assert counted.built - after_loading == 1, "one judge shared by every episode, built with the scenario"
    assert plans == {"plan": 1, "items": 1}
    assert isinstance(built, engine.BuiltScenario) and len(built.episodes) == limit


def test_a_built_scenario_is_frozen(tmp_path: Path) -> None:
    built = engine.build(make_scenario(tmp_path, limit=2))
    with pytest.raises(AttributeError):
        built.episodes = ()  # type: ignore[misc]
    assert built.scenario_hash == built.scenario.content_hash()
    assert built.models == tuple(built.scenario.models.by_role())


async def test_the_runner_constructor_does_no_file_io(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Constructing a Runner touches no file, so it is safe on the event loop; `run` does the I/O in a thread."""
    scenario = make_scenario(tmp_path, limit=2)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"file I/O in a constructor: {args!r}")

    with monkeypatch.context() as patched:
        for module, name in ((builtins, "open"), (io, "open"), (os, "open"), (os, "mkdir"), (os, "stat")):
            patched.setattr(module, name, refuse)
        runner = Runner(scenario, out=tmp_path / "runs", report=engine.write_report)
        gone = Runner(scenario, resume=tmp_path / "no-such-run", report=engine.write_report)
    assert not (tmp_path / "runs").exists()
    result = await runner.run()
    assert result.ok == 2 and result.run_dir.parent == tmp_path / "runs"
    with pytest.raises(ScenarioError):
        await gone.open()


def test_dry_run_estimates_from_the_built_judges(tmp_path: Path, counted: type[CountedLeak]) -> None:
    """The estimate of a 12-episode plan asks the built judges: none is built per episode."""
    built = engine.build(make_scenario(tmp_path, judges=["harm", "counted_leak", "pedagogy"]))
    before = counted.built
    totals = built.estimate()
    assert counted.built == before
    assert totals["judge"].calls == sum(
        engine.PROTOCOLS.get("crescendo").estimate(built, e)["judge"].calls for e in built.episodes
    )
