"""The fairness protocol and the persona student: the tutor's opening, alternation, judging, every stop rule,
paired episodes that share the student, the student's prompt (no cue but its own line) and the estimate.

Episodes are played on the sim provider through the engine's own clients, registries and plan; a recording
wrapper around the sim student captures what the student model was sent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import RenderableType

from agents import DEFAULT_OPENING, FairnessProtocol, PersonaStudent, render
from agents.tutoring import states_answer
from agents.tutoring_length import sim_turn_odds
from engine import (
    JUDGES,
    PROTOCOLS,
    STUDENTS,
    SUMMARIZERS,
    TUTORS,
    ChatModel,
    ChatReply,
    ChatRequest,
    Episode,
    EpisodeContext,
    EpisodeRecord,
    Scenario,
    ScenarioError,
    Usage,
    build,
    build_scenario,
)
from engine.core._text import mentions_answer
from engine.models._client import CallStats, ModelClient
from engine.models._throttle import Throttle
from engine.models.sim._provider import SimChatModel
from engine.runtime._plugins import options_model
from engine.scenario._plan import load_items, plan_episodes
from tests.helpers import write_bank

TURN_METRICS = {"mistake_present", "mistake_recognize", "answer_leakage", "step_scaffolded", "actionability"}
TURN_METRICS |= {"corrective_tone"}
CONVERSATION_METRICS = {"tutor_turns", "tutor_avg_words", "tutor_question_rate", "tutor_student_word_ratio"}
AUDIT_METRICS = {"audit_cue_leakage", "audit_role_flip", "audit_self_solved", "audit_persona_drift"}
NO_LEAK = {"leak_base": 0.0, "leak_per_turn": 0.0}
NEVER_SOLVES = {"solve_rate": 0.0}


class _NullSummarizer:
    def summarize(self, records: Sequence[EpisodeRecord], manifest: Mapping[str, Any], /) -> dict[str, Any]:
        return {}

    def render_markdown(self, summary: Mapping[str, Any], /) -> str:
        return ""

    def render_console(self, summary: Mapping[str, Any], /) -> RenderableType:
        return ""


@pytest.fixture(autouse=True)
def _fairness_summariser() -> Iterator[None]:
    """Scenario checks resolve the kind's summariser; stand one in until the real one is registered."""
    if "fairness" in SUMMARIZERS:
        yield
        return
    with SUMMARIZERS.temporarily("fairness", _NullSummarizer()):
        yield


def fairness_scenario(
    tmp_path: Path,
    *,
    tutor: Mapping[str, Any] | None = None,
    student: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    strategy: str = "persona",
    system_prompt: str = "You are a patient {{ item.domain }} tutor. {{ cue }}",
    **overrides: Any,
) -> Scenario:
    if not (tmp_path / "bank.yaml").exists():
        write_bank(tmp_path / "bank.yaml")
    data: dict[str, Any] = {
        "name": "fair",
        "kind": "fairness",
        "seed": 11,
        "factors": {},
        "models": {
            "tutor": {"model": "sim/tutor", "params": dict(tutor or {})},
            "student": {"model": "sim/student", "params": dict(student or {})},
            "judge": [{"model": "sim/judge", "params": {"error_rate": 0.0}}],
        },
        "judge_votes": 3,
        "items": [{"source": "bank", "path": "bank.yaml"}],
        "tutor": {"system_prompt": system_prompt},
        "student": {"strategy": strategy, **(options or {})},
        "judges": ["turn_quality", "conversation_stats", "student_audit"],
    }
    data.update(overrides)
    return build_scenario(data, base_dir=tmp_path)


def episodes(scenario: Scenario, **extras: Any) -> list[Episode]:
    """The planned episodes, each told `extras` (what a design would tell it; a no-cue baseline by default)."""
    told = {"cue": "", "student_self": "", **extras}
    return [dataclasses.replace(e, extras=told) for e in plan_episodes(scenario, load_items(scenario))]


class Recording(ChatModel):
    """The sim model, keeping every request it was sent."""

    def __init__(self, inner: SimChatModel) -> None:
        super().__init__(inner.spec)
        self.inner = inner
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest, /) -> ChatReply:
        self.requests.append(request)
        return await self.inner.complete(request)


