"""The ReMath remediation protocol (scenario kind `remediation`): diagnose a mistake, choose a strategy, respond.

An episode replays a mistake item's history (recorded as turns with no model: nobody wrote them in this
run) and asks the tutor one of ReMath's tasks, named by the episode's condition:

* `task: error` — Task A: which error type explains the student's last message (JSON `{"error": ...}`);
* `task: strategy` — Task B: which strategy to use and with which intention (JSON `{"strategy", "intention"}`);
* `task: response` with `given: none | error | strategy | both` — Task C: the reply to the student,
  unconstrained or told the expert's error type, strategy and intention, or both (the paper's ablations);
  `given: predicted` — the paper's future-work condition: the tutor first answers Tasks A and B (hidden
  turns, labels recorded as `<label>_pred`), then replies told its own labels;
  `given: human` — not the tutor: the item's expert reply replayed (`ExpertReplayTutor`), the paper's
  "Human" row, judged like any reply.

The `remath` design generates these conditions; `paired_factors` holds both keys, so every condition of an
item shares its seed and the Task C conditions compare like with like (paired over items).

A classification reply that is not valid JSON with a label from the paper's lists is kept in the record as a
hidden tutor turn and asked again (`retries`), then the episode is an error — never a silent label. Metrics:
`task`, `given`, and for Tasks A/B `<label>_pred` and `<label>_gold` (error, strategy, intention); the
Task C reply is the judged tutor turn, and `meta` keeps the item's `reference` and `novice` replies (the
automated metrics compare with them). A doubly-labelled Bridge snippet adds `snippet`, `annotator` (1 or
2: this record's labelling) and `<label>_a1`, `<label>_a2` (both teachers' labels), for human–human
agreement. Judges are run on the reply only (Task C) and on the conversation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine import (
    DESIGNS,
    PROTOCOLS,
    STUDENTS,
    TUTORS,
    BadModelOutput,
    BuiltScenario,
    CallEstimate,
    Episode,
    EpisodeContext,
    RequestContext,
    Utterance,
    brief,
    judge_calls,
    parse_json_object,
)
from personas.remath import ERROR_TYPES, INTENTIONS, STRATEGIES

__all__ = (
    "GIVEN",
    "TASKS",
    "ExpertReplayTutor",
    "MistakeStudent",
    "RemathDesign",
    "RemediationProtocol",
    "RemediationTutor",
    "parse_error_label",
    "parse_strategy_labels",
    "remath_messages",
)

Task = Literal["error", "strategy", "response"]
Given = Literal["none", "error", "strategy", "both", "predicted", "human"]
TASKS: tuple[Task, ...] = ("error", "strategy", "response")
GIVEN: tuple[Given, ...] = ("none", "error", "strategy", "both", "predicted", "human")
"""Task C conditions: the paper's four, the tutor told its own Task A/B labels, and the expert's reply."""

_ERROR_PROMPT = """\
You are an experienced elementary-school math teacher reviewing a chat between a tutor and a young student.
The student's last message contains a mistake. Decide which of these best describes the student's error:

{labels}

Pick exactly one label. Reply with one JSON object and nothing else:
{{"error": "<one of: {names}>", "rationale": "<one sentence>"}}"""

_STRATEGY_PROMPT = """\
You are an experienced elementary-school math teacher reviewing a chat between a tutor and a young student.
The student's last message contains a mistake. Decide how you would respond: pick one strategy and the
intention behind it.

Strategies:
{strategies}

Intentions:
{intentions}

Reply with one JSON object and nothing else, using the names exactly as listed:
{{"strategy": "<a strategy>", "intention": "<an intention>", "rationale": "<one sentence>"}}"""

_RESPONSE_PROMPT = """\
You are a tutor chatting one-on-one with an elementary-school student about math. The student's last
message contains a mistake. Write your next message to the student: useful, so the student can move
forward, and caring, so the student stays willing to try. {guidance}Write as a person types in a chat, {length},
with no lists or formatting, and do not write the student's reply."""

_DEFAULT_LENGTH = "in one sentence at most"
"""The paper's constraint (its appendix E: "maximum one sentence")."""


