"""One implementation per concept, checked on the source: a second wire format, retry loop, HTTP server or rate
formatter fails here before it can drift from the first.

The checks read the syntax tree (docstrings are ignored), so prose may still name the things it explains.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# bench/ is left out on purpose: its transport ceiling times bare client stacks against each other.
SOURCES = ("engine", "agents", "judges", "personas", "tests/fakes")
WIRE = "engine/models/_wire.py"
RETRY = "engine/models/_retry.py"
SERVER_LAYER = "engine/tools/_http11.py"

# Literals only a module that builds or reads OpenAI responses needs.
_WIRE_LITERALS = frozenset({"choices", "chat.completion", "chat.completion.chunk", "[DONE]", "finish_reason"})
_SERVER_MODULES = frozenset({"http.server", "socketserver", "aiohttp.web", "wsgiref.simple_server"})


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def _docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _imports(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _names(tree: ast.Module) -> set[str]:
    """Every name and attribute a module refers to."""
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    used |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    return used | {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}


def _defines(tree: ast.Module, name: str) -> bool:
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name for node in ast.walk(tree)
    )


def test_the_openai_wire_format_is_written_once() -> None:
    """Response shapes, stream markers and the error table live in the wire module; its users import it."""
    offenders = []
    for name, tree in _modules():
        if name == WIRE:
            continue
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes) and id(node) not in docs:
                value = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
                if value in _WIRE_LITERALS:
                    offenders.append(f"{name}:{node.lineno} {value!r}")
    assert offenders == []
    users = (
        "engine/models/_lean.py",
        "engine/tools/loadtest/_transport.py",
        "engine/tools/_serve.py",
        "tests/fakes/openai_server.py",
    )
    modules = dict(_modules())
    assert [user for user in users if not any(i == "engine.models._wire" for i in _imports(modules[user]))] == []
    assert "provider_error" in _names(modules["engine/models/_openai.py"]), "the SDK's status errors use the table"
    quota = [name for name, tree in _modules() if name != WIRE and "_QUOTA_CODES" in _names(tree)]
    assert quota == []


def test_there_is_one_retry_loop() -> None:
    """Only engine.models._retry backs off; chat and embeddings call its loop, the load tester only its policy."""
    modules = dict(_modules())
    backing_off = sorted(name for name, tree in modules.items() if name != RETRY and "backoff_delay" in _names(tree))
    assert backing_off == []
    classifying = sorted(name for name, tree in modules.items() if name != RETRY and "classify" in _names(tree))
    assert classifying == ["engine/tools/loadtest/_generator.py"]  # it records each attempt as a row
    for caller in ("engine/models/_client.py", "engine/tools/_embed.py"):
        assert "retrying" in _names(modules[caller]), caller


def test_there_is_one_http_server_layer() -> None:
    """Every server simrun runs (serve, view, the test fake) is a `LoopbackListener`; nothing else listens."""
    servers, listening, foreign = [], [], []
    for name, tree in _modules():
        foreign += [f"{name}: {module}" for module in _imports(tree) & _SERVER_MODULES]
        if name != SERVER_LAYER and "create_tcp_listener" in _names(tree):
            listening.append(name)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(base, ast.Name) and base.id == "LoopbackListener" for base in node.bases
            ):
                servers.append(name)
    assert foreign == [] and listening == []
    assert sorted(servers) == ["engine/tools/_serve.py", "engine/tools/_view.py", "tests/fakes/openai_server.py"]


def test_a_rate_is_formatted_by_one_function() -> None:
    defining = sorted(name for name, tree in _modules() if _defines(tree, "format_rate"))
    assert defining == ["engine/core/_format.py"]
