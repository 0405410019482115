"""Persona and risk definitions as data, with their loaders (SafeTutors taxonomy and release reader)."""

from .safetutors import Dimension, SubRisk, Taxonomy, load_safetutors, normalise_name, taxonomy

__all__ = ("Dimension", "SubRisk", "Taxonomy", "load_safetutors", "normalise_name", "taxonomy")