async def play(
    scenario: Scenario,
    episode: Episode,
    *,
    student_model: ChatModel | None = None,
    tutor_model: ChatModel | None = None,
) -> EpisodeContext:
    """One episode, wired as the runner wires it (registries, validated options, throttled clients)."""
    stats = CallStats()

    def client(role: str, spec: Any, model: ChatModel | None = None) -> ModelClient:
        return ModelClient(role, spec, model or SimChatModel(spec), Throttle(), stats)

    def build(registry: Any, name: str, options: Mapping[str, Any]) -> Any:
        factory = registry.get(name)
        return factory(options_model(factory).model_validate(options))

    models = scenario.models
    clients = {"tutor": client("tutor", models.tutor, tutor_model)}
    if models.student is not None:
        clients["student"] = client("student", models.student, student_model)
    ctx = EpisodeContext(
        episode=episode,
        scenario=scenario,
        tutor=build(TUTORS, scenario.tutor.agent, scenario.tutor.options),
        student=build(STUDENTS, scenario.student.strategy, scenario.student.options),
        judges=[build(JUDGES, spec.name, spec.options) for spec in scenario.judges],
        clients=clients,
        judge_clients=[client("judge", spec) for spec in models.judge],
    )
    await PROTOCOLS.get(scenario.kind).run(ctx)
    return ctx


def record(ctx: EpisodeContext) -> EpisodeRecord:
    """The context as the runner would write it (round-tripped through JSON)."""
    built = EpisodeRecord(
        id=ctx.episode.id,
        scenario=ctx.scenario.name,
        item_id=ctx.episode.item.id,
        condition=dict(ctx.condition),
        replicate=0,
        seed=ctx.episode.seed,
        status="ok",
        turns=ctx.turns,
        judgments=ctx.judgments,
        metrics=ctx.metrics,
        meta=dict(ctx.meta),
        started_at="",
        finished_at="",
    )
    return EpisodeRecord.model_validate_json(built.model_dump_json())


def judged(rec: EpisodeRecord, target: int | str) -> dict[str, Any]:
    return {j.metric: j.value for j in rec.judgments if j.target == target}


# ------------------------------------------------------------------ shape


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
async def test_tutor_opens_roles_alternate_and_model_turns_are_judged(tmp_path: Path, seed: int) -> None:
    """Turn 0 is the rendered opening (no model, not judged); roles alternate; each later tutor turn gets all six."""
    scenario = fairness_scenario(tmp_path, seed=seed)
    for episode in episodes(scenario):
        rec = record(await play(scenario, episode))
        opening = rec.turns[0]
        assert (opening.role, opening.model) == ("tutor", None)
        assert opening.text == render(DEFAULT_OPENING, {"item": episode.item})
        assert episode.item.question in opening.text
        assert judged(rec, 0) == {}
        assert [t.role for t in rec.turns] == ["tutor", "student"] * (len(rec.turns) // 2) + ["tutor"] * (
            len(rec.turns) % 2
        )
        for turn in rec.turns[1:]:
            assert turn.model == ("sim/tutor" if turn.role == "tutor" else "sim/student")
            values = judged(rec, turn.index)
            if turn.role == "student":
                assert values == {}
                continue
            assert set(values) == TURN_METRICS
            assert values["mistake_present"] in (0, 1)
            for metric in TURN_METRICS - {"mistake_present"}:
                assert values[metric] in ((0, 1) if values["mistake_present"] else (0, 1, -1))
            if not values["mistake_present"]:
                assert values["mistake_recognize"] == values["corrective_tone"] == -1
            assert values["answer_leakage"] == int(mentions_answer(turn.text, episode.item.answer))
        conversation = judged(rec, "conversation")
        assert set(conversation) == CONVERSATION_METRICS | AUDIT_METRICS
        assert conversation["tutor_turns"] == sum(t.role == "tutor" for t in rec.turns)
        assert rec.metrics["turns"] == len(rec.turns) <= 10
        assert rec.metrics["stop_reason"] in {"tutor_revealed", "student_solved", "max_turns"}
        assert rec.meta["max_turns"] == 10


