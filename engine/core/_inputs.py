"""Bounded reading of user files and YAML: every limit is checked before anything walks or copies the data.

A scenario, an item bank or a `--set` value is untrusted text. PyYAML alone expands aliases into shared
objects that every later walk (overrides, validation, the manifest) multiplies, recurses without limit on
deep nesting and self-referencing aliases, and `read_text` happily reads `/dev/zero` forever. Here the
composer counts nodes as it builds them, aliases included, so a bomb fails after a few thousand events.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, Final

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent

from engine.core._errors import ScenarioError

__all__ = (
    "MAX_FILE_BYTES",
    "MAX_YAML_ALIAS_NODES",
    "MAX_YAML_DEPTH",
    "check_input_path",
    "load_yaml_file",
    "parse_yaml",
    "read_input",
)

MAX_FILE_BYTES: Final = 64 * 1024 * 1024
"""Largest scenario, item or data file read (the public datasets are under 2 MiB)."""
MAX_YAML_DEPTH: Final = 100
"""Deepest nesting of YAML collections accepted (scenarios need about 6)."""
MAX_YAML_ALIAS_NODES: Final = 100_000
"""Nodes that aliases may add to a document beyond its own size (or its size, if larger)."""
_INT_BITS: Final = 64


class _BoundedLoader(yaml.SafeLoader):
    """A safe loader whose composer refuses deep nesting, cycles and alias expansion beyond the limits."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._composed = 0
        self._expanded = 0
        self._sizes: dict[int, int] = {}  # expanded size of each finished anchored node

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        mark: Any = event.start_mark
        if isinstance(event, AliasEvent):
            target = self.anchors.get(event.anchor or "")
            if target is not None:
                size = self._sizes.get(id(target))
                if size is None:
                    problem = f"alias *{event.anchor} refers to a node that contains it"
                    raise ComposerError(None, None, problem, mark)
                self._expanded += size
                if self._expanded - self._composed > max(MAX_YAML_ALIAS_NODES, self._composed):
                    problem = f"aliases expand the document beyond {MAX_YAML_ALIAS_NODES:,} extra nodes"
                    raise ComposerError(None, None, problem, mark)
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_YAML_DEPTH:
            raise ComposerError(None, None, f"nesting deeper than {MAX_YAML_DEPTH} levels", mark)
        before = self._expanded
        self._composed += 1
        self._expanded += 1
        node = super().compose_node(parent, index)
        self._depth -= 1
        if getattr(event, "anchor", None) is not None:
            self._sizes[id(node)] = self._expanded - before
        return node

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        try:
            value: int = super().construct_yaml_int(node)
        except ValueError:
            raise ConstructorError(None, None, "integer too long", node.start_mark) from None
        if not -(2 ** (_INT_BITS - 1)) <= value < 2**_INT_BITS:
            raise ConstructorError(None, None, f"integer {value:.3e} does not fit in {_INT_BITS} bits", node.start_mark)
        return value


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)


def parse_yaml(text: str, source: str) -> tuple[Any, yaml.Node | None]:
    """The data of one YAML document and its node tree (for line numbers), within the limits above.

    Raises:
        ScenarioError: Invalid YAML or a limit exceeded, naming `source` and the line.
    """
    loader = _BoundedLoader(text)
    try:
        tree = loader.get_single_node()
        data = loader.construct_document(tree) if tree is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(f"{source}{where}: invalid YAML: {problem}") from None
    except RecursionError:
        raise ScenarioError(f"{source}: invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()
    return data, tree


def check_input_path(path: Path, what: str, *, allow_dir: bool = False) -> None:
    """Refuse what no reader should open: devices, FIFOs, sockets, and regular files over `MAX_FILE_BYTES`."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such {what}") from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode) and allow_dir:
        return
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise ScenarioError(f"{path}: the {what} is {kind}")
    if info.st_size > MAX_FILE_BYTES:
        raise ScenarioError(f"{path}: the {what} is {info.st_size:,} bytes, over the {MAX_FILE_BYTES:,}-byte limit")


def read_input(path: Path, what: str) -> str:
    """A user file's UTF-8 text, read only if it is a regular file, and never more than `MAX_FILE_BYTES`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the open
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such {what}") from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ScenarioError(f"{path}: the {what} is not a regular file")
    with os.fdopen(fd, "rb") as handle:
        try:
            raw = handle.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise ScenarioError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ScenarioError(f"{path}: the {what} is over the {MAX_FILE_BYTES:,}-byte limit")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError(f"{path}: the {what} is not UTF-8 text") from None


def load_yaml_file(path: str | Path, what: str) -> Any:
    """The data of a user's YAML file (`what` names it in messages), read and parsed within every limit here."""
    path = Path(path)
    return parse_yaml(read_input(path, what), str(path))[0]
