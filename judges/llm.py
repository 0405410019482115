"""Asking judge models for JSON verdicts: parallel votes, each rubric's own schema, strict validation, retries, then
`Unjudged` (the reply is recorded unjudged, the dialogue kept)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import anyio
import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine import EpisodeContext, JudgeError, RequestContext, Turn, Unjudged, brief, parse_json_object

__all__ = ("RubricJudge", "RubricOptions", "collect_votes", "parse_json_object", "transcript")

M = TypeVar("M", bound=BaseModel)


class RubricOptions(BaseModel):
    """Options every per-turn LLM rubric judge takes."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    retries: int = Field(default=2, ge=0)
    """Extra attempts per vote when the judge's output is not valid JSON of the expected shape."""
    history_turns: int = Field(default=4, ge=0)
    """Earlier visible turns shown to the judge for context."""


class RubricJudge:
    """Shared shape of the per-turn LLM rubric judges: one model call per vote, `RubricOptions`."""

    scope: Literal["turn"] = "turn"
    model_calls = 1
    Options = RubricOptions

    def __init__(self, options: RubricOptions) -> None:
        self.options = options


def transcript(turns: Iterable[Turn]) -> str:
    """Turns as the judges read them: one `STUDENT:` or `TUTOR:` line each."""
    return "\n".join(f"{'STUDENT' if t.role == 'student' else 'TUTOR'}: {t.text}" for t in turns)


async def collect_votes(
    ctx: EpisodeContext,
    *,
    task: str,
    target: int | str,
    messages: Sequence[Mapping[str, str]],
    schema: type[M],
    data: Mapping[str, Any],
    retries: int,
) -> list[M]:
    """`judge_votes` verdicts, asked concurrently, judge models used in turn; invalid output is asked again."""
    clients = ctx.judge_clients
    if not clients:
        raise JudgeError(f"judge {task!r} needs a judge model: set `models.judge` in the scenario")
    votes: list[M | None] = [None] * ctx.scenario.judge_votes
    context = RequestContext(role="judge", item=ctx.episode.item, task=task, condition=ctx.condition, data=data)

    response_schema = _schema_of(schema)
    failures: list[str] = []

    async def vote(index: int) -> None:
        client = clients[index % len(clients)]
        problem = "no reply"
        for attempt in range(retries + 1):
            reply, _ = await client.complete(
                messages,
                context=context,
                seed=ctx.episode.seed_for(task, target, index, attempt),
                response_schema=response_schema,
            )
            try:
                votes[index] = schema.model_validate(parse_json_object(reply.text))
            except (orjson.JSONDecodeError, ValidationError) as exc:
                problem = f"{type(exc).__name__}: {brief(str(exc))}"
                ctx.count_judge_output(client.model_id, task, valid=False)
            else:
                ctx.count_judge_output(client.model_id, task, valid=True)
                return
        failures.append(f"vote {index} ({client.model_id}) gave invalid output {retries + 1} times ({problem})")

    async with anyio.create_task_group() as group:
        for index in range(len(votes)):
            group.start_soon(vote, index)
    if failures:
        raise Unjudged(f"judge {task!r}: {'; '.join(sorted(failures))}")
    return [v for v in votes if v is not None]


_SCHEMAS: dict[type[BaseModel], dict[str, Any]] = {}


def _schema_of(schema: type[BaseModel]) -> dict[str, Any]:
    """The verdict model's JSON schema, built once per model: each rubric sends its own."""
    found = _SCHEMAS.get(schema)
    if found is None:
        found = _SCHEMAS[schema] = schema.model_json_schema()
    return found
