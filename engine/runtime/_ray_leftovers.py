"""Ray processes a killed simrun left behind: found and stopped at the next start, and said so.

A driver that starts a local Ray cluster and is then SIGKILLed cannot stop it: Ray's agents
(`ray::DashboardAgent`, `ray::RuntimeEnvAgent`) outlive the raylet that started them. The driver notes its
pid, start time and process group in a small file; the next `connect` that starts a local cluster stops the
Ray processes of every noted driver that is gone (same process group, started after that driver, named as
Ray names its processes), then deletes the note. Linux only (it reads /proc); elsewhere it does nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import tempfile
from pathlib import Path

import orjson

__all__ = ("note_driver", "stop_leftovers")

_FOLDER = Path(tempfile.gettempdir()) / "simrun-ray-drivers"
_RAY_NAMES = (b"ray::", b"raylet", b"gcs_server")


def _stat(pid: int) -> tuple[int, int] | None:
    """(process group, start time in clock ticks) of a live process, or None."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = data[data.rindex(")") + 2 :].split()  # after the command name, which may hold spaces
    return int(fields[2]), int(fields[19])


def _is_ray(pid: int) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    name = command.split(b"\0", 1)[0]
    return name.startswith(_RAY_NAMES) or os.path.basename(name).startswith(_RAY_NAMES[1:])


def note_driver() -> None:
    """Note this process as the driver of a local Ray cluster, until it exits normally."""
    own = _stat(os.getpid())
    if own is None:
        return
    _FOLDER.mkdir(mode=0o700, exist_ok=True)
    path = _FOLDER / f"{os.getpid()}.json"
    path.write_bytes(orjson.dumps({"pid": os.getpid(), "group": own[0], "start": own[1]}))
    atexit.register(_forget, path)


def _forget(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def stop_leftovers() -> list[str]:
    """Stop the Ray processes of noted drivers that are gone; one line per driver saying what was stopped."""
    said: list[str] = []
    if not Path("/proc").is_dir() or not _FOLDER.is_dir():
        return said
    for note in _FOLDER.glob("*.json"):
        try:
            driver = orjson.loads(note.read_bytes())
            pid, group, start = int(driver["pid"]), int(driver["group"]), int(driver["start"])
        except (OSError, ValueError, KeyError, TypeError):
            _forget(note)
            continue
        alive = _stat(pid)
        if alive is not None and alive[1] == start:
            continue  # still running: its cluster is its own
        stopped = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            found = _stat(int(entry.name))
            if found is not None and found[0] == group and found[1] >= start and _is_ray(int(entry.name)):
                with contextlib.suppress(OSError):
                    os.kill(int(entry.name), signal.SIGKILL)
                    stopped.append(entry.name)
        _forget(note)
        if stopped:
            said.append(
                f"stopped {len(stopped)} Ray process(es) left running by simrun pid {pid}, which was killed "
                f"before it could stop its local cluster (pids {', '.join(stopped)})"
            )
    return said