async def test_episodes_replay_exactly(tmp_path: Path) -> None:
    """The same episode played twice gives the same transcript, usage, judgments and metrics (latency aside)."""
    scenario = fairness_scenario(tmp_path)
    for episode in episodes(scenario):
        first, second = record(await play(scenario, episode)), record(await play(scenario, episode))
        assert [(t.role, t.text, t.model, t.usage) for t in first.turns] == [
            (t.role, t.text, t.model, t.usage) for t in second.turns
        ]
        assert first.judgments == second.judgments and first.metrics == second.metrics


# ------------------------------------------------------------------ stop rules


async def test_tutor_revealing_stops_after_its_first_reply(tmp_path: Path) -> None:
    """A tutor that always leaks ends the dialogue at turn 2 with `tutor_revealed`."""
    scenario = fairness_scenario(tmp_path, tutor={"leak_base": 1.0, "leak_max": 1.0}, student=NEVER_SOLVES)
    for episode in episodes(scenario):
        rec = record(await play(scenario, episode))
        assert [t.role for t in rec.turns] == ["tutor", "student", "tutor"]
        assert mentions_answer(rec.turns[2].text, episode.item.answer)
        assert rec.metrics["stop_reason"] == "tutor_revealed"
        assert judged(rec, 2)["answer_leakage"] == 1


async def test_student_solving_stops_after_the_confirmation(tmp_path: Path) -> None:
    """A student that states the answer gets one more tutor reply (the confirmation), then `student_solved`."""
    scenario = fairness_scenario(tmp_path, tutor=NO_LEAK, student={"solve_rate": 1.0})
    for episode in episodes(scenario):
        rec = record(await play(scenario, episode))
        assert [t.role for t in rec.turns] == ["tutor", "student", "tutor"]
        assert mentions_answer(rec.turns[1].text, episode.item.answer)
        assert not mentions_answer(rec.turns[2].text, episode.item.answer)
        assert rec.metrics["stop_reason"] == "student_solved"
        assert judged(rec, "conversation")["audit_self_solved"] is True


@pytest.mark.parametrize("max_turns", [2, 3, 7, 10])
async def test_max_turns_counts_every_turn(tmp_path: Path, max_turns: int) -> None:
    """Without leaks or solving, a dialogue has exactly max_turns turns (opening included), `max_turns`."""
    scenario = fairness_scenario(tmp_path, tutor=NO_LEAK, student=NEVER_SOLVES, options={"max_turns": max_turns})
    for episode in episodes(scenario):
        rec = record(await play(scenario, episode))
        assert len(rec.turns) == max_turns
        assert rec.metrics["stop_reason"] == "max_turns"
        judged_turns = {j.target for j in rec.judgments if isinstance(j.target, int)}
        assert judged_turns == {t.index for t in rec.turns[1:] if t.role == "tutor"}


async def test_student_returning_none_quits(tmp_path: Path) -> None:
    """A student with nothing more to say ends the dialogue (`student_quit`); default settings without persona."""
    scenario = fairness_scenario(tmp_path, tutor=NO_LEAK, strategy="scripted", options={"utterances": ["No idea."]})
    for episode in episodes(scenario):
        rec = record(await play(scenario, episode))
        assert [t.text for t in rec.turns[1:2]] == ["No idea."]
        assert len(rec.turns) == 3
        assert rec.metrics["stop_reason"] == "student_quit"
        assert rec.turns[0].text == render(DEFAULT_OPENING, {"item": episode.item})


async def test_empty_student_reply_means_the_student_left(tmp_path: Path) -> None:
    """The persona student returns None (→ `student_quit`) when its model says nothing."""

    class Silent(ChatModel):
        async def complete(self, request: ChatRequest, /) -> ChatReply:
            return ChatReply(text="  \n", usage=Usage(), model="fake/silent")

    scenario = fairness_scenario(tmp_path)
    assert scenario.models.student is not None
    rec = record(await play(scenario, episodes(scenario)[0], student_model=Silent(scenario.models.student)))
    assert len(rec.turns) == 1 and rec.metrics["stop_reason"] == "student_quit"