def _bullets(labels: Mapping[str, str], *, names_only: bool = False) -> str:
    return "\n".join(f"- {name}" if names_only else f"- {key}: {name}" for key, name in labels.items())


def _history(item_data: Mapping[str, Any]) -> str:
    lines = [f"{'STUDENT' if t['role'] == 'student' else 'TUTOR'}: {t['text']}" for t in item_data["history"]]
    return "\n".join(lines)


def remath_messages(
    episode: Episode,
    *,
    task: str,
    given: str = "none",
    length: str = _DEFAULT_LENGTH,
    predicted: Mapping[str, str] | None = None,
) -> list[dict[str, str]]:
    """The chat messages for one ReMath task (the paper's set-up, in simrun's words).

    `predicted` holds the tutor's own Task A/B labels (`error`, `strategy`, `intention`) for `given: predicted`.
    """
    data = episode.item.data
    user = (
        f"Lesson topic: {data['topic']}\n\nConversation (the last message is the student's mistake):\n{_history(data)}"
    )
    if task == "error":
        system = _ERROR_PROMPT.format(labels=_bullets(ERROR_TYPES), names=", ".join(ERROR_TYPES))
    elif task == "strategy":
        system = _STRATEGY_PROMPT.format(
            strategies=_bullets(STRATEGIES, names_only=True), intentions=_bullets(INTENTIONS, names_only=True)
        )
    else:
        guidance = ""
        if given == "predicted":
            own = predicted or {}
            guidance = (
                f"You judged the student's error as: {ERROR_TYPES[own['error']]} You chose this strategy: "
                f"{STRATEGIES[own['strategy']]}, with this intention: {INTENTIONS[own['intention']]}. "
            )
        if given in ("error", "both"):
            guidance += f"An experienced teacher judged the student's error as: {ERROR_TYPES[data['error']]} "
        if given in ("strategy", "both"):
            guidance += (
                f"Use this strategy: {STRATEGIES[data['strategy']]}, with this intention: "
                f"{INTENTIONS[data['intention']]}. "
            )
        system = _RESPONSE_PROMPT.format(guidance=guidance, length=length)
        user += "\n\nYour message to the student:"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _lookup(value: Any, labels: Mapping[str, str], aliases: Mapping[str, str] | None = None) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a label string, got {value!r}")
    folded = " ".join(value.strip().lower().replace("’", "'").split())
    for key, name in labels.items():
        if folded in (key.lower(), name.lower(), key.lower().replace("_", " ")):
            return key
    if aliases and folded in aliases:
        return aliases[folded]
    raise ValueError(f"{value!r} is not one of: {', '.join(labels)}")


def parse_error_label(text: str) -> str:
    """Task A's label from a model's reply (paper spelling); `ValueError` when there is none."""
    try:
        data = parse_json_object(text)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or "error" not in data:
        raise ValueError('expected a JSON object with an "error" key')
    return _lookup(data["error"], ERROR_TYPES, {"not sure": "not-sure", "diagnose": "not-sure", "na": "N/A"})


def parse_strategy_labels(text: str) -> tuple[str, str]:
    """Task B's (strategy, intention) keys from a model's reply; `ValueError` when either is missing."""
    try:
        data = parse_json_object(text)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or "strategy" not in data or "intention" not in data:
        raise ValueError('expected a JSON object with "strategy" and "intention" keys')
    return _lookup(data["strategy"], STRATEGIES), _lookup(data["intention"], INTENTIONS)


