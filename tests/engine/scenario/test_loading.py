"""Scenario loading: every bad input is a one-paragraph `ScenarioError` naming file, line, path and expectation."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from engine import ScenarioError, build_scenario, load_scenario
from engine.scenario._load import apply_overrides
from tests.helpers import scenario_data, write_bank


def _write(tmp_path: Path, data: Any, name: str = "s.yaml") -> Path:
    write_bank(tmp_path / "bank.yaml")
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _error(path: Path, **kwargs: Any) -> str:
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path, **kwargs)
    return str(caught.value)


def test_valid_scenario_loads_with_base_dir(tmp_path: Path) -> None:
    """A valid file loads, and relative paths resolve against its folder."""
    scenario = load_scenario(_write(tmp_path, scenario_data()))
    assert scenario.base_dir == tmp_path.resolve()
    assert scenario.models.judge[0].model == "sim/judge"


def test_unknown_key_names_line_path_and_choices(tmp_path: Path) -> None:
    """An unknown key is reported with its line, its dotted path and the keys that are allowed there."""
    data = scenario_data()
    data["models"]["tutor"]["temprature"] = 0.2
    message = _error(_write(tmp_path, data))
    assert "s.yaml:" in message and "models.tutor.temprature: unknown key" in message
    assert "expected one of: model, base_url" in message
    line = next(i for i, text in enumerate((tmp_path / "s.yaml").read_text().splitlines(), 1) if "temprature" in text)
    assert f"s.yaml:{line}: models.tutor.temprature" in message


def test_wrong_type_names_the_value(tmp_path: Path) -> None:
    """A wrong type says what was expected and what was given."""
    message = _error(_write(tmp_path, scenario_data(concurrency="many")))
    assert "concurrency: Input should be a valid integer" in message and "'many'" in message


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"kind": "debate"}, "kind: unknown scenario kind 'debate'; expected one of: cases, crescendo"),
        ({"student": {"strategy": "sulky"}}, "student.strategy: unknown student strategy 'sulky'"),
        ({"judges": ["harm", "vibes"]}, "judges.1.name: unknown judge 'vibes'"),
        ({"models": {"tutor": "acme/tutor"}}, "models.tutor.model: unknown provider 'acme'"),
        ({"models": {"tutor": "sim/teacher"}}, "the sim provider plays sim/tutor"),
        ({"items": [{"source": "bank", "path": "nowhere.yaml"}]}, "items.0.path: no such file 'nowhere.yaml'"),
        ({"items": [{"source": "csv", "path": "bank.yaml"}]}, "items.0.source: unknown item source 'csv'"),
        ({"student": {"strategy": "crescendo", "max_turns": [9, 2]}}, "max_turns must be between 1 and 50"),
        ({"tutor": {"system_prompt": "{{ item.question "}}, "template syntax error"),
    ],
)
def test_unknown_plugins_and_bad_options(tmp_path: Path, change: dict[str, Any], expected: str) -> None:
    """Unknown providers, kinds, strategies, judges, sources and bad plug-in options are scenario errors."""
    data = scenario_data()
    data.update(change)
    assert expected in _error(_write(tmp_path, data))


def test_sim_knob_typo_lists_the_knobs(tmp_path: Path) -> None:
    """A misspelt sim knob is located under `params` and the real knobs are listed."""
    data = scenario_data()
    data["models"]["tutor"]["params"]["leak_bse"] = 0.3
    message = _error(_write(tmp_path, data))
    assert "models.tutor.params.leak_bse: unknown key; expected one of: latency_s, leak_base" in message


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    """Broken YAML is reported with its line, not a parser traceback."""
    message = _error(_write(tmp_path, "name: x\nkind: [crescendo\nseed: 1\n"))
    assert message.startswith(f"{tmp_path / 's.yaml'}:") and "invalid YAML" in message


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "just a string\n", "42\n"])
def test_non_mapping_documents(tmp_path: Path, text: str) -> None:
    """A document that is not a mapping is a scenario error."""
    assert "a scenario must be a YAML mapping" in _error(_write(tmp_path, text))


def test_missing_file(tmp_path: Path) -> None:
    """A missing scenario file is a scenario error naming it."""
    assert "no such scenario file" in _error(tmp_path / "absent.yaml")


def test_missing_api_key_names_role_and_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An `openai` role without its key fails at load time, naming the role and the variable."""
    monkeypatch.delenv("MY_JUDGE_KEY", raising=False)
    data = scenario_data()
    data["models"]["judge"] = [{"model": "openai/gpt-4o", "api_key_env": "MY_JUDGE_KEY"}]
    message = _error(_write(tmp_path, data))
    assert "role 'judge'" in message and "MY_JUDGE_KEY" in message
    assert load_scenario(tmp_path / "s.yaml", check_credentials=False).models.judge[0].model == "openai/gpt-4o"


