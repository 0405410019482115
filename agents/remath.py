"""The ReMath remediation protocol (scenario kind `remediation`): diagnose a mistake, choose a strategy, respond.

An episode replays a mistake item's history (recorded as turns with no model: nobody wrote them in this
run) and asks the tutor one of ReMath's tasks, named by the episode's condition:

* `task: error` — Task A: which error type explains the student's last message (JSON `{"error": ...}`);
* `task: strategy` — Task B: which strategy to use and with which intention (JSON `{"strategy", "intention"}`);
* `task: response` with `given: none | error | strategy | both` — Task C: the reply to the student,
  unconstrained or told the expert's error type, strategy and intention, or both (the paper's ablations).

The `remath` design generates these conditions; `paired_factors` holds both keys, so every condition of an
item shares its seed and the Task C conditions compare like with like (paired over items).

A classification reply that is not valid JSON with a label from the paper's lists is kept in the record as a
hidden tutor turn and asked again (`retries`), then the episode is an error — never a silent label. Metrics:
`task`, `given`, and for Tasks A/B `<label>_pred` and `<label>_gold` (error, strategy, intention); the
Task C reply is the judged tutor turn. Judges are run on the reply only (Task C) and on the conversation.
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
    CallEstimate,
    Episode,
    EpisodeContext,
    RequestContext,
    Scenario,
    Utterance,
    judge_calls,
)
from engine.text import parse_json_object
from personas.remath import ERROR_TYPES, INTENTIONS, STRATEGIES

__all__ = (
    "GIVEN",
    "TASKS",
    "MistakeStudent",
    "RemathDesign",
    "RemediationProtocol",
    "RemediationTutor",
    "parse_error_label",
    "parse_strategy_labels",
    "remath_messages",
)

Task = Literal["error", "strategy", "response"]
Given = Literal["none", "error", "strategy", "both"]
TASKS: tuple[Task, ...] = ("error", "strategy", "response")
GIVEN: tuple[Given, ...] = ("none", "error", "strategy", "both")

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

_DEFAULT_LENGTH = "at most two short sentences"


def _bullets(labels: Mapping[str, str], *, names_only: bool = False) -> str:
    return "\n".join(f"- {name}" if names_only else f"- {key}: {name}" for key, name in labels.items())


def _history(item_data: Mapping[str, Any]) -> str:
    lines = [f"{'STUDENT' if t['role'] == 'student' else 'TUTOR'}: {t['text']}" for t in item_data["history"]]
    return "\n".join(lines)


def remath_messages(
    episode: Episode, *, task: str, given: str = "none", length: str = _DEFAULT_LENGTH
) -> list[dict[str, str]]:
    """The chat messages for one ReMath task (the paper's set-up, in simrun's words)."""
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
        model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
        tasks: list[Task] = Field(default_factory=lambda: list(TASKS), min_length=1)
        """Which tasks to run: error (A), strategy (B), response (C)."""
        given: list[Given] = Field(default_factory=lambda: list(GIVEN), min_length=1)
        """Task C conditions: what the tutor is told besides the history (the expert's labels)."""
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


class RemediationTutor:
    """The ReMath tutor (`agent: remediation`): one model call for the episode's task."""

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
        length: str = _DEFAULT_LENGTH
        """Task C's length instruction (the paper found unconstrained replies 5–10× too long)."""
        retries: int = Field(default=2, ge=0)
        """Extra attempts when a Task A/B reply has no valid label."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.retries = options.retries

    async def respond(self, ctx: EpisodeContext, /) -> Utterance:
        task = ctx.condition.get("task", "response")
        given = ctx.condition.get("given", "none")
        client = ctx.clients["tutor"]
        reply, latency = await client.complete(
            remath_messages(ctx.episode, task=task, given=given, length=self.options.length),
            context=RequestContext(role="tutor", item=ctx.episode.item, task=f"remath_{task}", condition=ctx.condition),
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


_PROMPT_TOKENS = 450
_REPLY_TOKENS = 80


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
        retries = int(getattr(ctx.tutor, "retries", 2))
        problems: list[str] = []
        for _ in range(retries + 1):
            utterance = await ctx.tutor.respond(ctx)
            if utterance is None:
                raise BadModelOutput("the tutor gave no reply")
            turn = await ctx.add_turn("tutor", utterance)
            if task == "response":
                await ctx.judge(turn.index)
                break
            try:
                self._record_labels(ctx, task, turn.text)
                break
            except ValueError as exc:
                problems.append(str(exc)[:200])
                ctx.hide(turn.index)
        else:
            raise BadModelOutput(f"task {task}: no valid label in {retries + 1} replies ({'; '.join(problems)})")
        await ctx.judge("conversation")

    @staticmethod
    def _record_labels(ctx: EpisodeContext, task: str, text: str) -> None:
        if task == "error":
            ctx.metrics.update(error_pred=parse_error_label(text))
        else:
            strategy, intention = parse_strategy_labels(text)
            ctx.metrics.update(strategy_pred=strategy, intention_pred=intention)

    def estimate(self, scenario: Scenario, episode: Episode, /) -> Mapping[str, CallEstimate]:
        """Upper bound: every retry of a classification is used; a Task C reply is judged once."""
        retries = int(scenario.tutor.options.get("retries", 2))
        task = episode.condition.get("task", "response")
        tutor_calls = 1 if task == "response" else retries + 1
        tokens = tutor_calls * (_PROMPT_TOKENS + _REPLY_TOKENS)
        calls = judge_calls(scenario, 1 if task == "response" else 0)
        return {
            "tutor": CallEstimate(tutor_calls, tokens),
            "judge": CallEstimate(calls, calls * (_PROMPT_TOKENS + 2 * _REPLY_TOKENS + 120)),
        }


TUTORS.add("remediation", RemediationTutor)
STUDENTS.add("mistake", MistakeStudent)
PROTOCOLS.add("remediation", RemediationProtocol())
