"""Who played each role: the simulator or a model, recorded in the manifest so no report calls a model's run
simulated, nor a simulator's verdicts on a model's text a model's."""

from __future__ import annotations

from typing import Any

from engine.scenario._spec import ModelSpec, ModelsSpec

__all__ = ("played_by",)


def played_by(models: ModelsSpec, *, custom_tutor: bool) -> dict[str, Any]:
    tutors = [_player(spec) for spec in models.tutors]
    tutor: Any = (
        {"model": "custom agent", "simulator": False} if custom_tutor else tutors[0] if len(tutors) == 1 else tutors
    )
    return {
        "tutor": tutor,
        "student": _player(models.student) if models.student else None,
        "judge": [_player(spec) for spec in models.judge],
    }


def _player(spec: ModelSpec) -> dict[str, Any]:
    player = {"model": spec.model, "provider": spec.provider, "simulator": spec.provider == "sim"}
    return player | {"label": spec.label} if spec.label else player
