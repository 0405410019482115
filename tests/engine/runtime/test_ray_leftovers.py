"""A driver killed before it could stop its local Ray cluster: the next start stops what it left, and says so.

The processes here are stand-ins named as Ray names its agents (`ray::...`), in the killed driver's process
group, so the test needs no Ray; bench-free and Linux-only like the code it tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.runtime import _ray_leftovers as leftovers

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc (Linux)")

_DRIVER = """
import subprocess, sys, time
from pathlib import Path
from engine.runtime import _ray_leftovers as leftovers
leftovers._FOLDER = Path(sys.argv[1])
leftovers.note_driver()
agent = subprocess.Popen(["bash", "-c", 'exec -a "ray::FakeAgent" sleep 120'])
other = subprocess.Popen(["bash", "-c", 'exec -a "not-ray" sleep 120'])
while not Path(f"/proc/{agent.pid}/cmdline").read_bytes().startswith(b"ray::"):
    time.sleep(0.01)  # until bash has exec'd under the new name
print(agent.pid, other.pid, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and ") Z " not in stat.read_text()


def test_the_agents_of_a_killed_driver_are_stopped_at_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(leftovers, "_FOLDER", tmp_path)
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, str(tmp_path)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert driver.stdout is not None
    agent, other = map(int, driver.stdout.readline().split())
    try:
        assert leftovers.stop_leftovers() == [], "a running driver's cluster is its own"
        assert _alive(agent)
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        said = leftovers.stop_leftovers()
        assert len(said) == 1 and f"simrun pid {driver.pid}" in said[0] and str(agent) in said[0]
        for _ in range(100):
            if not _alive(agent):
                break
            time.sleep(0.05)
        assert not _alive(agent) and _alive(other), "only the Ray-named process of that group is stopped"
        assert list(tmp_path.iterdir()) == [] and leftovers.stop_leftovers() == []
    finally:
        driver.stdout.close()
        for pid in (agent, other):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
