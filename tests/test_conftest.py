"""The suite's own fixtures: a failed test's open socket cannot fail the test after it.

Two small suites run in a subprocess under `-W error`, like this one: the first test fails with a socket still
open, the second passes. Without tests/conftest.py pytest keeps the failed test's frames until the next test
runs, so the socket's ResourceWarning fails that test too; with it, only the failed test fails.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEAKY = """
import gc
import socket


def test_a_fails_with_a_socket_open():
    held = [socket.socket()]
    held.append(held)  # a cycle: only the garbage collector frees it
    assert not held


def test_b_passes():
    gc.collect()  # the collector runs in a later test, as it may at any allocation
"""


def _failed(tmp_path: Path, *plugin: str) -> list[str]:
    tmp_path.mkdir()
    (tmp_path / "test_leaky.py").write_text(LEAKY, encoding="utf-8")
    options = ["-c", "/dev/null", "-W", "error", "-p", "no:cacheprovider", "-p", "no:asyncio", "-p", "no:anyio"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(tmp_path), "-q", "-rf", "--rootdir", str(tmp_path), *options, *plugin],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    return sorted(line.split("::")[1].split()[0] for line in done.stdout.splitlines() if line.startswith("FAILED"))


def test_a_socket_a_failed_test_left_open_fails_only_that_test(tmp_path: Path) -> None:
    assert _failed(tmp_path / "bare") == ["test_a_fails_with_a_socket_open", "test_b_passes"]
    assert _failed(tmp_path / "ours", "-p", "tests.conftest") == ["test_a_fails_with_a_socket_open"]