@DESIGNS.register("remath")
class RemathDesign:
    """ReMath's tasks as conditions: Task A, Task B, and Task C under each kind of given information."""

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        tasks: list[Task] = Field(default_factory=lambda: list(TASKS), min_length=1)
        """Which tasks to run: error (A), strategy (B), response (C)."""
        given: list[Given] = Field(default_factory=lambda: list(GIVEN), min_length=1)
        """Task C conditions: what the tutor is told besides the history (the expert's labels, or its own), and
        `human`, the expert's reply replayed (the paper's Human row)."""
        min_items: int = Field(default=15, ge=1)
        """Fewest items the paired comparisons accept (lower it only for smoke tests)."""

        @field_validator("tasks", "given")
        @classmethod
        def _distinct(cls, values: list[str]) -> list[str]:
            if len(set(values)) != len(values):
                raise ValueError("a level is listed twice")
            return values

    def __init__(self, options: Options) -> None:
        self.options = options

    @property
    def paired_factors(self) -> tuple[str, ...]:
        return ("task", "given")

    @property
    def min_items(self) -> int:
        return self.options.min_items

    def conditions(self) -> list[dict[str, str]]:
        found: list[dict[str, str]] = []
        for task in self.options.tasks:
            if task == "response":
                found += [{"task": task, "given": given} for given in self.options.given]
            else:
                found.append({"task": task, "given": "none"})
        return found

    def extras(self, episode: Episode, /) -> dict[str, Any]:
        del episode
        return {}

    def tutor_free(self, condition: dict[str, str], /) -> bool:
        """`given: human` replays the expert's reply, whoever the tutor: a study plays it once, not per tutor."""
        return condition.get("given") == "human"


class ExpertReplayTutor:
    """Says the item's expert reply (`agent: expert_replay`, and `given: human` under `remediation`).

    It calls no model: the turn is recorded with model `human/expert`, so the paper's Human row is judged by
    the same judge, against the same baseline, as every tutor reply.
    """

    def __init__(self, options: object = None) -> None:
        del options

    async def respond(self, ctx: EpisodeContext, /) -> Utterance:
        reference = str(ctx.episode.item.data.get("reference") or "")
        if not reference:
            raise BadModelOutput(f"item {ctx.episode.item.id!r} has no expert reply to replay")
        return Utterance(reference, model="human/expert")


class RemediationTutor:
    """The ReMath tutor (`agent: remediation`): one model call for the episode's task (or its stage)."""

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        length: str = _DEFAULT_LENGTH
        """Task C's length instruction (the paper found unconstrained replies 5–10× too long)."""
        retries: int = Field(default=2, ge=0)
        """Extra attempts when a Task A/B reply has no valid label."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.retries = options.retries
        self._expert = ExpertReplayTutor()

    async def respond(self, ctx: EpisodeContext, /) -> Utterance:
        given = ctx.condition.get("given", "none")
        if given == "human":
            return await self._expert.respond(ctx)
        task = str(ctx.meta.get(STAGE) or ctx.condition.get("task", "response"))
        predicted = {k: str(ctx.metrics.get(f"{k}_pred", "")) for k in ("error", "strategy", "intention")}
        client = ctx.clients["tutor"]
        reply, latency = await client.complete(
            remath_messages(ctx.episode, task=task, given=given, length=self.options.length, predicted=predicted),
            context=RequestContext(
                role="tutor",
                item=ctx.episode.item,
                task=f"remath_{task}",
                condition=ctx.condition,
                data=predicted if given == "predicted" and task == "response" else {},
            ),
            seed=ctx.episode.seed_for("tutor", len(ctx.turns)),
            json_output=task != "response",
        )
        return Utterance(reply.text, model=reply.model, usage=reply.usage, latency_s=latency)


class MistakeStudent:
    """The student of a mistake item (`strategy: mistake`): its part is the item's history; it says no more."""

    def __init__(self, options: object = None) -> None:
        del options

    async def respond(self, ctx: EpisodeContext, /) -> Utterance | None:
        del ctx
        return None


STAGE = "remath_stage"
"""`ctx.meta` key: the task the tutor answers now, when an episode asks more than one (`given: predicted`)."""

_PROMPT_TOKENS = 450
_REPLY_TOKENS = 80
_TYPICAL_TUTOR_CALL = 200
_TYPICAL_JUDGE_CALL = 295


