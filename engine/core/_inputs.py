"""Bounded reading of user files and YAML: every limit is checked before anything walks or copies the data.

A scenario, an item bank or a `--set` value is untrusted text. PyYAML alone expands aliases into shared
objects that every later walk (overrides, validation, the manifest) multiplies, recurses without limit on
deep nesting and self-referencing aliases, and `read_text` happily reads `/dev/zero` forever. Here one pass
over libyaml's events counts values, depth and alias expansions before any node is built, so a bomb or an
oversized document fails early, and every failure (a control character, a bad tag) is a located `ScenarioError`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, Final

import yaml
from yaml._yaml import CParser
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, ScalarEvent
from yaml.reader import ReaderError
from yaml.resolver import Resolver

from engine.core._errors import ScenarioError

__all__ = (
    "MAX_FILE_BYTES",
    "MAX_YAML_ALIAS_NODES",
    "MAX_YAML_DEPTH",
    "MAX_YAML_NODES",
    "check_input_path",
    "load_yaml_file",
    "parse_yaml",
    "read_input",
    "read_input_bytes",
)

MAX_FILE_BYTES: Final = 64 * 1024 * 1024
"""Largest scenario, item or data file read (the public datasets are under 2 MiB)."""
MAX_YAML_DEPTH: Final = 100
"""Deepest nesting of YAML collections accepted (scenarios need about 6)."""
MAX_YAML_ALIAS_NODES: Final = 100_000
"""Nodes that aliases may add to a document beyond its own size (or its size, if larger)."""
MAX_YAML_NODES: Final = 100_000
"""Values (scalars and collections) in one document: a scenario has a few hundred, a large item bank tens of
thousands; past this, parsing and validation would take seconds per file."""
_INT_BITS: Final = 64
_DATA_TAGS: Final = tuple(
    f"tag:yaml.org,2002:{name}" for name in ("null", "bool", "int", "float", "str", "timestamp", "seq", "map")
)


class _Loader(CParser, SafeConstructor, Resolver):
    """libyaml's parser and composer with the safe constructor, restricted to plain data tags.

    `!!binary`, `!!set`, `!!omap` and `!!pairs` build values (bytes, sets, tuples) no scenario field takes and
    JSON cannot hold, so they are refused like any unknown tag; a constructor that fails on a wrong value
    (`!!float abc`, `!!timestamp 2024-13-45`) fails as a located YAML error.
    """

    yaml_constructors = {tag: SafeConstructor.yaml_constructors[tag] for tag in _DATA_TAGS}

    def __init__(self, stream: str) -> None:
        CParser.__init__(self, stream)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError, IndexError):
            shown = repr(_short(node.value)) if isinstance(node.value, str) else "this value"
            raise ConstructorError(None, None, f"{shown} is not a valid {node.tag}", node.start_mark) from None

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        try:
            value: int = super().construct_yaml_int(node)
        except ValueError:
            raise ConstructorError(None, None, "integer too long", node.start_mark) from None
        if not -(2 ** (_INT_BITS - 1)) <= value < 2**_INT_BITS:
            raise ConstructorError(None, None, f"integer {value:.3e} does not fit in {_INT_BITS} bits", node.start_mark)
        return value


_Loader.yaml_constructors[None] = SafeConstructor.construct_undefined
_Loader.yaml_constructors["tag:yaml.org,2002:int"] = _Loader.construct_yaml_int


def _clamped(text: str, line: int, column: int) -> tuple[int, int]:
    """1-based line and column, the end of the text for libyaml's mark past a missing final newline."""
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    if line < lines:
        return line + 1, column + 1
    last = text.rstrip("\n").rsplit("\n", 1)[-1]
    return max(lines, 1), len(last) + 1


