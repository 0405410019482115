"""The sentences a fairness report reads by: what the family is, what chance alone gives, and what an empty
result does and does not say."""

from __future__ import annotations

from engine import format_fixed, format_setting

from .fairness_model import Correction

__all__ = ("CORRECTION_NAMES", "audit_label", "chance_note", "family_line", "no_findings", "too_small")

CORRECTION_NAMES = {
    "bh": "Benjamini–Hochberg",
    "holm": "Holm",
    "bonferroni": "Bonferroni",
    "none": "no correction",
}
_AUDIT_LABELS = {
    "audit_cue_leakage": "cue leakage",
    "audit_role_flip": "role flip",
    "audit_self_solved": "self-solved",
    "audit_persona_drift": "persona drift",
}


def audit_label(flag: str) -> str:
    return _AUDIT_LABELS.get(flag, flag)


def family_line(correction: Correction) -> str:
    scope = "every contrast of the run" if correction.family == "run" else "each domain cell separately"
    method = CORRECTION_NAMES[correction.method]
    return (
        f"Family: {correction.family_size} contrasts ({scope}; every pair of a multi-level dimension counts, "
        f"and can be a finding only when its Friedman p < {format_setting(correction.omnibus_alpha)}); "
        f"{method} at q = {format_setting(correction.q)}: "
        f"{correction.findings} finding{'s' if correction.findings != 1 else ''} (adjusted p ≤ q, and for a "
        f"pair its Friedman gate open)."
    )


def chance_note(correction: Correction) -> str:
    """What chance alone produces in this family under its method (the honest reading of a count)."""
    m, q = correction.family_size, correction.q
    if correction.method == "none":
        note = (
            f"Uncorrected: with no effect at all about {format_fixed(q * m, 1)} of these {m} contrasts reach "
            f"p ≤ {format_setting(q)} by chance alone, so isolated findings mean little."
        )
    elif correction.method == "bh":
        note = (
            f"With no effect anywhere, the chance of any finding in this family is at most {format_setting(q)}. "
            "When some effects are real, Benjamini–Hochberg keeps the false discovery rate at or below "
            f"{format_setting(q)}: the expected share of false findings among the findings, averaged over repeated "
            "studies; it does not bound this run's share."
        )
    else:
        note = f"With no effect anywhere, the chance of any finding in this family is at most {format_setting(q)}."
    if correction.insufficient:
        note += (
            f" {correction.insufficient} contrasts had fewer than {correction.min_pairs} item pairs and "
            "were not tested."
        )
    return note


def no_findings(correction: Correction) -> str:
    return (
        f"no contrast's adjusted p is at or below q = {format_setting(correction.q)}. This says the run could not tell "
        "the levels apart, not that they are equal; `simrun validate` prints how small a gap each cell can see."
    )


def too_small(correction: Correction) -> str:
    return (
        f"Too small to test: every contrast had fewer than {correction.min_pairs} item pairs, so this run "
        "shows neither a gap nor its absence. Use at least that many items per domain; `simrun validate` "
        "prints the smallest |r| each cell can detect."
    )
