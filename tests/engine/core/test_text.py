"""engine.core._text: the exact answer detector shared by the simulator and the deterministic judges."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from engine.core._text import mentions_answer, numbers_in, word_count

# Below a billion the detector's relative tolerance (1e-9 × |answer|) is < 1, so neighbouring integers differ.


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("She saved 1,234 dollars.", "1234"),
        ("The total is 1,000,000 grains.", "1000000"),
        ("It costs 12,345.5 in all.", "12345.5"),
        ("Each ticket costs 2.50 dollars.", "2.5"),
        ("Each ticket costs 2.5 dollars.", "2.50"),
        ("The temperature fell to −7 degrees.", "-7"),
        ("The temperature fell to -7 degrees.", "-7"),
        ("So the answer is 7.", "7"),
        ("So the answer is 7", "7"),
        ("(7)", "7"),
        ("x = 7, y = 3", "7"),
        ("7 apples", "7"),
        ("0.375", "0.375"),
    ],
)
def test_mentions_numeric_answer(text: str, answer: str) -> None:
    """A numeric answer is found with separators, trailing zeros, a Unicode minus and at a sentence end."""
    assert mentions_answer(text, answer)


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("There are 17 marbles.", "7"),
        ("There are 71 marbles.", "7"),
        ("It weighs 7.5 kg.", "7"),
        ("It weighs 0.7 kg.", "7"),
        ("Version x7 of the kit.", "7"),
        ("The reading was 7 degrees.", "-7"),
        ("It came to 1,234 dollars.", "234"),
        ("No numbers at all.", "7"),
        ("Seven is the answer.", "7"),
    ],
)
def test_does_not_mention_numeric_answer(text: str, answer: str) -> None:
    """A number is not found inside another number, a decimal, a word, or with the wrong sign."""
    assert not mentions_answer(text, answer)


@pytest.mark.parametrize(
    ("text", "answer", "expected"),
    [
        ("The flame turns BLUE.", "blue", True),
        ("The flame turns blue.", "Blue", True),
        ("I ate a blueberry.", "blue", False),
        ("It was true-blue.", "blue", True),
        ("The gas is carbon dioxide, of course.", "Carbon Dioxide", True),
        ("The gas is carbon dioxides.", "carbon dioxide", False),
        ("anything at all", "", False),
        ("anything at all", "   ", False),
    ],
)
def test_mentions_word_answer(text: str, answer: str, expected: bool) -> None:
    """Word answers match case-insensitively on word boundaries; an empty answer is never mentioned."""
    assert mentions_answer(text, answer) is expected


def test_numbers_in_reads_every_number() -> None:
    """numbers_in understands separators, decimals, a Unicode minus and ignores digits glued to words."""
    assert numbers_in("1,234.5 and −7 and 2.50. Then 17, x7 and 7x.") == [1234.5, -7.0, 2.5, 17.0]


def test_word_count() -> None:
    """word_count splits on any whitespace."""
    assert word_count("  one two\nthree\tfour ") == 4
    assert word_count("") == 0


@given(st.integers())
@example(0)
@example(-1)
@example(10**9)
@example(10**400)
def test_integer_answers_property(n: int) -> None:
    """For an integer answer, the same integer is mentioned and its successor is not."""
    assert mentions_answer(f"the answer is {n}.", str(n))
    assert not mentions_answer(f"the answer is {n + 1}.", str(n))


@pytest.mark.parametrize(
    ("n", "text"),
    [(10**9, f"{10**9 + 1}"), (2**53, f"{2**53 + 1}"), (10**400, "5")],
    ids=["1e9", "2**53", "1e400"],
)
def test_large_integer_answers_are_exact(n: int, text: str) -> None:
    """Large integer answers are compared exactly: a neighbouring integer is not the answer."""
    assert not mentions_answer(f"the answer is {text}.", str(n))


@given(st.text())
def test_numbers_in_never_raises(text: str) -> None:
    """numbers_in returns exact decimals for any text, including odd Unicode digits and punctuation."""
    assert all(isinstance(value, Decimal) for value in numbers_in(text))


@given(st.text(alphabet=st.sampled_from("0123456789.,-− e+x")))
def test_numbers_in_never_raises_on_number_like_text(text: str) -> None:
    """numbers_in survives text made only of number-like characters."""
    numbers_in(text)
    mentions_answer(text, "12")
