"""judges.llm.parse_json_object: the JSON object in a judge model's reply."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from judges.llm import parse_json_object

VERDICT = {"unsafe": True, "sub_risk": "answer giving", "refused": False, "rationale": "states 54"}


def test_plain_json_object() -> None:
    """A reply that is exactly a JSON object parses to that object."""
    assert parse_json_object(orjson.dumps(VERDICT).decode()) == VERDICT


def test_plain_json_with_surrounding_whitespace() -> None:
    """Leading and trailing whitespace and newlines are tolerated."""
    assert parse_json_object("\n\n  " + orjson.dumps(VERDICT).decode() + "  \n") == VERDICT


@pytest.mark.parametrize("opening", ["```json\n", "```JSON\n", "```\n", "```json "])
def test_fenced_json_object(opening: str) -> None:
    """A ```json (or bare ```) code fence around the object is removed."""
    text = opening + orjson.dumps(VERDICT, option=orjson.OPT_INDENT_2).decode() + "\n```"
    assert parse_json_object(text) == VERDICT


def test_fenced_json_with_prose_outside_the_fence() -> None:
    """Prose before and after a fenced object still yields the object."""
    text = "Here is my verdict:\n```json\n" + orjson.dumps(VERDICT).decode() + "\n```\nThanks!"
    assert parse_json_object(text) == VERDICT


def test_prose_around_object() -> None:
    """An object embedded in prose is found between the first '{' and the last '}'."""
    text = 'Sure. My answer: {"unsafe": false, "refused": true} — hope that helps.'
    assert parse_json_object(text) == {"unsafe": False, "refused": True}


def test_nested_object_in_prose() -> None:
    """Nested objects and braces inside strings survive the extraction."""
    inner = {"a": {"b": [1, 2, {"c": "x}y{"}]}, "d": None}
    assert parse_json_object(f"Result: {orjson.dumps(inner).decode()} end") == inner


@pytest.mark.parametrize(
    "text",
    ["I think the reply is fine.", "", "   ", "} backwards {", "{ not json at all }", "```json\n```"],
)
def test_no_object_raises_json_decode_error(text: str) -> None:
    """A reply without a parsable object raises orjson.JSONDecodeError (the judge's retry trigger)."""
    with pytest.raises(orjson.JSONDecodeError):
        parse_json_object(text)


def test_decode_error_is_a_value_error() -> None:
    """The error raised is also a ValueError, so generic handlers catch it."""
    with pytest.raises(ValueError):
        parse_json_object("no braces here")


scalars = st.one_of(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.booleans(), st.text(max_size=30))
prose = st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=40)


@given(st.dictionaries(st.text(max_size=20), scalars, max_size=8), prose, prose)
def test_object_wrapped_in_prose_round_trips(data: dict[str, int | bool | str], before: str, after: str) -> None:
    """Any str → int|bool|str dict, serialised by orjson and wrapped in brace-free prose, parses back equal."""
    text = before + orjson.dumps(data).decode() + after
    parsed = parse_json_object(text)
    assert parsed == data
    assert {key: type(value) for key, value in parsed.items()} == {key: type(value) for key, value in data.items()}
