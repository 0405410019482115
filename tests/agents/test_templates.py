"""engine.core._templates: sandboxed Jinja for scenario text (tutor prompts, scripted utterances)."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Item
from engine.core._templates import check_template, render

ITEM = Item(
    id="tpl-1",
    domain="physics",
    question="A kettle draws 2 A at 230 V. What power does it use?",
    answer="460",
    unit="W",
    solution="P = V × I = 230 × 2 = 460 W.",
)


def variables(item: Item = ITEM, **condition: str) -> dict[str, Any]:
    return {"item": item, "condition": condition or {"dimension": "cognitive", "format": "multi"}}


def test_render_fills_item_and_condition() -> None:
    """Item fields and condition levels are substituted, and the result is stripped."""
    text = render(
        "  You tutor {{ item.domain }} ({{ condition.format }}, {{ condition['dimension'] }}): "
        "{{ item.question }} [{{ item.unit }}]\n",
        variables(),
    )
    assert text == "You tutor physics (multi, cognitive): A kettle draws 2 A at 230 V. What power does it use? [W]"


def test_render_supports_filters_and_conditionals() -> None:
    """Ordinary Jinja (filters, if/else) works inside the sandbox."""
    source = "{% if condition.format == 'single' %}one{% else %}many{% endif %} {{ item.domain | upper }}"
    assert render(source, variables(format="single")) == "one PHYSICS"
    assert render(source, variables(format="multi")) == "many PHYSICS"


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("{{ student_name }}", "student_name"),
        ("{{ item.questoin }}", "questoin"),
        ("{{ condition.persona }}", "persona"),
        ("{% if undefined_flag %}x{% endif %}", "undefined_flag"),
    ],
)
def test_unknown_variable_is_an_error(source: str, fragment: str) -> None:
    """A missing variable or attribute raises ValueError naming it, rather than rendering empty."""
    with pytest.raises(ValueError, match="unknown value") as info:
        render(source, variables())
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "source",
    [
        "{{ item.__class__ }}",
        "{{ ''.__class__.__mro__ }}",
        "{{ item.__init__.__globals__ }}",
        "{{ cycler.__init__.__globals__ }}",
        "{% for cls in item.__class__.__subclasses__() %}{{ cls }}{% endfor %}",
        "{{ condition.update(format='single') }}",
        "{{ item.data.clear() }}",
    ],
)
def test_sandbox_blocks_unsafe_access(source: str) -> None:
    """Dunder access and mutation of the passed-in values raise ValueError (a wrapped SecurityError)."""
    condition = {"dimension": "cognitive", "format": "multi"}
    with pytest.raises(ValueError, match="unsafe operation"):
        render(source, {"item": ITEM, "condition": condition})
    assert condition == {"dimension": "cognitive", "format": "multi"}


def test_unsafe_error_is_not_chained() -> None:
    """The ValueError hides the jinja traceback (raised `from None`)."""
    with pytest.raises(ValueError) as info:
        render("{{ item.__class__ }}", variables())
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__


def test_check_template_returns_source() -> None:
    """A valid template passes through unchanged (it is used as a pydantic validator)."""
    source = "Hello {{ item.domain }}"
    assert check_template(source) == source


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("{{ item.question ", 1),
        ("first line\n{{ item.question }\nthird line", 2),
        ("a\nb\n{% for x in %}{% endfor %}", 3),
        ("{{ item.question | no_such_filter }}", 1),
    ],
)
def test_check_template_rejects_syntax_errors(source: str, line: int) -> None:
    """A syntax error (or unknown filter) is a ValueError that names its line."""
    with pytest.raises(ValueError, match=rf"template syntax error on line {line}\b"):
        check_template(source)


def test_check_template_does_not_resolve_variables() -> None:
    """Pinned: check_template only compiles, so an unknown variable is found at render time."""
    assert check_template("{{ item.questoin }}") == "{{ item.questoin }}"
    with pytest.raises(ValueError, match="unknown value"):
        render("{{ item.questoin }}", variables())


def test_item_text_is_not_evaluated() -> None:
    """Template syntax inside the item (model- or data-supplied text) is rendered literally, never evaluated."""
    item = ITEM.model_copy(update={"question": "Is {{ 7*7 }} equal to {% if true %}49{% endif %}?"})
    text = render("Q: {{ item.question }}", variables(item))
    assert text == "Q: Is {{ 7*7 }} equal to {% if true %}49{% endif %}?"
    assert "Is 49" not in text


def test_render_does_not_autoescape() -> None:
    """Prompts are plain text: quotes and angle brackets are not HTML-escaped."""
    item = ITEM.model_copy(update={"question": 'Is 3 < 4 & "yes"?'})
    assert render("{{ item.question }}", variables(item)) == 'Is 3 < 4 & "yes"?'