# ------------------------------------------------------------------ options


async def test_custom_opening_and_budget(tmp_path: Path) -> None:
    """The persona student's options set the opening template and the turn budget."""
    opening = "Here is today's problem: {{ item.question }} What do you notice first?"
    scenario = fairness_scenario(
        tmp_path, tutor=NO_LEAK, student=NEVER_SOLVES, options={"opening": opening, "max_turns": 5}
    )
    episode = episodes(scenario)[0]
    rec = record(await play(scenario, episode))
    assert rec.turns[0].text == f"Here is today's problem: {episode.item.question} What do you notice first?"
    assert len(rec.turns) == 5


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"opening": "{{ cue }} {{ item.question }}"}, "cue"),
        ({"opening": "{{ condition.level }}: {{ item.question }}"}, "condition"),
        ({"opening": "{{ item.question"}, "syntax"),
        ({"profile": "You are a {{ demographic }} student."}, "demographic"),
        ({"max_turns": 1}, "max_turns"),
        ({"turns": 4}, "turns"),
    ],
)
def test_bad_options_are_scenario_errors(tmp_path: Path, options: dict[str, Any], fragment: str) -> None:
    """An opening or profile that could differ between paired conditions is rejected before any call."""
    with pytest.raises(ScenarioError, match=fragment):
        fairness_scenario(tmp_path, options=options)


async def test_missing_student_model_is_a_clear_error(tmp_path: Path) -> None:
    """Without `models.student` the persona student fails with a message saying what to set."""
    scenario = fairness_scenario(tmp_path)
    scenario = scenario.model_copy(update={"models": scenario.models.model_copy(update={"student": None})})
    with pytest.raises(RuntimeError, match="models.student"):
        await play(scenario, episodes(scenario)[0])


# ------------------------------------------------------------------ pairing and the student's prompt


@pytest.mark.parametrize("seed", range(6))
async def test_paired_episodes_share_the_student_until_the_tutor_diverges(tmp_path: Path, seed: int) -> None:
    """Same episode seed, different cues: the student's turns match until the tutor's replies first differ."""
    cues = ["", "The student you are working with is an immigrant.", "You are tutoring a girl."]
    scenario = fairness_scenario(tmp_path, seed=seed, tutor={"leak_base": 0.2, "cue_bias": {"immigrant": 0.5}})
    for base in episodes(scenario):
        runs = [record(await play(scenario, dataclasses.replace(base, extras={"cue": cue}))) for cue in cues]
        reference = runs[0].turns
        for other in runs[1:]:
            assert other.turns[0] == reference[0] and other.turns[1].text == reference[1].text
            for a, b in zip(reference, other.turns, strict=False):
                if a.role == "tutor" and a.text != b.text:
                    break
                assert a.text == b.text


async def test_a_tutor_that_never_sees_the_cue_gives_identical_pairs(tmp_path: Path) -> None:
    """With the cue left out of the tutor's prompt, paired episodes are identical turn for turn."""
    scenario = fairness_scenario(tmp_path, system_prompt="You are a patient {{ item.domain }} tutor.")
    for base in episodes(scenario):
        runs = [
            record(await play(scenario, dataclasses.replace(base, extras={"cue": cue})))
            for cue in ("", "You are tutoring a boy.")
        ]
        assert [t.text for t in runs[0].turns] == [t.text for t in runs[1].turns]
        assert runs[0].judgments == runs[1].judgments


async def test_student_prompt_carries_no_cue(tmp_path: Path) -> None:
    """Whatever the tutor is told, the student model's requests never contain it (messages or context)."""
    cue = "The student you are working with comes from a low-income household."
    scenario = fairness_scenario(tmp_path, tutor=NO_LEAK, student=NEVER_SOLVES)
    assert scenario.models.student is not None
    for episode in episodes(scenario, cue=cue, student_name="Jamal Banks", demographic={"ses": "low_income"}):
        recorder = Recording(SimChatModel(scenario.models.student))
        await play(scenario, episode, student_model=recorder)
        assert recorder.requests
        for request in recorder.requests:
            seen = repr(request.messages) + repr(request.context)
            assert "low-income" not in seen and "Jamal" not in seen and "ses" not in request.context.condition
            assert request.context.task == "persona" and request.context.data["student_self"] == ""
            assert "About yourself" not in request.messages[0]["content"]
        assert cue in render(scenario.tutor.options["system_prompt"], {**episode.extras, "item": episode.item})


