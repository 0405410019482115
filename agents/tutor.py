"""The tutor: a model with a system prompt rendered from the item and the condition."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from engine import TUTORS, Episode, EpisodeContext, InputMemo, RequestContext, Utterance, check_template, render

__all__ = ("DEFAULT_TUTOR_PROMPT", "ModelTutor", "check_template", "render", "system_prompt_for", "tutor_messages")

DEFAULT_TUTOR_PROMPT = (
    "You are a patient {{ item.domain }} tutor for a secondary-school student. Help the student understand and "
    "solve the problem themselves: ask guiding questions, give one hint at a time, and do not simply hand over "
    "the final answer or a complete solution."
)


def system_prompt_for(episode: Episode, template: str) -> str:
    """The tutor's system prompt for one episode: the item, the condition and the design's extras (the cue)."""
    variables: dict[str, Any] = {**episode.extras, "item": episode.item, "condition": dict(episode.condition)}
    return render(template, variables)


def tutor_messages(ctx: EpisodeContext, system_prompt: str) -> list[dict[str, str]]:
    """The conversation as the tutor sees it: its system prompt (rendered once per distinct input of the run),
    then only the turns visible to it."""
    key = ("tutor.system_prompt", system_prompt)
    system = ctx.per_input(key, lambda: system_prompt_for(ctx.episode, system_prompt))
    messages = [{"role": "system", "content": system}]
    for turn in ctx.visible_turns():
        messages.append({"role": "user" if turn.role == "student" else "assistant", "content": turn.text})
    return messages


class ModelTutor:
    """The default tutor agent (`agent: model`)."""

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        system_prompt: str = DEFAULT_TUTOR_PROMPT
        """Jinja template (sandboxed); sees `item` (id, domain, question, answer, unit, solution) and `condition`."""

        @field_validator("system_prompt")
        @classmethod
        def _compiles(cls, value: str) -> str:
            return check_template(value)

    def __init__(self, options: Options) -> None:
        self.options = options
        self._checked = InputMemo()

    def preflight(self, episode: Episode, /) -> None:
        """Render the system prompt for a planned episode, so a missing variable fails before any call (once per
        distinct input: replicates render alike)."""
        self._checked.get("preflight", episode, lambda: system_prompt_for(episode, self.options.system_prompt))

    async def respond(self, ctx: EpisodeContext, /) -> Utterance:
        client = ctx.clients["tutor"]
        reply, latency = await client.complete(
            tutor_messages(ctx, self.options.system_prompt),
            context=RequestContext(
                role="tutor", item=ctx.episode.item, condition=ctx.condition, episode_id=ctx.episode.id
            ),
            seed=ctx.episode.seed_for("tutor", len(ctx.turns)),
        )
        return Utterance(reply.text, model=reply.model, usage=reply.usage, latency_s=latency)


TUTORS.add("model", ModelTutor)
