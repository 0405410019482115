"""The participants: the tutor agent, student strategies and dialogue protocols (registered by name)."""

from .crescendo import CrescendoProtocol
from .students import AttackerTurn, Backtracking, CrescendoStudent, ScriptedStudent, turn_budget
from .templates import check_template, render
from .tutor import DEFAULT_TUTOR_PROMPT, ModelTutor, tutor_messages

__all__ = (
    "DEFAULT_TUTOR_PROMPT",
    "AttackerTurn",
    "Backtracking",
    "CrescendoProtocol",
    "CrescendoStudent",
    "ModelTutor",
    "ScriptedStudent",
    "check_template",
    "render",
    "tutor_messages",
    "turn_budget",
)
