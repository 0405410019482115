"""Templates are bounded per run, not per render, and every size is checked before it is allocated: each
template that hung or allocated gigabytes is refused with a message (exit 2 through the command line)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from engine.cli._main import main
from engine.core._templates import TemplateBudget, render
from tests.helpers import scenario_data, write_bank

HOSTILE = {
    "wordwrap": ("{{ ('a' * 900000)|wordwrap(1) }}", "wraps 900,000 characters"),
    "wordwrap-words": ("{{ ('a ' * 400000)|wordwrap(1) }}", "wraps 800,000 characters"),
    "lipsum": ("{{ lipsum(999999) }}", "lipsum of more than"),
    "squaring": (
        "{% set ns = namespace(x=3) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}{% endfor %}{{ 1 }}",
        "product of more than",
    ),
    "sum-lists": ("{{ (range(99999)|map('string')|map('list')|list)|sum(start=[]) }}", "longer than"),
    "print-shared-list": ("{% set a = range(99999)|list %}{% set b = [a] * 99999 %}{{ b }}", "longer than"),
    "nested-literals": (
        "{% set a = range(99999)|list %}{% set b = [a, a, a, a, a, a, a, a, a, a, a, a] %}{{ [b, b, b, b] }}",
        "longer than",
    ),
    "doubling": (
        "{% set ns = namespace(x=[1]) %}{% for i in range(40) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}{{ ns.x }}",
        "longer than",
    ),
    "join": ("{{ range(99999)|join('x' * 999999) }}", "longer than"),
    "indent": ("{{ ('a\n' * 499999)|indent('x' * 999999) }}", "longer than"),
    "slice": ("{{ range(99999)|slice(999999)|list }}", "longer than"),
    "batch": ("{{ range(9)|batch(999999, 0)|list }}", "longer than"),
    "sort": ("{{ (range(99999)|list * 10)|sort }}", "longer than"),
    "format-map-index": ("{{ '{0.__class__}'.format_map({}) }}", "IndexError"),
    "format-map-attribute": ("{{ '{a.__class__}'.format_map({'a': 1}) }}", "unsafe"),
}


@pytest.mark.parametrize(("template", "expected"), list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_templates_are_refused_with_a_message(template: str, expected: str) -> None:
    with pytest.raises(ValueError, match="template") as caught:
        render(template, {})
    assert expected in str(caught.value)


@pytest.mark.parametrize("name", ["wordwrap", "squaring", "print-shared-list", "format-map-index"])
def test_hostile_templates_exit_2_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    write_bank(tmp_path / "bank.yaml")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(scenario_data(), sort_keys=False), encoding="utf-8")
    value = yaml.safe_dump(HOSTILE[name][0], default_style="'").strip()
    code = main(["run", "--dry-run", str(scenario), "--set", f"tutor.system_prompt={value}"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error:") and "template" in err and "Traceback" not in err, err


def test_the_budget_is_shared_by_every_render_of_a_run() -> None:
    """A render under the per-render limit still counts: once the run's budget is spent, renders fail."""
    budget = TemplateBudget()
    budget.limit_s = 0.01
    slow = "{% for i in range(300) %}{% for j in range(300) %}{% endfor %}{% endfor %}"
    with budget.active(), pytest.raises(ValueError, match="templates of this run take more than"):
        for _ in range(100):
            render(slow, {})
    assert budget.used_s > 0.01
    assert render(slow, {}) == ""  # outside the run, only the per-render limits apply


def test_ordinary_sums_joins_and_literals_are_unchanged() -> None:
    assert render("{{ [[1, 2], [3]]|sum(start=[]) }}", {}) == "[1, 2, 3]"
    assert render("{{ [1, 2, 3]|sum }}", {}) == "6"
    assert render("{{ items|sum(attribute='n') }}", {"items": [{"n": 2}, {"n": 3}]}) == "5"
    assert render("{{ ['a', 'b']|join(', ') }}", {}) == "a, b"
    assert render("{{ 'a\nb'|indent(2, true) }}", {}) == "a\n  b"
    assert render("{{ 'one two three'|wordwrap(5) }}", {}) == "one\ntwo\nthree"
    assert render("{% set a, b = (1, 2) %}{{ {'x': [a, b]} }}", {}) == "{'x': [1, 2]}"
    assert render("{{ 12345678 * 87654321 }}", {}) == str(12345678 * 87654321)
    assert len(render("{{ lipsum(2, html=false) }}", {})) > 0
