"""Persona and risk definitions as data, with their loaders (SafeTutors taxonomy, demographic fairness personas)."""

from .fairness import (
    DemographicDesign,
    DemographicDimension,
    DemographicLevel,
    Demographics,
    demographics,
    load_demographics,
)
from .safetutors import Dimension, SubRisk, Taxonomy, load_safetutors, normalise_name, taxonomy

__all__ = (
    "DemographicDesign",
    "DemographicDimension",
    "DemographicLevel",
    "Demographics",
    "Dimension",
    "SubRisk",
    "Taxonomy",
    "demographics",
    "load_demographics",
    "load_safetutors",
    "normalise_name",
    "taxonomy",
)
