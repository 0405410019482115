"""The participants: the tutor agent, student strategies and dialogue protocols (registered by name)."""

from .cases import CaseDesign, CasesProtocol, CaseStudent, CaseTutor
from .crescendo import CrescendoProtocol
from .persona import DEFAULT_OPENING, PersonaStudent, builtin_profile, student_messages
from .remath import MistakeStudent, RemathDesign, RemediationProtocol, RemediationTutor
from .students import AttackerTurn, Backtracking, CrescendoStudent, ScriptedStudent, turn_budget
from .tutor import DEFAULT_TUTOR_PROMPT, ModelTutor, check_template, render, system_prompt_for, tutor_messages
from .tutoring import DEFAULT_MAX_TURNS, FairnessProtocol, StopReason, TutorLedSettings

__all__ = (
    "DEFAULT_MAX_TURNS",
    "DEFAULT_OPENING",
    "DEFAULT_TUTOR_PROMPT",
    "AttackerTurn",
    "Backtracking",
    "CaseDesign",
    "CaseStudent",
    "CaseTutor",
    "CasesProtocol",
    "CrescendoProtocol",
    "CrescendoStudent",
    "FairnessProtocol",
    "MistakeStudent",
    "ModelTutor",
    "PersonaStudent",
    "RemathDesign",
    "RemediationProtocol",
    "RemediationTutor",
    "ScriptedStudent",
    "StopReason",
    "TutorLedSettings",
    "builtin_profile",
    "check_template",
    "render",
    "system_prompt_for",
    "student_messages",
    "tutor_messages",
    "turn_budget",
)
