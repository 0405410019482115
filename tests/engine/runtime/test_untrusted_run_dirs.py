"""A run directory is untrusted input: no command writes outside it through a link, none hangs on a FIFO or
reads a device, every damaged file is exit 2 with a message, and `simrun runs` lists what it skipped."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx2
import orjson
import pytest
import yaml

import engine
from engine.cli._main import main
from engine.core._errors import ScenarioError
from engine.runtime._rundir import stored_hash
from engine.tools._view import serve_report
from tests.helpers import make_scenario, scenario_data, write_bank

_FILES = ["summary.json", "report.md", "report.html", ".lock", "events.jsonl", "episodes.jsonl", "plan.json"]
_HANG_LIMIT_S = 60  # only catches a hang; the time a command takes is measured by bench/hostile_input.py


@contextlib.contextmanager
def _no_hang() -> Iterator[None]:
    def stop(*_: object) -> None:
        raise TimeoutError("the command hung")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(_HANG_LIMIT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def good_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("good")
    return engine.run_sync(make_scenario(folder, limit=4), out=folder / "runs").run_dir


@pytest.fixture
def copied(good_run: Path, tmp_path: Path) -> Path:
    run_dir = tmp_path / "runs" / "run"
    shutil.copytree(good_run, run_dir)
    return run_dir


def _scenario(tmp_path: Path) -> Path:
    write_bank(tmp_path / "bank.yaml")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario_data(limit=4)), encoding="utf-8")
    return path


def _commands(run_dir: Path, good_run: Path, tmp_path: Path) -> list[list[str]]:
    return [
        ["report", str(run_dir)],
        ["compare", str(run_dir), str(good_run), "--out", str(tmp_path / "cmp")],
        [str(_scenario(tmp_path)), "--resume", str(run_dir)],
    ]


def _exit(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The exit code and everything printed (0, or 2 with a message; never a traceback)."""
    with _no_hang():
        code = main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in err + out, (args, err)
    if code != 0:
        assert code == 2 and "error:" in err, (args, code, err)
    return code, " ".join((out + err).split())


@pytest.mark.parametrize("name", _FILES)
def test_no_command_writes_through_a_link_out_of_the_run_directory(
    copied: Path, good_run: Path, tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n", encoding="utf-8")
    target = copied / name
    with contextlib.suppress(FileNotFoundError):
        target.unlink()
    target.symlink_to(outside)
    for args in _commands(copied, good_run, tmp_path):
        _exit(args, capsys)
        assert outside.read_text(encoding="utf-8") == "keep me\n", (name, args)
    assert not [p for p in tmp_path.iterdir() if p.name not in ("outside.txt", "runs", "cmp", "s.yaml", "bank.yaml")]


def _plant(run_dir: Path, name: str, how: str) -> None:
    target = run_dir / name
    with contextlib.suppress(FileNotFoundError):
        target.unlink()
    if how == "fifo":
        os.mkfifo(target)
    elif how == "dev-zero":
        target.symlink_to("/dev/zero")
    elif how == "directory":
        target.mkdir()
    elif how == "loop":
        target.symlink_to(target)


@pytest.mark.parametrize("how", ["fifo", "dev-zero", "directory", "loop"])
@pytest.mark.parametrize("name", [*_FILES, "manifest.json"])
def test_non_regular_run_files_are_messages_not_hangs(
    copied: Path, good_run: Path, tmp_path: Path, name: str, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant(copied, name, how)
    for args in _commands(copied, good_run, tmp_path):
        _exit(args, capsys)
    with _no_hang(), contextlib.suppress(ScenarioError), serve_report(copied) as server:
        answer = httpx2.get(server.url, timeout=30)
        assert answer.status_code in (200, 500)
    code, _ = _exit(["runs", str(copied.parent)], capsys)
    assert code == 0


def test_a_swapped_scenario_under_its_old_hash_is_refused(
    copied: Path, good_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = orjson.loads((copied / "manifest.json").read_bytes())
    manifest["scenario"]["seed"] = manifest["scenario"]["seed"] + 1
    (copied / "manifest.json").write_bytes(orjson.dumps(manifest))
    for args in _commands(copied, good_run, tmp_path):
        code, err = _exit(args, capsys)
        assert code == 2 and "does not match scenario_hash" in err


def test_runs_lists_a_damaged_entry_and_goes_on(
    copied: Path, good_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(good_run, copied.parent / "second")
    manifest = orjson.loads((copied / "manifest.json").read_bytes())
    manifest["scenario"]["prices"] = {"sim/tutor": {"input": "free"}}
    manifest["calls"] = "many"
    (copied / "manifest.json").write_bytes(orjson.dumps(manifest))
    (copied.parent / "pipe").mkdir()
    os.mkfifo(copied.parent / "pipe" / "manifest.json")
    code, printed = _exit(["runs", str(copied.parent)], capsys)
    assert code == 0 and "skipped run:" in printed and "damaged manifest" in printed
    assert "skipped pipe:" in printed and "not a regular file" in printed and "latest" in printed


def test_view_answers_every_request_with_a_status(copied: Path) -> None:
    with _no_hang(), serve_report(copied) as server:
        huge = httpx2.get(f"{server.url}episodes/{'9' * 4300}.html", timeout=30)
        assert huge.status_code == 404
        lines = (copied / "episodes.jsonl").read_bytes().splitlines(keepends=True)
        (copied / "episodes.jsonl").write_bytes(b"".join([b'{"id": 1}\n', *lines[1:]]))
        damaged = httpx2.get(f"{server.url}episodes/1.html", timeout=30)
        assert damaged.status_code == 500 and b"damaged" in damaged.content
        (copied / "report.html").unlink()
        (copied / "report.html").symlink_to("/dev/zero")
        assert httpx2.get(server.url, timeout=30).status_code == 500


def test_a_redacted_scenario_verifies_by_its_stored_hash(copied: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A stored scenario with a secret redacted cannot match `scenario_hash`; `stored_scenario_hash` vouches
    for it, and a manifest written before that field existed is not refused for it."""
    manifest = orjson.loads((copied / "manifest.json").read_bytes())
    manifest["scenario"]["models"]["tutor"]["base_url"] = "http://user:[redacted]@127.0.0.1:9/v1"
    (copied / "manifest.json").write_bytes(orjson.dumps(manifest))
    assert "does not match scenario_hash" in _exit(["report", str(copied)], capsys)[1]
    manifest["stored_scenario_hash"] = stored_hash(manifest["scenario"])
    (copied / "manifest.json").write_bytes(orjson.dumps(manifest))
    assert _exit(["report", str(copied)], capsys)[0] == 0
    del manifest["stored_scenario_hash"]
    (copied / "manifest.json").write_bytes(orjson.dumps(manifest))
    assert _exit(["report", str(copied)], capsys)[0] == 0