class RemediationProtocol:
    """Replays the item's history, asks the tutor the condition's task, records labels or judges the reply."""

    async def run(self, ctx: EpisodeContext, /) -> None:
        item = ctx.episode.item
        if "history" not in item.data:
            raise BadModelOutput(f"item {item.id!r} is not a mistake item (use the `remath` or `bridge` source)")
        for turn in item.data["history"]:
            await ctx.add_turn(turn["role"], Utterance(turn["text"]))
        task = ctx.condition.get("task", "response")
        ctx.metrics.update(
            task=task,
            given=ctx.condition.get("given", "none"),
            error_gold=item.data["error"],
            strategy_gold=item.data["strategy"],
            intention_gold=item.data["intention"],
        )
        annotations = item.data.get("annotations") or []
        if len(annotations) > 1:
            ctx.metrics.update(snippet=str(item.data["snippet"]), annotator=int(item.data["annotator"]) + 1)
            for label in ("error", "strategy", "intention"):
                ctx.metrics.update({f"{label}_a{n}": str(annotations[n - 1][label]) for n in (1, 2)})
        if task == "response":
            ctx.meta.update(reference=str(item.data.get("reference", "")), novice=str(item.data.get("novice", "")))
        retries = int(getattr(ctx.tutor, "retries", 2))
        if task == "response" and ctx.condition.get("given") == "predicted":
            for stage in ("error", "strategy"):
                ctx.meta[STAGE] = stage
                try:
                    await self._classify(ctx, stage, retries, hide_all=True)
                finally:
                    del ctx.meta[STAGE]
        if task == "response":
            utterance = await ctx.tutor.respond(ctx)
            if utterance is None:
                raise BadModelOutput("the tutor gave no reply")
            turn = await ctx.add_turn("tutor", utterance)
            await ctx.judge(turn.index)
        else:
            await self._classify(ctx, task, retries, hide_all=False)
        await ctx.judge("conversation")

    async def _classify(self, ctx: EpisodeContext, task: str, retries: int, *, hide_all: bool) -> None:
        """Ask a Task A/B question until a valid label (retries), recording it; bad replies stay, hidden."""
        problems: list[str] = []
        for _ in range(retries + 1):
            utterance = await ctx.tutor.respond(ctx)
            if utterance is None:
                raise BadModelOutput("the tutor gave no reply")
            turn = await ctx.add_turn("tutor", utterance)
            try:
                self._record_labels(ctx, task, turn.text)
            except ValueError as exc:
                problems.append(brief(str(exc)))
                ctx.hide(turn.index)
                continue
            if hide_all:
                ctx.hide(turn.index)
            return
        raise BadModelOutput(f"task {task}: no valid label in {retries + 1} replies ({'; '.join(problems)})")

    @staticmethod
    def _record_labels(ctx: EpisodeContext, task: str, text: str) -> None:
        if task == "error":
            ctx.metrics.update(error_pred=parse_error_label(text))
        else:
            strategy, intention = parse_strategy_labels(text)
            ctx.metrics.update(strategy_pred=strategy, intention_pred=intention)

    def estimate(self, built: BuiltScenario, episode: Episode, /) -> Mapping[str, CallEstimate]:
        """Upper bound: every retry of a classification is used; a Task C reply is judged once. Expected: no
        retry, at the call sizes the simulator measures (bench/estimate_accuracy.py)."""
        scenario = built.scenario
        retries = int(scenario.tutor.options.get("retries", 2))
        task = episode.condition.get("task", "response")
        given = episode.condition.get("given", "none")
        tutor_calls, expected = _tutor_calls(task, given, retries), _tutor_calls(task, given, 0)
        tokens = tutor_calls * (_PROMPT_TOKENS + _REPLY_TOKENS)
        calls = judge_calls(built, 1 if task == "response" else 0)
        return {
            "tutor": CallEstimate(expected, expected * _TYPICAL_TUTOR_CALL, tutor_calls, tokens),
            "judge": CallEstimate(
                calls, calls * _TYPICAL_JUDGE_CALL, calls, calls * (_PROMPT_TOKENS + 2 * _REPLY_TOKENS + 120)
            ),
        }


def _tutor_calls(task: str, given: str, retries: int) -> int:
    if task != "response":
        return retries + 1
    return {"human": 0, "predicted": 1 + 2 * (retries + 1)}.get(given, 1)


TUTORS.add("remediation", RemediationTutor)
TUTORS.add("expert_replay", ExpertReplayTutor)
STUDENTS.add("mistake", MistakeStudent)
PROTOCOLS.add("remediation", RemediationProtocol())
