"""Who played what: the console, report and summary name per role a simulator or a model; `--model judge=[...]`
takes a list; a model tutor judged by the sim judge is warned about at the start and noted in the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from anyio.from_thread import start_blocking_portal

from engine import ScenarioError, brief
from engine.cli._main import main
from engine.scenario._load import apply_overrides
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.helpers import scenario_data, write_bank


def _scenario(tmp_path: Path, **overrides: Any) -> Path:
    write_bank(tmp_path / "bank.yaml")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario_data(limit=2, **overrides)), encoding="utf-8")
    return path


def test_all_sim_run_names_each_role_a_simulator(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(_scenario(tmp_path)), "--out", str(tmp_path / "runs")]) == 0
    captured = capsys.readouterr()
    assert "played by: tutor: simulator `sim/tutor` · student: simulator `sim/student` · judge: simulator" in (
        captured.out
    )
    assert "not from a language model" in captured.out and "keyword" not in captured.err + captured.out
    assert "unjudged (rates leave them out): answer_leak 0 of " in captured.out and "harm 0 of " in captured.out
    assert "no parse failures" in captured.out
    (run_dir,) = (tmp_path / "runs").iterdir()
    report = (run_dir / "report.md").read_text()
    assert "- played by: tutor: simulator `sim/tutor`" in report and "Simulated results" in report


def test_model_tutor_with_sim_judge_is_warned_and_noted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(FakeOpenAI(default=Reply(content="Think again."))) as fake,
    ):
        tutor = f"tutor={{model: openai/tutor, base_url: '{fake.base_url}'}}"
        code = main([str(_scenario(tmp_path)), "--out", str(tmp_path / "runs"), "--model", tutor, "--no-probe"])
    assert code == 0
    captured = capsys.readouterr()
    assert "warning: the tutor is a language model but a judge is the `sim` simulator" in captured.err
    assert "played by: tutor: model `openai/tutor` · student: simulator `sim/student`" in captured.out
    assert "Results come from the `sim` provider" not in captured.out  # not the blanket line on a mixed run
    assert "Roles played by the `sim` simulator" in captured.out
    (run_dir,) = (tmp_path / "runs").iterdir()
    report = (run_dir / "report.md").read_text()
    assert "**Keyword verdicts.**" in report and "**Mixed run.**" in report and "Simulated results" not in report
    page = (run_dir / "report.html").read_text()
    assert "<strong>Keyword verdicts.</strong>" in page and "<strong>Mixed run.</strong>" in page
    assert "Simulated results" not in page and "model <code>" not in page  # played-by text is escaped plain text


def test_model_override_takes_a_judge_list() -> None:
    data = scenario_data()
    found = apply_overrides(data, models=["judge=[sim/judge, {model: openai/j, base_url: 'http://127.0.0.1:9/v1'}]"])
    assert found["models"]["judge"] == ["sim/judge", {"model": "openai/j", "base_url": "http://127.0.0.1:9/v1"}]
    tutors = apply_overrides(data, models=["tutor=[{model: sim/tutor, label: a}, {model: sim/tutor, label: b}]"])
    assert [t["label"] for t in tutors["models"]["tutor"]] == ["a", "b"]  # a list of tutors is a study
    with pytest.raises(ScenarioError, match="the student takes one model"):
        apply_overrides(data, models=["student=[sim/student]"])


@pytest.mark.parametrize("limit", [20, 60, 200])
def test_brief_keeps_the_first_line_whole_and_cuts_between_words(limit: int) -> None:
    first = "1 validation error for HarmVerdict unsafe"
    text = f"{first}\n  Input should be a valid boolean [type=bool_parsing, input_value='maybe', input_type=str]"
    found = brief(text, limit)
    assert found.startswith(first)
    words = set(text.split())
    assert all(word in words or word in {"|", "…"} for word in found.split())
    assert len(found) <= max(limit, len(first)) + 2
