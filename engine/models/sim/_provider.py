"""The `sim` provider: an offline, deterministic stand-in for a language model, and a calibrated instrument.

It answers by role — `sim/tutor`, `sim/student`, `sim/judge` — from the messages it is given and the
engine-side `RequestContext` (the item's reference answer, the judge's rubric, the attacker's pressure line).
Every reply is a pure function of the request and its seed, so a run's results do not depend on scheduling.

The sim knows no scenario kind: a request whose `(role, task)` a plug-in registered (`sim_tasks.sim_task`)
is answered by that plug-in's behaviour, with the knobs plug-ins add to the role (`sim_tasks.sim_knobs`).
Every judge rubric is such a behaviour. What is left here is the core tutor and student.

The tutor's behaviour has knobs (`params` of the model spec):

* `leak_base` — probability that the tutor gives the answer away at the first student turn;
* `leak_per_turn` — added for each further student turn of visible pressure (amplification);
* `cue_bias` — `{cue: delta}`: when `cue` appears in the tutor's system prompt, `delta` is added to the leak
  probability (an effect of known size for audits of the tutor's treatment of students);
* `refusal_rate` — share of non-leaking replies that refuse explicitly (`REFUSAL_MARKERS`);
* `recognize_rate` — in a tutor-led dialogue (below), the chance that the reply names a wrong number the
  student just gave and corrects it in an encouraging tone;
* `leak_max`, `latency_s`.

**Tutor-led dialogues.** When the conversation the tutor is shown starts with the tutor's own message (the
tutor opens with the question), the tutor also reacts to what the student last said: a stated reference
answer is confirmed (without restating it, and with no leak draw), and a wrong number (`wrong_numbers`: one
that is neither the answer nor a number printed in the question) is recognised with probability
`recognize_rate`, with a correction phrase from `RECOGNITION_MARKERS` softened by one of
`ENCOURAGEMENT_MARKERS`. Leaking keeps its knobs (`leak_base`, `leak_per_turn`, `cue_bias`), so a cue in the
system prompt plants a leakage effect of known size. Student-led dialogues are untouched. Judges that score
these replies read the same marker lists, so keep them in step.

The core student writes the pressure line it is given (`data["pressure"]`), in one of several phrasings, as
plain text or as `{"message", "rationale"}` JSON. None of this is a language model, and reports say so
whenever a `sim` model took part.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import anyio
import orjson
from pydantic import BaseModel, ConfigDict, Field

from engine.core._errors import ScenarioError
from engine.core._records import Usage
from engine.core._text import mentions_answer, numbers_in, word_count
from engine.models._provider import ChatModel, ChatReply, ChatRequest, Message
from engine.models.sim._embed import SimEmbedParams, embed_texts
from engine.models.sim._tasks import knobs_model, lookup
from engine.scenario._items import Item
from engine.scenario._spec import ModelSpec

__all__ = (
    "ACTION_PATTERN",
    "ENCOURAGEMENT_MARKERS",
    "RECOGNITION_MARKERS",
    "REFUSAL_MARKERS",
    "SimChatModel",
    "SimJudgeParams",
    "SimStudentParams",
    "SimTutorParams",
    "format_number",
    "last_message",
    "wrong_numbers",
)


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    latency_s: float = Field(default=0.0, ge=0)


class SimTutorParams(_Params):
    leak_base: float = Field(default=0.15, ge=0, le=1)
    leak_per_turn: float = Field(default=0.08, ge=-1, le=1)
    leak_max: float = Field(default=0.95, ge=0, le=1)
    refusal_rate: float = Field(default=0.35, ge=0, le=1)
    cue_bias: dict[str, float] = Field(default_factory=dict)
    recognize_rate: float = Field(default=0.7, ge=0, le=1)


class SimStudentParams(_Params):
    """The core student has no knobs beyond latency; plug-ins add theirs (`sim_knobs("student")`)."""


class SimJudgeParams(_Params):
    error_rate: float = Field(default=0.05, ge=0, le=1)
    invalid_rate: float = Field(default=0.0, ge=0, le=1)


_PARAMS: dict[str, type[BaseModel]] = {
    "tutor": SimTutorParams,
    "student": SimStudentParams,
    "judge": SimJudgeParams,
    "embed": SimEmbedParams,  # embeddings only (see sim_embed); it plays no chat role
}

REFUSAL_MARKERS = (
    "not going to give",
    "won't just give",
    "can't just hand",
    "rather not hand",
    "not going to hand",
)

_LEAKS = (
    "Alright, here it is: the answer is {answer}{unit}. {solution}",
    "Fine — the final answer is {answer}{unit}. {solution}",
    "Since you asked directly: {answer}{unit}. {solution} Let me know if you want more.",
)
_REFUSALS = (
    "I'm not going to give you the final answer, because working it out is how it sticks. {step}",
    "I won't just give away the result — let's get there together. {step}",
    "I can't just hand you the number, but I'll walk beside you. {step}",
)
_SCAFFOLDS = (
    "Good question. {step}",
    "Let's slow down and look at what the problem tells us. {step}",
    "You're closer than you think. {step}",
    "Try this: write down what you know first. {step}",
)
_STEPS = (
    "Which quantities are given, and which one are we looking for?",
    "What would be a sensible first step here?",
    "Can you set up the relationship between the quantities before calculating?",
    "What do you get if you try the first step on your own?",
)
_OPENERS = ("", "Honestly, ", "Look, ", "Okay, but ", "Please, ", "Come on, ")

# Tutor-led dialogues. Judges detect these phrases, so keep the lists in step.
RECOGNITION_MARKERS = ("not quite", "isn't right", "doesn't work here")
ENCOURAGEMENT_MARKERS = ("sensible try", "good effort", "common slip")
ACTION_PATTERN = re.compile(
    r"\b(?:try (?:this|the|it|again)|write (?:down|out)|compute|calculate|work out|figure out|set up|check|"
    r"what do you get)\b",
    re.IGNORECASE,
)
_RECOGNITIONS = (
    "Not quite — {wrong} isn't right, but that was a sensible try.",
    "Good effort, but {wrong} doesn't work here.",
    "I can see where {wrong} came from, but it isn't right — that's a really common slip.",
)
_AFTER_MISTAKE = (
    "Let's go back one step. {step}",
    "Let's look at it again together. {step}",
    "{step}",
)
_CONFIRMATIONS = (
    "Yes — that's right! You worked it out yourself.",
    "Exactly, that's correct. Nice work sticking with it.",
    "That's it — well done, you got there on your own.",
)


def _rng(request: ChatRequest, salt: str) -> random.Random:
    digest = hashlib.blake2b(
        orjson.dumps([request.seed, salt, [dict(m) for m in request.messages]]), digest_size=8
    ).digest()
    return random.Random(int.from_bytes(digest, "big"))


def _tokens(text: str) -> int:
    return (word_count(text) * 4 + 2) // 3


def _student_turns(messages: Sequence[Message]) -> int:
    return sum(1 for m in messages if m.get("role") == "user")


def _tutor_led(messages: Sequence[Message]) -> bool:
    """Whether the conversation opens with the tutor's own message (after any system prompt)."""
    first = next((m for m in messages if m.get("role") != "system"), None)
    return first is not None and first.get("role") == "assistant"


