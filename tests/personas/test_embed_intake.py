"""`simrun embed` says what its item source read, kept and skipped, as `simrun run` and `validate` do: the same
intake line, on stderr, for the texts it embeds (yellow when something was skipped)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from engine.cli._main import main
from engine.tools._embed import source_intake
from personas.case_model import BUILTIN_FILE
from tests.personas.test_intake import _release_with_gaps


def test_embed_prints_what_the_release_loader_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _release_with_gaps(tmp_path / "tcb")
    out = tmp_path / "vectors.json"
    assert main(["embed", str(root), "--source", "tutorcasebench", "--model", "sim/embed", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    line = next(text for text in err.splitlines() if text.startswith("items: "))
    assert line.startswith(f"items: tutorcasebench {root}: read 4, kept 3, skipped 5 (")
    for reason in ("scenario whose category has no rubric 1", "MCQ whose answer is not an option 1"):
        assert reason in line
    assert len(orjson.loads(out.read_bytes())) == 3  # one vector per kept case, as counted


def test_embed_prints_the_intake_when_nothing_was_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    intake = source_intake("cases", BUILTIN_FILE)
    assert intake.skipped == {} and intake.read == intake.kept == 15
    assert main(["embed", str(BUILTIN_FILE), "--model", "sim/embed", "-o", str(tmp_path / "v.json")]) == 0
    assert f"items: cases {BUILTIN_FILE}: read 15, kept 15" in capsys.readouterr().err
