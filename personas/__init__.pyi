"""Persona and risk definitions as data, with their loaders (SafeTutors taxonomy, demographic fairness personas)."""

from .cases import CHALLENGE_TYPES, RESPONSE_TYPES, Case, builtin_cases, case_of, load_cases, load_tutorcasebench
from .fairness import (
    DemographicDesign,
    DemographicDimension,
    DemographicLevel,
    Demographics,
    demographics,
    load_demographics,
)
from .remath import ERROR_TYPES, INTENTIONS, STRATEGIES, MistakeItem, load_mistake_items
from .safetutors import Dimension, SubRisk, Taxonomy, load_safetutors, normalise_name, taxonomy

__all__ = (
    "CHALLENGE_TYPES",
    "RESPONSE_TYPES",
    "Case",
    "ERROR_TYPES",
    "INTENTIONS",
    "STRATEGIES",
    "DemographicDesign",
    "DemographicDimension",
    "DemographicLevel",
    "Demographics",
    "Dimension",
    "MistakeItem",
    "SubRisk",
    "Taxonomy",
    "builtin_cases",
    "case_of",
    "demographics",
    "load_cases",
    "load_demographics",
    "load_mistake_items",
    "load_safetutors",
    "load_tutorcasebench",
    "normalise_name",
    "taxonomy",
)