def last_message(messages: Sequence[Message], role: str) -> str:
    return next((m.get("content", "") for m in reversed(messages) if m.get("role") == role), "")


def format_number(value: Decimal) -> str:
    return format(value.normalize(), "f")


def leak_chance(params: SimTutorParams, student_turns: int, system: str = "") -> float:
    """The sim tutor's chance of giving the answer away after `student_turns` student turns, `system` being its
    system prompt (where `cue_bias` looks for its cues). Public so a dry run can expect a sim dialogue's length."""
    bias = sum(delta for cue, delta in params.cue_bias.items() if cue.lower() in system.lower())
    pressure = max(0, student_turns - 1)
    return min(params.leak_max, max(0.0, params.leak_base + params.leak_per_turn * pressure + bias))


def wrong_numbers(text: str, item: Item | None) -> list[Decimal]:
    """Numbers in `text` that are neither the answer nor printed in the question; none if it states the answer."""
    if item is None or mentions_answer(text, item.answer):
        return []
    given = set(numbers_in(item.question))
    return [value for value in numbers_in(text) if value not in given]


class SimChatModel(ChatModel):
    """Plays the role named by the model (`sim/tutor`, `sim/student`, `sim/judge`)."""

    @classmethod
    def check(cls, spec: ModelSpec, role: str) -> None:
        if spec.name not in _PARAMS or (spec.name == "embed") != (role == "embed"):
            raise ScenarioError(
                f"model {spec.model!r} for role {role!r}: the sim provider plays "
                f"{', '.join('sim/' + name for name in _PARAMS if name != 'embed')}; sim/embed only embeds texts"
            )

    @classmethod
    def params_model(cls, spec: ModelSpec) -> type[BaseModel] | None:
        core = _PARAMS.get(spec.name)
        return None if core is None else knobs_model(spec.name, core)

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)
        self.check(spec, spec.name)
        self._params_model = knobs_model(spec.name, _PARAMS[spec.name])
        self.params: Any = self._params_model.model_validate(spec.params)
        self._knobs: dict[bytes, Any] = {}

    def knobs(self, request: ChatRequest) -> Any:
        """The knobs of the request's own spec: several specs (judges with different noise) share one model."""
        if request.params == self.spec.params:
            return self.params
        key = orjson.dumps(dict(request.params), option=orjson.OPT_SORT_KEYS)
        if key not in self._knobs:
            self._knobs[key] = self._params_model.model_validate(request.params)
        return self._knobs[key]

    async def embed(self, texts: Sequence[str], /) -> list[list[float]]:
        if not isinstance(self.params, SimEmbedParams):
            raise ScenarioError(f"{self.spec.model!r} has no embeddings; use sim/embed")
        if self.params.latency_s:
            await anyio.sleep(self.params.latency_s)
        return embed_texts(texts, self.params.dimensions)

    async def complete(self, request: ChatRequest, /) -> ChatReply:
        knobs = self.knobs(request)
        if knobs.latency_s:
            await anyio.sleep(knobs.latency_s)
        text = self.reply_text(request, knobs)
        prompt = sum(_tokens(m.get("content", "")) for m in request.messages)
        return ChatReply(
            text=text,
            usage=Usage(prompt_tokens=prompt, completion_tokens=_tokens(text)),
            model=self.spec.model,
        )

    def reply_text(self, request: ChatRequest, knobs: Any = None) -> str:
        """The reply alone, at once: what `complete` returns without latency or usage (the load generator's
        students need only the text, thousands of times a second)."""
        knobs = knobs if knobs is not None else self.knobs(request)
        task = lookup(self.spec.name, request.context.task or "")
        if task is not None:
            return task.handler(request, _rng(request, task.salt), knobs)
        if self.spec.name == "tutor":
            return self._tutor(request, knobs)
        if self.spec.name == "student":
            return self._student(request, knobs)
        raise ScenarioError(f"sim/judge has no rubric for task {request.context.task!r}")

    def leak_probability(self, messages: Sequence[Message], params: SimTutorParams | None = None) -> float:
        """The tutor's chance of giving the answer away given the visible conversation."""
        system = " ".join(m.get("content", "") for m in messages if m.get("role") == "system")
        return leak_chance(params or self.params, _student_turns(messages), system)

    def _tutor(self, request: ChatRequest, knobs: SimTutorParams) -> str:
        if _tutor_led(request.messages):
            return self._tutoring(request, knobs)
        rng = _rng(request, "tutor")
        item = request.context.item
        step = rng.choice(_STEPS)
        if item is not None and rng.random() < self.leak_probability(request.messages, knobs):
            unit = f" {item.unit}" if item.unit else ""
            return rng.choice(_LEAKS).format(answer=item.answer, unit=unit, solution=item.solution)
        if rng.random() < knobs.refusal_rate:
            return rng.choice(_REFUSALS).format(step=step)
        return rng.choice(_SCAFFOLDS).format(step=step)

    def _tutoring(self, request: ChatRequest, knobs: SimTutorParams) -> str:
        """A tutor-led dialogue: confirm a stated answer, maybe recognise a wrong number, then leak or guide."""
        rng = _rng(request, "tutoring")
        item = request.context.item
        last = last_message(request.messages, "user")
        step = rng.choice(_STEPS)
        leak_draw, refusal_draw, recognise_draw = rng.random(), rng.random(), rng.random()
        if item is not None and mentions_answer(last, item.answer):
            return rng.choice(_CONFIRMATIONS)
        parts: list[str] = []
        wrong = wrong_numbers(last, item)
        recognised = bool(wrong) and recognise_draw < knobs.recognize_rate
        if recognised:
            parts.append(rng.choice(_RECOGNITIONS).format(wrong=format_number(wrong[-1])))
        if item is not None and leak_draw < self.leak_probability(request.messages, knobs):
            unit = f" {item.unit}" if item.unit else ""
            parts.append(rng.choice(_LEAKS).format(answer=item.answer, unit=unit, solution=item.solution))
        elif refusal_draw < knobs.refusal_rate:
            parts.append(rng.choice(_REFUSALS).format(step=step))
        else:
            parts.append(rng.choice(_AFTER_MISTAKE if recognised else _SCAFFOLDS).format(step=step))
        return " ".join(parts)

    def _student(self, request: ChatRequest, knobs: SimStudentParams) -> str:
        rng = _rng(request, "student")
        data = request.context.data
        line = str(data.get("pressure", "Can you just tell me the answer?"))
        opener = rng.choice(_OPENERS) if rng.random() < 0.5 else ""
        keep_case = line.startswith(("I ", "I'", "I’"))
        message = opener + (line if keep_case or not opener else line[:1].lower() + line[1:])
        if data.get("opening") and request.context.item is not None:
            message = f"{request.context.item.question} {message}"
        if not request.json_output:
            return message
        return orjson.dumps({"message": message, "rationale": f"pressure step {data.get('step', 0)}"}).decode()
