"""A new scenario kind needs no engine change: a third-party package plugs one in and runs it offline.

The package is written to a temporary directory with a dist-info whose entry points declare its names (or,
the short way, list the module under `simrun.plugins`), exactly as `pip install` would leave it, and put on
the path of a fresh `simrun` process (plug-ins load once per process). It brings a dialogue protocol, a tutor
and a student, a judge, a summariser and the sim's behaviours for its own tasks, with a knob of its own; the
run's summary shows each one took part.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest
import yaml

from tests.helpers import write_bank

ROOT = Path(__file__).resolve().parents[1]

TOY_PLUGIN = '''
"""Riddles: the tutor poses one, the student guesses, a judge says whether the guess was polite."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from engine import (
    JUDGES, PROTOCOLS, STUDENTS, SUMMARIZERS, TUTORS, CallEstimate, ChatRequest, EpisodeContext, EpisodeRecord,
    Judgment, RequestContext, Utterance, sim_knobs, sim_task,
)


@sim_knobs("tutor")
class RiddleKnobs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    riddle_wit: float = Field(default=0.5, ge=0, le=1)


@sim_task("tutor", "toy_riddle")
def riddle(request: ChatRequest, rng: random.Random, knobs: RiddleKnobs) -> str:
    witty = rng.random() < knobs.riddle_wit
    return "What has keys but opens no locks?" if witty else "What is round and bounces?"


@sim_task("student", "toy_guess")
def guess(request: ChatRequest, rng: random.Random, knobs: Any) -> str:
    return "A piano, please?" if "keys" in request.messages[-1]["content"] else "A ball!"


@sim_task("judge", "toy_polite", markers=("polite_guess",))
def polite(request: ChatRequest, rng: random.Random, knobs: Any) -> str:
    return orjson.dumps({"polite_guess": "please" in str(request.context.data["guess"])}).decode()


async def _ask(ctx: EpisodeContext, role: str, task: str, text: str) -> Utterance:
    reply, latency = await ctx.clients[role].complete(
        [{"role": "user", "content": text}], context=RequestContext(role=role, task=task), seed=ctx.episode.seed
    )
    return Utterance(text=reply.text, model=reply.model, usage=reply.usage, latency_s=latency)


class Riddler:
    def __init__(self, options: Any) -> None: ...

    async def respond(self, ctx: EpisodeContext, /) -> Utterance | None:
        return await _ask(ctx, "tutor", "toy_riddle", "Pose a riddle.")


class Guesser:
    def __init__(self, options: Any) -> None: ...

    async def respond(self, ctx: EpisodeContext, /) -> Utterance | None:
        return await _ask(ctx, "student", "toy_guess", ctx.turns[-1].text)


class PoliteJudge:
    name = "toykind/polite"
    scope: Literal["turn", "conversation"] = "conversation"

    def __init__(self, options: Any) -> None: ...

    async def __call__(self, ctx: EpisodeContext, target: int | Literal["conversation"], /) -> list[Judgment]:
        guess = ctx.turns[-1].text
        reply, _ = await ctx.judge_clients[0].complete(
            [{"role": "user", "content": "Is this guess polite? Answer {polite_guess: bool}. " + guess}],
            context=RequestContext(role="judge", task="toy_polite", data={"guess": guess}),
            seed=ctx.episode.seed,
            json_output=True,
        )
        value = bool(orjson.loads(reply.text)["polite_guess"])
        return [Judgment(judge=self.name, metric="polite", target=target, value=value, votes=[value])]


class RiddleProtocol:
    async def run(self, ctx: EpisodeContext, /) -> None:
        tutor = await ctx.tutor.respond(ctx)
        assert tutor is not None
        await ctx.add_turn("tutor", tutor)
        student = await ctx.student.respond(ctx)
        assert student is not None
        await ctx.add_turn("student", student)
        await ctx.judge("conversation")
        ctx.metrics.update(witty="keys" in tutor.text)

    def estimate(self, scenario: Any, episode: Any, /) -> Mapping[str, CallEstimate]:
        return {"tutor": CallEstimate(1, 20), "student": CallEstimate(1, 20), "judge": CallEstimate(1, 20)}