def _short(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def _check_events(text: str) -> None:
    """One pass over the parser's events that refuses, before any node is built, what the limits forbid.

    Counting here (libyaml's events are cheap) rather than while composing keeps a refused document cheap too:
    nodes and alias expansions are counted as they appear, an alias to a node still open is a cycle.
    """
    parser = CParser(text)
    try:
        depth = composed = expanded = 0
        sizes: dict[str, int] = {}  # expanded size of each finished anchored node
        open_nodes: list[tuple[str | None, int]] = []  # (anchor, expanded count before it)
        while parser.check_event():
            event: Any = parser.get_event()
            mark: Any = event.start_mark
            if isinstance(event, AliasEvent):
                anchor = event.anchor or ""
                if anchor not in sizes:
                    if any(name == anchor for name, _ in open_nodes):
                        problem = f"alias *{anchor} refers to a node that contains it"
                        raise ComposerError(None, None, problem, mark)
                    continue  # undefined: the composer says so
                expanded += sizes[anchor]
                if expanded - composed > max(MAX_YAML_ALIAS_NODES, composed):
                    problem = f"aliases expand the document beyond {MAX_YAML_ALIAS_NODES:,} extra nodes"
                    raise ComposerError(None, None, problem, mark)
            elif isinstance(event, ScalarEvent | CollectionStartEvent):
                composed += 1
                expanded += 1
                if composed > MAX_YAML_NODES:
                    problem = f"more than {MAX_YAML_NODES:,} values (the limit of one document)"
                    raise ComposerError(None, None, problem, mark)
                if isinstance(event, ScalarEvent):
                    if event.anchor is not None:
                        sizes[event.anchor] = 1
                    continue
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise ComposerError(None, None, f"nesting deeper than {MAX_YAML_DEPTH} levels", mark)
                open_nodes.append((event.anchor, expanded - 1))
            elif isinstance(event, CollectionEndEvent):
                depth -= 1
                name, before = open_nodes.pop()
                if name is not None:
                    sizes[name] = expanded - before
    finally:
        parser.dispose()


def parse_yaml(text: str, source: str) -> tuple[Any, yaml.Node | None]:
    """The data of one YAML document and its node tree (for line numbers), within the limits above.

    Raises:
        ScenarioError: Invalid YAML, a refused tag or a limit exceeded, naming `source`, the line and column.
    """
    loader: _Loader | None = None
    try:
        _check_events(text)
        loader = _Loader(text)
        tree = loader.get_single_node()
        data = loader.construct_document(tree) if tree is not None else None
    except ReaderError as exc:  # libyaml gives the byte offset of a character YAML does not allow
        before = text.encode("utf-8", "surrogatepass")[: exc.position].decode("utf-8", "replace")
        line, column = before.count("\n") + 1, len(before) - before.rfind("\n")
        raise ScenarioError(f"{source}:{line}: invalid YAML at column {column}: {exc.reason}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        if mark is None:
            raise ScenarioError(f"{source}: invalid YAML: {problem}") from None
        line, column = _clamped(text, mark.line, mark.column)
        raise ScenarioError(f"{source}:{line}: invalid YAML at column {column}: {problem}") from None
    except RecursionError:
        raise ScenarioError(f"{source}: invalid YAML: nested too deeply") from None
    except UnicodeEncodeError:  # a lone surrogate, as a command-line argument may carry
        raise ScenarioError(f"{source}: invalid YAML: the text is not valid Unicode") from None
    finally:
        if loader is not None:
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


def read_input_bytes(path: Path, what: str, *, limit: int | None = None) -> bytes:
    """A user file's bytes, read only if it is a regular file (never a FIFO, device or directory), at most `limit`.

    The one reader of every input file: scenarios, item banks and sources, load-test files, vectors, labels.
    `limit` defaults to `MAX_FILE_BYTES`.
    """
    limit = MAX_FILE_BYTES if limit is None else limit
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the open
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such {what}") from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
        os.close(fd)
        if info.st_size > limit and stat.S_ISREG(info.st_mode):
            raise ScenarioError(f"{path}: the {what} is over the {limit:,}-byte limit ({info.st_size:,} bytes)")
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise ScenarioError(f"{path}: the {what} is {kind}")
    with os.fdopen(fd, "rb") as handle:
        try:
            raw = handle.read(limit + 1)
        except OSError as exc:
            raise ScenarioError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    if len(raw) > limit:
        raise ScenarioError(f"{path}: the {what} is over the {limit:,}-byte limit")
    return raw


def read_input(path: Path, what: str) -> str:
    """A user file's UTF-8 text, through `read_input_bytes`."""
    raw = read_input_bytes(path, what)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError(f"{path}: the {what} is not UTF-8 text") from None


def load_yaml_file(path: str | Path, what: str) -> Any:
    """The data of a user's YAML file (`what` names it in messages), read and parsed within every limit here."""
    path = Path(path)
    return parse_yaml(read_input(path, what), str(path))[0]