def test_model_and_set_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--model` replaces a role's spec; `--set` parses its value as YAML and reaches nested keys and list items."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    scenario = load_scenario(
        _write(tmp_path, scenario_data()),
        models=["tutor=openai/gpt-4o-mini"],
        overrides=["student.max_turns=6", "judge_votes=5", "factors.format=[multi]", "items.0.limit=2"],
    )
    assert scenario.models.tutors[0].model == "openai/gpt-4o-mini" and scenario.models.tutors[0].params == {}
    assert scenario.student.options["max_turns"] == 6
    assert scenario.judge_votes == 5 and scenario.factors["format"] == ["multi"]
    assert scenario.items[0].options == {"limit": 2}


@pytest.mark.parametrize(
    ("models", "overrides", "expected"),
    [
        (["teacher=sim/tutor"], [], "--model 'teacher=sim/tutor'"),
        (["tutor"], [], "expected ROLE=provider/model"),
        ([], ["seed"], "expected dotted.path=VALUE"),
        ([], ["items.5.path=x"], "is not an index"),
        ([], ["name.first=x"], "is not a mapping or a list"),
        ([], ["seed=[unclosed"], "invalid YAML"),
    ],
)
def test_bad_overrides(models: list[str], overrides: list[str], expected: str) -> None:
    """Malformed `--model` and `--set` arguments are scenario errors."""
    with pytest.raises(ScenarioError, match=expected.replace("[", r"\[")):
        apply_overrides(scenario_data(), models=models, overrides=overrides)


_keys = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)


@given(path=st.lists(_keys, min_size=1, max_size=4), value=st.integers(-(2**63), 2**63 - 1) | st.booleans() | _keys)
def test_set_reaches_any_new_dotted_path(path: list[str], value: int | bool | str) -> None:
    """`--set a.b.c=v` creates missing mappings and leaves the input untouched."""
    original: dict[str, Any] = {"zz": {"kept": 1}}
    result = apply_overrides(original, overrides=[f"{'.'.join(path)}={yaml.safe_dump(value).strip()}"])
    node: Any = result
    for key in path:
        node = node[key]
    assert node == value
    assert original == {"zz": {"kept": 1}}


@given(st.recursive(st.none() | st.integers() | st.text(max_size=5), lambda c: st.lists(c) | st.dictionaries(_keys, c)))
def test_arbitrary_documents_never_escape_as_other_errors(document: Any) -> None:
    """Whatever a YAML document holds, validation fails (or passes) only as a `ScenarioError`."""
    data = document if isinstance(document, dict) else {"name": document}
    with contextlib.suppress(ScenarioError):
        build_scenario(data)


def test_content_hash_ignores_concurrency_only(tmp_path: Path) -> None:
    """Concurrency changes no result, so it does not change the scenario hash; the seed does."""
    base = build_scenario(scenario_data(), base_dir=_write(tmp_path, scenario_data()).parent)
    other = build_scenario(scenario_data(concurrency=99), base_dir=tmp_path)
    reseeded = build_scenario(scenario_data(seed=8), base_dir=tmp_path)
    assert base.content_hash() == other.content_hash() != reseeded.content_hash()


def test_model_override_takes_a_yaml_mapping(tmp_path: Path) -> None:
    """`--model ROLE='{model: ..., base_url: ...}'` sets a whole endpoint in one argument."""
    scenario = load_scenario(
        _write(tmp_path, scenario_data()),
        models=["tutor={model: openai/x, base_url: 'http://127.0.0.1:9/v1', rpm: 60}", "judge={model: sim/judge}"],
    )
    (tutor,) = scenario.models.tutors
    assert (tutor.model, tutor.base_url, tutor.rpm) == ("openai/x", "http://127.0.0.1:9/v1", 60)
    assert [spec.model for spec in scenario.models.judge] == ["sim/judge"]
    with pytest.raises(ScenarioError, match=r"--model 'tutor=\{model: openai/x':1: invalid YAML"):
        apply_overrides(scenario_data(), models=["tutor={model: openai/x"])


@pytest.mark.parametrize(
    ("data", "override", "path", "expected"),
    [
        ({"models": {"tutor": "openai/x"}}, "models.tutor.base_url=http://h/v1", ("models", "tutor"),
         {"model": "openai/x", "base_url": "http://h/v1"}),
        ({"models": {"judge": "sim/judge"}}, "models.judge.0.rpm=5", ("models", "judge", 0),
         {"model": "sim/judge", "rpm": 5}),
        ({"models": {"judge": ["sim/judge"]}}, "models.judge.0.rpm=5", ("models", "judge", 0),
         {"model": "sim/judge", "rpm": 5}),
        ({"judges": ["harm", "pedagogy"]}, "judges.1.retries=4", ("judges", 1), {"name": "pedagogy", "retries": 4}),
        ({"design": "demographic"}, "design.stack=[gender]", ("design",), {"name": "demographic", "stack": ["gender"]}),
    ],
)  # fmt: skip
def test_set_under_a_short_form_promotes_it_to_a_mapping(
    data: dict[str, Any], override: str, path: tuple[str | int, ...], expected: dict[str, Any]
) -> None:
    """A role or plug-in written by name becomes `{model: name}` / `{name: name}` when a key under it is set."""
    original = yaml.safe_dump(data)
    node: Any = apply_overrides(data, overrides=[override])
    for key in path:
        node = node[key]
    assert node == expected
    assert yaml.safe_dump(data) == original  # the input is untouched


def test_set_promotion_validates_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The forms the README shows load: an endpoint under a `--model` role, options under a judge given by name."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    scenario = load_scenario(
        _write(tmp_path, scenario_data()),
        models=["tutor=openai/gpt-4o-mini"],
        overrides=["models.tutor.base_url=http://127.0.0.1:9/v1", "judges.0.retries=4", "models.student.rpm=30"],
    )
    assert scenario.models.tutors[0].base_url == "http://127.0.0.1:9/v1"
    assert scenario.judges[0].name == "harm" and scenario.judges[0].options == {"retries": 4}
    assert scenario.models.student is not None and scenario.models.student.rpm == 30


def test_openai_base_url_fills_unset_base_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """OPENAI_BASE_URL is resolved into the spec at load time, so both transports, the cache and the manifest
    see one endpoint; an explicit `base_url` and non-openai providers are left alone."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    scenario = load_scenario(
        _write(tmp_path, scenario_data()),
        models=["tutor=openai/x", "student={model: openai/y, base_url: 'http://other:1/v1'}"],
    )
    assert scenario.models.tutors[0].base_url == "http://127.0.0.1:9/v1"  # and no key is needed, as for base_url
    assert scenario.models.student is not None and scenario.models.student.base_url == "http://other:1/v1"
    assert scenario.models.judge[0].base_url is None
    monkeypatch.setenv("OPENAI_BASE_URL", "::::")
    with pytest.raises(ScenarioError, match="models.tutor.base_url"):
        load_scenario(_write(tmp_path, scenario_data()), models=["tutor=openai/x"])
