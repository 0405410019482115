"""The one typed result of a paired comparison, and the one family correction every report uses on it.

A report reads three different p's off a contrast: the test's own, the one inside an omnibus family (Bonferroni
within Friedman) and the one after the report's declared family correction. Earlier rows carried a single
`p_adjusted` that meant the first correction for one kind and the second for another, so a reader could not tell
which p made a verdict; here each meaning has its own field, and `deciding_p` names the one that decided.
The family correction is `engine.stats._families.correct_family`.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

__all__ = ("FAMILY_NAMES", "WITHIN_NAME", "ContrastRow", "Status", "family_caption")

Status = Literal["ok", "insufficient"]

FAMILY_NAMES = {"bh": "Benjamini–Hochberg", "holm": "Holm", "bonferroni": "Bonferroni", "none": "no correction"}
"""How a caption names each family correction."""
WITHIN_NAME = "Bonferroni within Friedman"


class ContrastRow(BaseModel):
    """One paired comparison a − b over items (or the omnibus line of a family of levels): one field per meaning.

    A kind adds its own keys (metric, domain, …) by subclassing; unknown keys are refused, so a statistic added
    in one place and not the model fails at once. `finding` starts as the row's own reading (its 95% interval
    excludes 0) and `correct_family` replaces it with the family's verdict.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    test: str
    """`wilcoxon` (two levels), `friedman` (the omnibus line), `wilcoxon (Bonferroni)` (a pair after Friedman), or
    a kind's own name for a contrast of its design (`pairwise`, `matched`, `interaction`, …)."""
    a: str
    b: str
    n: int
    """Pairs used (items with both values), or complete items for the omnibus line."""
    status: Status
    """`insufficient` when n < the minimum pairs: nothing is estimated or tested."""
    effect: Literal["rank-biserial r"] = "rank-biserial r"
    """The name of the effect size in `r`."""
    r: float | None = None
    """Matched-pairs rank-biserial r on the test's Pratt ranks; positive means `a` scores higher."""
    ci_low: float | None = None
    ci_high: float | None = None
    ci_level: float | None = None
    """The interval's confidence level: 0.95, or the corrected level of a family's finding."""
    ci_method: str | None = None
    """`percentile` (bootstrap), `bca`, `exact_sign` (Clopper–Pearson on the signs) or `ties`."""
    p: float | None = None
    """The test's own two-sided p (Wilcoxon–Pratt, or Friedman on the omnibus line)."""
    p_within: float | None = None
    """Bonferroni inside the omnibus family (a pair after Friedman), else None."""
    p_family: float | None = None
    """After the report's declared family correction (`family_method` over `family`), else None."""
    family: str | None = None
    """The name of the corrected family the row's p entered (e.g. `run`, `domain math`), None outside one."""
    family_method: str | None = None
    """The family's correction: `bh`, `holm`, `bonferroni` or `none`."""
    finding: bool = False
    gated: bool = False
    """A pair whose omnibus did not pass: counted in the family, never a finding."""
    estimate: float | None = None
    """Hodges–Lehmann estimate of a − b, the signed-rank test's own location."""
    mean_diff: float | None = None
    differing: int = 0
    degenerate: bool = False
    direction_disagrees: bool = False
    meaningful: bool = False
    """|r| ≥ 0.10 (Funder and Ozer, 2019)."""
    statistic: float | None = None
    """The omnibus χ² (Friedman) on the omnibus line."""

    @field_validator("r", "ci_low", "ci_high", "p", "p_within", "p_family", "estimate", "mean_diff", "statistic")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        """Plain floats, and None for a non-finite value, so summary.json stays valid JSON."""
        if value is None:
            return None
        value = float(value)
        return value if math.isfinite(value) else None

    @property
    def tested(self) -> bool:
        """A contrast with an effect and a p: what a family correction counts."""
        return self.status == "ok" and self.r is not None and self.p is not None

    @property
    def deciding_p(self) -> float | None:
        """The p that decided the row's verdict: the family's when it entered one, else the omnibus family's."""
        return self.p_family if self.p_family is not None else self.p_within


def family_caption(method: str, size: int, q: float) -> str:
    """What a table of findings says decided them, e.g. `Benjamini–Hochberg over 216 contrasts, q = 0.05`."""
    name = FAMILY_NAMES.get(method, method)
    return f"{name} over {size} contrast{'s' if size != 1 else ''}, q = {q:g}"