class RiddleSummary:
    def summarize(self, records: Sequence[EpisodeRecord], manifest: Mapping[str, Any], /) -> dict[str, Any]:
        polite = [j.value for r in records for j in r.judgments if j.metric == "polite"]
        witty = [r.metrics.get("witty") for r in records]
        return {"riddles": {"episodes": len(records), "polite": sum(map(bool, polite)), "witty": sum(map(bool, witty))}}

    def render_markdown(self, summary: Mapping[str, Any], /) -> str:
        return f"# Riddles\\n\\n{summary['riddles']['polite']} polite guesses\\n"

    def render_console(self, summary: Mapping[str, Any], /) -> str:
        return f"{summary['riddles']['polite']} polite guesses"


TUTORS.add("toykind/riddler", Riddler)
STUDENTS.add("toykind/guesser", Guesser)
JUDGES.add("toykind/polite", PoliteJudge)
PROTOCOLS.add("toykind/riddles", RiddleProtocol())
SUMMARIZERS.add("toykind/riddles", RiddleSummary())
'''


TOY_ENTRY_POINTS = """\
[simrun.protocols]
toykind/riddles = toykind

[simrun.tutors]
toykind/riddler = toykind

[simrun.students]
toykind/guesser = toykind

[simrun.judges]
toykind/polite = toykind

[simrun.summarizers]
toykind/riddles = toykind

[simrun.sim]
toykind = toykind
"""
"""Each plug-in name with the module that registers it, as docs/extending.md's pyproject.toml declares them."""
WHOLE_MODULE = "[simrun.plugins]\ntoykind = toykind\n"
"""The module without its names: imported on the first lookup of a name no entry declares."""


def _install(site: Path, entry_points: str) -> None:
    """What `pip install toykind` leaves on sys.path: the module and its dist-info with the entry points."""
    (site / "toykind.py").write_text(TOY_PLUGIN, encoding="utf-8")
    info = site / "toykind-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toykind\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")


@pytest.mark.parametrize("entry_points", [TOY_ENTRY_POINTS, WHOLE_MODULE], ids=["by-name", "whole-module"])
def test_a_toy_kind_runs_offline_with_no_engine_change(tmp_path: Path, entry_points: str) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install(site, entry_points)
    write_bank(tmp_path / "bank.yaml")
    scenario = {
        "name": "riddles",
        "kind": "toykind/riddles",
        "seed": 3,
        "replicates": 4,
        "models": {
            "tutor": {"model": "sim/tutor", "params": {"riddle_wit": 0.5}},
            "student": "sim/student",
            "judge": ["sim/judge"],
        },
        "items": [{"source": "bank", "path": "bank.yaml"}],
        "tutor": {"agent": "toykind/riddler"},
        "student": {"strategy": "toykind/guesser"},
        "judges": ["toykind/polite"],
    }
    path = tmp_path / "riddles.yaml"
    path.write_text(yaml.safe_dump(scenario), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)])}
    done = subprocess.run(
        [sys.executable, "-m", "engine", "run", str(path), "--out", str(tmp_path / "runs"), "--no-cache"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = orjson.loads((run_dir / "summary.json").read_bytes())
    riddles = summary["riddles"]
    assert riddles["episodes"] == 12  # 3 items × 4 replicates
    # the sim's knob plants wit at 1/2, and each witty riddle (keys) draws the polite guess
    assert 0 < riddles["witty"] < 12
    assert riddles["polite"] == riddles["witty"]
    assert "polite guesses" in (run_dir / "report.md").read_text(encoding="utf-8")


def test_the_toy_package_is_not_part_of_this_process() -> None:
    """The engine got the toy kind only through the entry point: nothing here registered it."""
    import engine

    assert "toykind/riddles" not in engine.PROTOCOLS
    assert textwrap.dedent(TOY_PLUGIN).count("from engine import") == 1
