"""EduFair's opposite design as statistics: the 2×2 of student-stated × tutor-perceived gender, paired by item.

The five contrasts separate tutor-side from student-side bias; each is an ordinary paired contrast on
per-item differences built here, so the engine's paired statistics stay free of any scenario kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine import MIN_PAIRS, N_BOOT, ContrastRow, derive_seed, difference_contrast, lazy_module

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
else:
    np = lazy_module("numpy")

__all__ = ("MISMATCH_CONTRASTS", "Mismatch", "mismatch_contrasts", "mismatch_differences")

MISMATCH_CONTRASTS = ("matched", "mismatched", "perceived", "stated", "interaction")


@dataclass(frozen=True)
class Mismatch:
    """The 2×2 opposite design: student-stated gender × tutor-perceived gender, paired by item.

    Cell names below are stated/perceived, F = `first`, M = `second`. All five contrasts use the same items
    (complete across the four cells), so per item matched = perceived + stated and mismatched = stated −
    perceived hold exactly, and the decomposition can be read off the table.

    Attributes:
        matched: F/F − M/M: the gap when tutor and student agree, as in the explicit condition.
        mismatched: F/M − M/F: the gap when the tutor is told the wrong gender.
        perceived: Per item mean over stated genders, perceived F − perceived M: the tutor-side effect.
        stated: Per item mean over perceived genders, stated F − stated M: the student-side effect.
        interaction: Per item (F/F − F/M) − (M/F − M/M) against 0: whether the tutor-side effect depends on
            who the student says it is.
    """

    matched: ContrastRow
    mismatched: ContrastRow
    perceived: ContrastRow
    stated: ContrastRow
    interaction: ContrastRow


def mismatch_differences(
    cells: Mapping[tuple[str, str], Sequence[float]], *, first: str = "female", second: str = "male"
) -> dict[str, tuple[FloatArray, str, str]]:
    """Per contrast name, its per-item differences and the (a, b) names it reports, on items complete in all
    four cells (so per item matched = perceived + stated and mismatched = stated − perceived hold exactly).

    Raises:
        ValueError: If `first` equals `second`, a cell is missing or extra, or the cells differ in length.
    """
    if first == second:
        raise ValueError(f"the opposite design needs two different levels, got {first!r} twice")
    expected = {(first, first), (first, second), (second, first), (second, second)}
    if set(cells) != expected:
        raise ValueError(
            f"the opposite design needs exactly the (stated, perceived) cells {sorted(expected)}, got {sorted(cells)}"
        )
    lengths = {len(values) for values in cells.values()}
    if len(lengths) != 1:
        raise ValueError(f"every cell needs one score per item; lengths differ: {sorted(lengths)}")
    ff, fm, mf, mm = (
        np.asarray(cells[key], dtype=np.float64)
        for key in ((first, first), (first, second), (second, first), (second, second))
    )
    keep = ~(np.isnan(ff) | np.isnan(fm) | np.isnan(mf) | np.isnan(mm))
    ff, fm, mf, mm = ff[keep], fm[keep], mf[keep], mm[keep]
    return {
        "matched": (ff - mm, f"{first}/{first}", f"{second}/{second}"),
        "mismatched": (fm - mf, f"{first}/{second}", f"{second}/{first}"),
        "perceived": ((ff + mf) / 2 - (fm + mm) / 2, f"perceived {first}", f"perceived {second}"),
        "stated": ((ff + fm) / 2 - (mf + mm) / 2, f"stated {first}", f"stated {second}"),
        "interaction": ((ff - fm) - (mf - mm), "stated x perceived interaction", "0"),
    }


def mismatch_contrasts(
    cells: Mapping[tuple[str, str], Sequence[float]],
    *,
    seed: int,
    first: str = "female",
    second: str = "male",
    n_boot: int = N_BOOT,
    min_pairs: int = MIN_PAIRS,
) -> Mismatch:
    """The opposite design's five contrasts, which separate tutor-side from student-side bias.

    A gap that follows the tutor-perceived gender while the student's stated gender is held fixed can only come
    from the tutor; one that follows the stated gender comes through the simulated student. Items missing a
    score in any of the four cells are dropped from all five contrasts (see Mismatch).

    Args:
        cells: (stated, perceived) → scores, each indexed by item in the same order; exactly the four cells
            of `first` × `second`.
        seed: Family seed; each contrast derives its own bootstrap seed from it and the contrast's name.
        first: Level whose cells are the minuends (F above).
        second: The other level (M above).
        n_boot: Bootstrap resamples per contrast.
        min_pairs: Below this many complete items every contrast is "insufficient".

    Returns:
        The five contrasts.

    Raises:
        ValueError: As `mismatch_differences`.
    """
    found = {
        name: difference_contrast(
            d, a_name=a_name, b_name=b_name, seed=derive_seed(seed, name), n_boot=n_boot, min_pairs=min_pairs
        )
        for name, (d, a_name, b_name) in mismatch_differences(cells, first=first, second=second).items()
    }
    return Mismatch(**found)