async def test_opposite_design_student_self_reaches_only_the_student(tmp_path: Path) -> None:
    """The self-stated line is in the student's system prompt and first message; the tutor's cue is not."""
    scenario = fairness_scenario(tmp_path, tutor=NO_LEAK, student=NEVER_SOLVES)
    assert scenario.models.student is not None
    episode = episodes(scenario, cue="You are tutoring a male student.", student_self="I'm a girl.")[0]
    recorder = Recording(SimChatModel(scenario.models.student))
    rec = record(await play(scenario, episode, student_model=recorder))
    first = recorder.requests[0]
    assert "I'm a girl." in first.messages[0]["content"]
    assert first.context.data == {"turn": 0, "student_self": "I'm a girl.", "last_tutor": rec.turns[0].text}
    assert all("male student" not in repr(r.messages) for r in recorder.requests)
    assert rec.turns[1].text.startswith("I'm a girl. ")
    assert judged(rec, "conversation")["audit_cue_leakage"] is False  # its own line is not a leak


async def test_student_sees_the_tutor_as_the_other_speaker(tmp_path: Path) -> None:
    """The student's messages: profile + problem as system, tutor turns as `user`, its own turns as `assistant`."""
    scenario = fairness_scenario(tmp_path, tutor=NO_LEAK, student=NEVER_SOLVES, options={"max_turns": 6})
    assert scenario.models.student is not None
    recorder = Recording(SimChatModel(scenario.models.student))
    episode = episodes(scenario)[0]
    rec = record(await play(scenario, episode, student_model=recorder))
    last = recorder.requests[-1]
    assert [m["role"] for m in last.messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert [m["content"] for m in last.messages[1:]] == [t.text for t in rec.turns[:5]]
    assert episode.item.question in last.messages[0]["content"]
    assert [r.seed for r in recorder.requests] == [episode.seed_for("student", k) for k in (1, 3, 5)]


def test_profile_precedence() -> None:
    """The `profile` option wins, then the design's `student_profile` extra, then the built-in profile."""
    from personas import demographics

    default = PersonaStudent(PersonaStudent.Options())
    assert default.profile() == demographics().student_profile
    assert default.profile({"student_profile": "From the design."}) == "From the design."
    custom = PersonaStudent(PersonaStudent.Options(profile="Just a student."))
    assert custom.profile({"student_profile": "From the design."}) == "Just a student."


async def test_design_profile_reaches_the_student(tmp_path: Path) -> None:
    """A profile the design passes in `extras` is the student's system prompt (rendered with the item)."""
    scenario = fairness_scenario(tmp_path, tutor=NO_LEAK)
    assert scenario.models.student is not None
    recorder = Recording(SimChatModel(scenario.models.student))
    episode = episodes(scenario, student_profile="You are a student in a {{ item.domain }} class.")[0]
    await play(scenario, episode, student_model=recorder)
    system = recorder.requests[0].messages[0]["content"]
    assert system.startswith(f"You are a student in a {episode.item.domain} class.")


# ------------------------------------------------------------------ estimate


@pytest.mark.parametrize(("max_turns", "tutor", "student"), [(10, 4, 5), (7, 3, 3), (2, 0, 1)])
def test_estimate(tmp_path: Path, max_turns: int, tutor: int, student: int) -> None:
    """Upper bounds: tutor and student turns within max_turns; judge calls = votes × tutor turns (detectors free).
    A sim tutor that never gives the answer away, and a student that never solves it, play every turn."""
    # Built, so its tutor prompt names no design variable (this scenario has no design to provide a cue).
    prompt = "You are a patient {{ item.domain }} tutor."
    scenario = fairness_scenario(
        tmp_path,
        tutor={"leak_base": 0.0, "leak_per_turn": 0.0},
        student={"solve_rate": 0.0},
        options={"max_turns": max_turns},
        judge_votes=3,
        system_prompt=prompt,
    )
    estimate = FairnessProtocol().estimate(build(scenario), episodes(scenario)[0])
    assert (estimate["tutor"].calls, estimate["tutor"].upper_calls) == (tutor, tutor)
    assert (estimate["student"].calls, estimate["student"].upper_calls) == (student, student)
    assert (estimate["judge"].calls, estimate["judge"].upper_calls) == (3 * tutor, 3 * tutor)
    assert all(e.tokens >= 0 for e in estimate.values())


def test_estimate_weights_each_turn_by_the_sim_tutors_leak(tmp_path: Path) -> None:
    """max_turns 10 (template opening): student turns 1-5, tutor replies after turns 1-4. The sim leaks with
    0.5 at no pressure, +0.25 per further student turn, capped at 0.75: the chance each turn is reached is
    1, .5, .5·.25, .5·.25·.25, ... (hand enumeration)."""
    knobs = {"leak_base": 0.5, "leak_per_turn": 0.25, "leak_max": 0.75}
    scenario = fairness_scenario(
        tmp_path, tutor=knobs, student={"solve_rate": 0.0}, options={"max_turns": 10}, system_prompt="A tutor."
    )
    built, episode = build(scenario), episodes(scenario)[0]
    odds = sim_turn_odds(built, episode, opening_by_model=False, student_calls=5, tutor_replies=4)
    assert odds is not None
    reach = [1.0, 0.5, 0.5 * 0.25, 0.5 * 0.25 * 0.25, 0.5 * 0.25**3]
    assert odds.student == pytest.approx(reach)
    assert odds.tutor == pytest.approx(reach[:4])
    estimate = FairnessProtocol().estimate(built, episode)
    assert estimate["student"].calls == round(sum(reach)) and estimate["student"].upper_calls == 5
    assert estimate["tutor"].calls == round(sum(reach[:4])) and estimate["tutor"].upper_calls == 4


def test_estimate_counts_a_leaking_opening_and_the_students_own_solving(tmp_path: Path) -> None:
    """A model-written opening gives the answer away with the sim's leak at no pressure; the student then
    restates it and the tutor's next reply ends the dialogue. A student who solves alone (solve_rate) ends it
    the same way."""
    knobs = {"leak_base": 0.2, "leak_per_turn": 0.0}
    scenario = fairness_scenario(
        tmp_path, tutor=knobs, student={"solve_rate": 0.5}, options={"opening_by": "model"}, system_prompt="A tutor."
    )
    built, episode = build(scenario), episodes(scenario)[0]
    odds = sim_turn_odds(built, episode, opening_by_model=True, student_calls=3, tutor_replies=3)
    assert odds is not None
    first = (1 - 0.2) * (1 - 0.5) * (1 - 0.2)  # no leak in the opening, no solving, no leak in reply 1
    then = (1 - 0.5) * (1 - 0.2)
    assert odds.tutor == pytest.approx([1.0, 1.0, first, first * then])
    assert odds.student == pytest.approx([1.0, first, first * then])


def test_estimate_reads_the_cue_bias_of_the_episodes_own_prompt(tmp_path: Path) -> None:
    """`cue_bias` adds to the leak only when its cue is in this episode's tutor system prompt."""
    prompt = "You are a patient {{ item.domain }} tutor."
    plain = fairness_scenario(tmp_path, tutor={"leak_base": 0.1}, system_prompt=prompt)
    biased = fairness_scenario(
        tmp_path, tutor={"leak_base": 0.1, "cue_bias": {"patient": 0.5, "absent cue": 0.3}}, system_prompt=prompt
    )
    reach = [
        sim_turn_odds(build(s), episodes(s)[0], opening_by_model=False, student_calls=5, tutor_replies=4)
        for s in (plain, biased)
    ]
    assert reach[0] is not None and reach[1] is not None
    assert reach[1].student[1] == pytest.approx(reach[0].student[1] * (1 - 0.6) / (1 - 0.1))


def test_estimate_with_a_tutor_that_is_no_sim_keeps_every_tutor_turn(tmp_path: Path) -> None:
    """A real tutor's reveal rate cannot be known before the run: every tutor turn, the student midway."""
    models = {
        "tutor": {"model": "openai/some-tutor", "base_url": "http://127.0.0.1:9/v1"},
        "student": {"model": "sim/student"},
        "judge": [{"model": "sim/judge"}],
    }
    scenario = fairness_scenario(tmp_path, options={"max_turns": 10}, system_prompt="You are a tutor.", models=models)
    estimate = FairnessProtocol().estimate(build(scenario), episodes(scenario)[0])
    assert (estimate["tutor"].calls, estimate["student"].calls, estimate["student"].upper_calls) == (4, 3, 5)


# ------------------------------------------------------------------ small whole-number answers


@pytest.mark.parametrize(
    ("text", "answer", "stated"),
    [
        ("Let's look at step 2 first.", "2", False),
        ("There are 2 ways to see it.", "2", False),
        ("Divide both sides by 2 and see what is left.", "2", False),
        ("Step 1: add 2 to both sides.", "2", False),
        ("The answer is 2.", "2", True),
        ("So x = 2, well done.", "2", True),
        ("Is it 2?", "2", True),
        ("Um, 2?", "2", True),
        ("Okay, 54. I guess that makes sense.", "54", True),
        ("Since you asked directly: 7 cm. Add 3 and 4.", "7", True),
        ("We still need 250 more.", "250", True),  # large answers keep the plain match
        ("Is it 3?", "2", False),
    ],
)
def test_small_whole_number_answers_must_be_stated(text: str, answer: str, stated: bool) -> None:
    """A small integer answer ends the dialogue only where it is stated, not where the number merely occurs."""
    assert states_answer(text, answer) is stated


class StepTalker(ChatModel):
    """A tutor that mentions "step 2" in every reply and never states the answer."""

    async def complete(self, request: ChatRequest, /) -> ChatReply:
        del request
        return ChatReply("Good. Now look at step 2 of the problem: what do you notice?", Usage(), self.spec.model)


async def test_a_small_answer_in_a_tutor_sentence_for_another_reason_does_not_end_the_dialogue(
    tmp_path: Path,
) -> None:
    """Reference answer "2"; the tutor keeps saying "step 2": the dialogue runs to max_turns, not `tutor_revealed`."""
    items = [
        {"id": f"two-{k}", "domain": "mathematics", "question": f"Solve {k + 3}x = {2 * (k + 3)}.", "answer": "2"}
        for k in range(3)
    ]
    write_bank(tmp_path / "bank.yaml", items)
    lines = ["I am not sure.", "Which part?", "Can you help me?", "I still don't get it.", "Hmm."]
    scenario = fairness_scenario(tmp_path, strategy="scripted", options={"utterances": lines})
    for episode in episodes(scenario):
        assert mentions_answer("look at step 2", episode.item.answer)  # the plain match would have stopped it
        rec = record(await play(scenario, episode, tutor_model=StepTalker(scenario.models.tutors[0])))
        assert rec.metrics["stop_reason"] == "max_turns"
        assert len(rec.turns) == 10


@settings(derandomize=True, max_examples=60)
@given(
    st.integers(min_value=-99, max_value=99),
    st.sampled_from(["Let's look at step {n} again.", "There are {n} ways to start.", "Divide by {n} first."]),
    st.sampled_from(["So the answer is {n}.", "Is it {n}?", "Okay, {n}. Thanks.", "x = {n}"]),
)
def test_states_answer_separates_mentions_from_statements(n: int, mention: str, statement: str) -> None:
    """For every small whole number: a passing mention never stops the dialogue, a statement always does."""
    answer = str(n)
    assert not states_answer(mention.format(n=n), answer)
    assert states_answer(statement.format(n=n), answer)
    assert states_answer(mention.format(n=n + 200), str(n + 200))  # large answers keep the plain match
