"""One implementation per concept, checked on the source: a second wire format, retry loop, HTTP server, rate
formatter, endpoint wiring or HTTP client construction fails here before it can drift from the first.

The checks read the syntax tree (docstrings are ignored), so prose may still name the things it explains.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# bench/ is left out on purpose: its transport ceiling times bare client stacks against each other.
SOURCES = ("engine", "agents", "judges", "personas", "tests/fakes")
WIRE = "engine/models/_wire.py"
RETRY = "engine/models/_retry.py"
SERVER_LAYER = "engine/tools/_http11.py"
ENDPOINTS = "engine/models/_endpoints.py"
# Who wires endpoints: each imports the one module that does it.
WIRING_USERS = {
    "runs": ("engine/runtime/_runner.py",),
    "simrun calibrate": ("engine/tools/calibrate/_run.py",),
    "simrun embed": ("engine/tools/_embed.py",),
    "the load tester": ("engine/tools/loadtest/_generator.py", "engine/tools/loadtest/_transport.py"),
}
# Each HTTP client is built by one class: the lean aiohttp session and the SDK client (over its httpx2 pool).
HTTP_CLIENTS = {
    ("aiohttp.ClientSession", "ClientSession"): "engine/models/_lean.py",
    ("openai.AsyncOpenAI", "AsyncOpenAI"): "engine/models/_openai.py",
    ("httpx2.AsyncClient", "AsyncClient"): "engine/models/_openai.py",
}

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


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def _calls(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, what is called) for every call by a dotted name; `PROVIDERS.get(x)()(spec)` is `PROVIDERS.get()()`."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func, suffix = node.func, ""
        while isinstance(func, ast.Call):
            func, suffix = func.func, suffix + "()"
        name = _dotted(func)
        if name is not None:
            yield node.lineno, name + suffix


def _constructs(tree: ast.Module, *names: str) -> list[int]:
    """Lines calling any of `names` (each way a module may import it: `aiohttp.ClientSession`, `ClientSession`)."""
    return [line for line, called in _calls(tree) if called in names]


def _chat_models(modules: dict[str, ast.Module]) -> dict[str, str]:
    """Every `ChatModel` subclass in the engine, with the module that defines it."""
    return {
        node.name: name
        for name, tree in modules.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id == "ChatModel" for b in node.bases)
    }


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
        "engine/tools/serve/_server.py",
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
    assert sorted(servers) == [
        "engine/tools/_view.py",
        "engine/tools/serve/_server.py",
        "tests/fakes/anthropic_server.py",
        "tests/fakes/openai_server.py",
        "tests/fakes/tutor_app.py",
    ]


def test_a_rate_is_formatted_by_one_function() -> None:
    defining = sorted(name for name, tree in _modules() if _defines(tree, "format_rate"))
    assert defining == ["engine/core/_format.py"]


def _serves_the_simulator(name: str) -> bool:
    """`simrun serve` hosts the sim behind HTTP: it answers requests with it and calls no endpoint."""
    return name.startswith("engine/tools/serve/")


def test_one_module_wires_endpoints() -> None:
    """Only engine.models._endpoints turns specs into providers, throttles and the run's response cache."""
    modules = dict(_modules())
    offenders = []
    for name, tree in modules.items():
        if name == ENDPOINTS:
            continue
        offenders += [f"{name}:{line} {called}" for line, called in _calls(tree) if called == "PROVIDERS.get()()"]
        offenders += [f"{name}:{line} Throttle" for line in _constructs(tree, "Throttle")]
        # The sync constructor is the cache file's upkeep (`simrun cache`); a cache for calls opens here.
        offenders += [f"{name}:{line} ResponseCache.open" for line in _constructs(tree, "ResponseCache.open")]
    for model, home in _chat_models(modules).items():
        for name, tree in modules.items():
            if name in (ENDPOINTS, home) or _serves_the_simulator(name):
                continue
            offenders += [f"{name}:{line} {model}" for line in _constructs(tree, model)]
    assert offenders == []
    missing = [
        f"{user}: {path}"
        for user, paths in WIRING_USERS.items()
        for path in paths
        if "engine.models._endpoints" not in _imports(modules[path])
    ]
    assert missing == []


def test_one_place_builds_each_http_client() -> None:
    """aiohttp sessions in the lean transport, SDK clients in `SdkSession`; the load tester asks `open_http`."""
    modules = dict(_modules())
    building = {
        client: sorted(name for name, tree in modules.items() if _constructs(tree, *client)) for client in HTTP_CLIENTS
    }
    assert building == {client: [home] for client, home in HTTP_CLIENTS.items()}
    assert "open_http" in _names(modules["engine/tools/loadtest/_transport.py"])
