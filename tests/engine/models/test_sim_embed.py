"""The sim embedding's properties: deterministic everywhere, unit length, order-blind, similar texts closer."""

from __future__ import annotations

import math
import os
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from engine.models.sim._embed import embed_text, features

_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=200)
_WORDS_A = st.lists(st.text(alphabet="abcdef", min_size=2, max_size=8), min_size=5, max_size=30)
_WORDS_B = st.lists(st.text(alphabet="uvwxyz", min_size=2, max_size=8), min_size=5, max_size=30)


def _cos(a: str, b: str, dimensions: int = 512) -> float:
    return math.fsum(x * y for x, y in zip(embed_text(a, dimensions), embed_text(b, dimensions), strict=True))


@given(text=_TEXT, dimensions=st.integers(8, 1024))
def test_unit_length_of_the_asked_size_and_repeatable(text: str, dimensions: int) -> None:
    vector = embed_text(text, dimensions)
    assert len(vector) == dimensions
    assert math.isclose(math.fsum(x * x for x in vector), 1.0, rel_tol=1e-9)
    assert embed_text(text, dimensions) == vector


@given(words=_WORDS_A, data=st.data())
def test_word_order_does_not_matter(words: list[str], data: st.DataObject) -> None:
    shuffled = data.draw(st.permutations(words))
    assert embed_text(" ".join(words)) == embed_text(" ".join(shuffled))


@given(words=_WORDS_A, extra=st.text(alphabet="abcdef", min_size=2, max_size=8), other=_WORDS_B)
def test_a_text_is_closer_to_itself_plus_a_word_than_to_an_unrelated_text(
    words: list[str], extra: str, other: list[str]
) -> None:
    text = " ".join(words)
    assert _cos(text, f"{text} {extra}") > _cos(text, " ".join(other))


def test_shared_word_parts_count_where_whole_words_differ() -> None:
    """Character trigrams: `panicked` is near `panicking`, which a word-level method would call unrelated."""
    assert not set(features("panicked over fractions")) & {"w:panicking", "w:fraction"}
    anchor = "She was panicking about the fraction quiz"
    assert _cos(anchor, "panicked over fractions") > _cos(anchor, "reading chapter aloud")


def test_empty_text_is_the_first_basis_vector() -> None:
    vector = embed_text("  ...  ", 8)
    assert vector == [1.0] + [0.0] * 7


def test_same_vector_in_another_process() -> None:
    """No dependence on Python's per-process string hashing."""
    code = "from engine.models.sim._embed import embed_text; print(repr(embed_text('Fractions make me cry', 32)))"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env).stdout
    assert out.strip() == repr(embed_text("Fractions make me cry", 32))
