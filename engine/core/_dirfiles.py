"""Files inside a directory someone else may have written (a run directory sent to you): opened through the
directory's descriptor and never through a symbolic link, only if regular, and never read beyond a bound.

A run directory is untrusted input. `report.md` as a link to `~/.bashrc` must not be overwritten through the
link, a FIFO as `summary.json` must not hang a reader, `/dev/zero` must not be read until memory runs out.
Writes of whole files go to a temporary file in the same directory renamed over the name, which replaces a
link rather than following it; appends and the lock open the name with `O_NOFOLLOW` and refuse anything but
a regular file with one link.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import BinaryIO, Final

from engine.core._errors import ScenarioError

__all__ = (
    "MAX_LINE_BYTES",
    "MAX_RUN_FILE_BYTES",
    "exists_in",
    "open_append_in",
    "open_in",
    "read_in",
    "read_lines_in",
    "write_in",
)

MAX_RUN_FILE_BYTES: Final = 256 * 1024 * 1024
"""Largest run file read whole (a manifest, plan or summary is kilobytes; episodes.jsonl is read by line)."""
MAX_LINE_BYTES: Final = 16 * 1024 * 1024
"""Longest line of a JSON-lines file (one episode record)."""
_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


@contextlib.contextmanager
def _dir_fd(folder: Path) -> Iterator[int]:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ScenarioError(f"{folder}: no such directory") from None
    except OSError as exc:
        raise ScenarioError(f"{folder}: cannot open the directory ({exc.strerror or exc})") from None
    try:
        yield fd
    finally:
        os.close(fd)


def _refusal(path: Path, exc: OSError) -> ScenarioError:
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return ScenarioError(f"{path} is a symbolic link: a run directory's files must be its own")
    if exc.errno == errno.EISDIR:
        return ScenarioError(f"{path} is a directory, not a file: this run directory is damaged")
    if exc.errno == errno.ENXIO:
        return ScenarioError(f"{path} is not a regular file: this run directory is damaged")
    return ScenarioError(f"{path}: {exc.strerror or exc}")


def open_in(folder: Path, name: str, flags: int = os.O_RDONLY, *, single_link: bool = False) -> int:
    """A descriptor of `folder/name`, a regular file reached without following a link.

    Raises `FileNotFoundError` when it is absent (callers decide what absence means) and `ScenarioError` for
    anything else wrong. `single_link` refuses a hard link shared with another name (for files written to).
    """
    path = folder / name
    with _dir_fd(folder) as dfd:
        try:
            fd = os.open(name, flags | _NOFOLLOW | os.O_NONBLOCK, 0o644, dir_fd=dfd)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise _refusal(path, exc) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or (single_link and info.st_nlink > 1):
        os.close(fd)
        what = "a hard link to another file" if stat.S_ISREG(info.st_mode) else "not a regular file"
        raise ScenarioError(f"{path} is {what}: this run directory is damaged")
    os.set_blocking(fd, True)
    return fd


def exists_in(folder: Path, name: str) -> bool:
    """Whether `folder/name` exists as anything (a link included, without following it)."""
    try:
        os.lstat(folder / name)
    except OSError:
        return False
    return True


def read_in(folder: Path, name: str, *, limit: int = MAX_RUN_FILE_BYTES) -> bytes:
    """The whole of `folder/name` (see `open_in`), refused past `limit` bytes."""
    fd = open_in(folder, name)
    with os.fdopen(fd, "rb") as handle:
        if os.fstat(fd).st_size > limit:
            raise ScenarioError(f"{folder / name} is over the {limit:,}-byte limit: this run directory is damaged")
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise _refusal(folder / name, exc) from None
    if len(data) > limit:
        raise ScenarioError(f"{folder / name} is over the {limit:,}-byte limit: this run directory is damaged")
    return data


def read_lines_in(folder: Path, name: str) -> Generator[bytes, None, None]:
    """The lines of `folder/name`, each with its newline (a last line without one is torn), each bounded."""
    fd = open_in(folder, name)
    with os.fdopen(fd, "rb") as handle:
        while line := handle.readline(MAX_LINE_BYTES + 1):
            if len(line) > MAX_LINE_BYTES:
                raise ScenarioError(f"{folder / name}: a line longer than {MAX_LINE_BYTES:,} bytes")
            yield line


def write_in(folder: Path, name: str, data: bytes) -> None:
    """Replace `folder/name` by `data` atomically: a temporary file in `folder` renamed over the name (a link
    there is replaced, never followed); a crash leaves the old file or the new one."""
    tmp = f".{name}.{os.getpid()}.tmp"
    with _dir_fd(folder) as dfd:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dfd)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644, dir_fd=dfd)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise _refusal(folder / name, exc) from None


def open_append_in(folder: Path, name: str) -> BinaryIO:
    """`folder/name` opened to append (created if absent), never through a link or into a shared file."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    return os.fdopen(open_in(folder, name, flags, single_link=True), "ab")
