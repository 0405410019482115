"""`engine.RunOptions` types the keywords of `run`, `run_sync` and `open_run`; it must stay `Runner`'s keywords."""

import inspect
import typing
from pathlib import Path

import engine
from engine import Runner, RunOptions
from tests.helpers import scenario_data, write_bank


def _runner_keywords() -> dict[str, object]:
    hints = typing.get_type_hints(Runner.__init__)
    parameters = inspect.signature(Runner.__init__).parameters.values()
    return {p.name: hints[p.name] for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}


def test_run_options_are_the_runner_keywords_but_the_report() -> None:
    expected = {name: kind for name, kind in _runner_keywords().items() if name != "report"}
    assert typing.get_type_hints(RunOptions) == expected


def test_run_options_are_all_optional() -> None:
    assert RunOptions.__required_keys__ == frozenset()
    assert RunOptions.__optional_keys__ == frozenset(_runner_keywords()) - {"report"}


def test_the_three_entry_points_take_run_options() -> None:
    for entry in (engine.run, engine.run_sync, engine.open_run):
        (options,) = [p for p in inspect.signature(entry).parameters.values() if p.kind is p.VAR_KEYWORD]
        assert "Unpack[RunOptions]" in str(options.annotation), entry.__name__


def test_a_scenario_built_from_data_takes_its_base_dir_as_str_or_path(tmp_path: Path) -> None:
    write_bank(tmp_path / "bank.yaml")
    from_path = engine.build_scenario(scenario_data(limit=2), base_dir=tmp_path)
    from_str = engine.build_scenario(scenario_data(limit=2), base_dir=str(tmp_path))
    assert from_str == from_path
