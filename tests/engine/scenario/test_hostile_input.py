"""Hostile input, part two: every reader refuses control characters, bad tags and non-files with a located
message and exit 2, whichever path the text comes through (scenario, item bank, load test, `--set`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from engine import ScenarioError
from engine.cli._main import main
from engine.core._inputs import parse_yaml
from tests.helpers import scenario_data, write_bank

_BAD_TEXT = {
    "form-feed": ("b: x\x0cy", "control characters are not allowed"),
    "nul": ("b: \x00", "control characters are not allowed"),
    "bel": ("b: [\x07]", "control characters are not allowed"),
    "timestamp": ("b: !!timestamp 2024-13-45", "is not a valid tag:yaml.org,2002:timestamp"),
    "timestamp-word": ("b: !!timestamp soon", "is not a valid tag:yaml.org,2002:timestamp"),
    "float": ("b: !!float abc", "is not a valid tag:yaml.org,2002:float"),
    "bool": ("b: !!bool maybe", "is not a valid tag:yaml.org,2002:bool"),
    "binary": ("b: !!binary AAAA", "could not determine a constructor"),
    "set": ("b: !!set {x}", "could not determine a constructor"),
    "python": ("b: !!python/object/apply:os.system [echo]", "could not determine a constructor"),
    "custom": ("b: !mine x", "could not determine a constructor"),
}
_LOCATED = re.compile(r":(\d+): invalid YAML at column (\d+): ")


def _refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error:") and "Traceback" not in err
    return " ".join(err.split())


@pytest.mark.parametrize(("text", "expected"), list(_BAD_TEXT.values()), ids=list(_BAD_TEXT))
def test_every_parse_error_is_a_located_scenario_error(text: str, expected: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_yaml(f"a: 1\n{text}\n", "doc.yaml")
    message = str(caught.value)
    found = _LOCATED.search(message)
    assert message.startswith("doc.yaml:2:") and found is not None and expected in message
    assert int(found.group(2)) >= 1


@pytest.mark.parametrize("where", ["scenario", "bank", "loadtest", "set"])
@pytest.mark.parametrize("case", ["form-feed", "nul", "timestamp", "bool", "binary"])
def test_every_input_path_refuses_bad_text_with_its_location(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, case: str
) -> None:
    text, expected = _BAD_TEXT[case]
    write_bank(tmp_path / "bank.yaml")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(scenario_data(), sort_keys=False), encoding="utf-8")
    args = ["validate", str(scenario)]
    if where == "scenario":
        scenario.write_text(scenario.read_text() + f"unused:\n  {text}\n", encoding="utf-8")
        named = str(scenario)
    elif where == "bank":
        (tmp_path / "bank.yaml").write_text((tmp_path / "bank.yaml").read_text() + f"{text}\n", encoding="utf-8")
        named = str(tmp_path / "bank.yaml")
    elif where == "loadtest":
        load = tmp_path / "load.yaml"
        load.write_text(f"kind: load\n{text}\n", encoding="utf-8")
        args, named = ["loadtest", str(load)], str(load)
    else:
        args += ["--set", f"tutor.params={{{text}}}"]
        named = "--set"
    message = _refused(args, capsys)
    assert named in message and "invalid YAML at column" in message and expected in message


def test_validation_errors_are_capped_and_each_located(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Thousands of unknown keys: the first errors each at its own line, then a count (located in one pass)."""
    write_bank(tmp_path / "bank.yaml")
    head = yaml.safe_dump(scenario_data(), sort_keys=False)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(head + "".join(f"unknown{i}: {i}\n" for i in range(2000)), encoding="utf-8")
    first = head.count("\n") + 1
    message = _refused(["validate", str(scenario)], capsys)
    located = re.findall(r":(\d+): unknown(\d+): unknown key", message)
    assert [(int(line), int(key)) for line, key in located] == [(first + i, i) for i in range(20)]
    assert "… and 1,980 more errors" in message


def test_a_document_over_the_value_bound_is_refused_before_it_is_built() -> None:
    from engine.core._inputs import MAX_YAML_NODES

    with pytest.raises(ScenarioError, match=f"more than {MAX_YAML_NODES:,} values"):
        parse_yaml("x: [" + ", ".join(["1"] * MAX_YAML_NODES) + "]\n", "big.yaml")
    assert len(parse_yaml("x: [" + ", ".join(["1"] * 1000) + "]\n", "small.yaml")[0]["x"]) == 1000
