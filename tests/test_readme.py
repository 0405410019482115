"""Every command in the README's shell blocks runs, so an example cannot break silently.

The fenced `bash`/`sh`/`shell`/`console` blocks are parsed into commands (comments dropped, `\\` lines
joined). RULES says how each form is run: as written when it is bounded, with `--dry-run` when it needs a
paid endpoint, on a few episodes when it is a full offline run, for a second against a loopback
`simrun serve` when it is a load test, or started, asked once and stopped when it serves. A command no rule
covers fails, and so does any shell composition (`|`, `&&`, `;`, redirection): a README line is one command.
The commands run in a scratch folder holding copies of scenarios/ and personas/, with HOME there too, so
nothing touches the checkout or the user's cache. Python blocks are executed (the library example) or
compiled (fragments). A failure names its README line.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pytest
from anyio.from_thread import start_blocking_portal

from engine.cli._main import main
from engine.tools._serve import LoopbackServer

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SHELLS = {"bash", "sh", "shell", "console"}
LIMIT = "6"
"""Episodes run by a full offline run's README command."""
LOAD_SECONDS = "0.5"
SHELL_SYNTAX = {"|", "||", "&&", ";", ">", ">>", "<", "2>", "&"}


@dataclass(frozen=True)
class Rule:
    pattern: str
    how: str
    why: str


RULES = (
    Rule(r"^make (run|test)\b", "skip", "the set-up itself: CI runs `make test` on a fresh clone"),
    Rule(r"^source \.venv/bin/activate$", "skip", "activates the venv this test runs in"),
    Rule(r"^export \w+=", "env", "sets a variable for the commands after it"),
    Rule(r"^simrun serve\b", "serve", "serves until stopped: started on a free port, asked once, stopped"),
    Rule(r"^simrun view\b", "serve", "serves until stopped: started on a free port, asked once, stopped"),
    Rule(r"^simrun loadtest\b", "load", f"for {LOAD_SECONDS} s (1 turn) against a loopback `simrun serve`"),
    Rule(r"^simrun (calibrate|embed)\b.*\bopenai/", "options", "needs a paid endpoint: its options are checked"),
    Rule(r"^simrun (run )?\S+\.ya?ml\b.*\bopenai/", "dry-run", "needs a paid endpoint: planned with --dry-run"),
    Rule(r"^simrun (run )?\S+\.ya?ml\b(?!.*--dry-run)", "limit", f"a full offline run: its first {LIMIT} episodes"),
    Rule(r"^simrun\b", "as-is", "bounded: runs as written"),
)


@dataclass(frozen=True)
class Command:
    line: int
    text: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    """Variables the README exported before this command."""

    @property
    def rule(self) -> Rule | None:
        return next((rule for rule in RULES if re.search(rule.pattern, self.text)), None)

    def __str__(self) -> str:
        return f"README.md:{self.line}: `{self.text}`"


def shell_commands(text: str) -> list[Command]:
    """The commands of the fenced shell blocks, each with the README line it starts on."""
    commands: list[Command] = []
    env: dict[str, str] = {}
    fence: str | None = None
    pending: tuple[int, str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fence = line[3:].strip() if fence is None else None
            continue
        if fence not in SHELLS:
            continue
        start, joined = pending if pending else (number, "")
        joined += line.rstrip().removesuffix("\\") + " "
        if line.rstrip().endswith("\\"):
            pending = (start, joined)
            continue
        pending = None
        argv = shlex.split(joined, comments=True)
        if not argv:
            continue
        command = Command(start, shlex.join(argv), tuple(argv), dict(env))
        commands.append(command)
        if command.rule is not None and command.rule.how == "env":
            name, _, _ = argv[1].partition("=")
            env[name] = "sk-readme-test-not-a-key"  # a placeholder value (`...`) stands for a secret
    return commands


def python_blocks(text: str) -> list[tuple[int, str]]:
    blocks: list[tuple[int, str]] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        if lines[index].strip() == "```python":
            end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
            blocks.append((index + 1, "\n".join(lines[index + 1 : end])))
            index = end
        index += 1
    return blocks


COMMANDS = shell_commands(README.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch working folder like a checkout's root, with two small runs for `latest` and `latest~1`."""
    root = tmp_path_factory.mktemp("readme")
    work = root / "work"
    work.mkdir()
    for name in ("scenarios", "personas"):
        shutil.copytree(ROOT / name, work / name, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    shared = ROOT.parent / "shared"
    if shared.is_dir():
        (root / "shared").symlink_to(shared)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(work)
        for _ in range(2):
            assert main(["scenarios/remath.yaml", "--limit", LIMIT, "-q"]) == 0
    return work


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """`simrun serve` for the load tests, on its own thread and event loop."""
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(LoopbackServer()) as server:
        yield server.base_url


def _replace_option(argv: list[str], option: str, value: str) -> list[str]:
    if option in argv:
        argv[argv.index(option) + 1] = value
        return argv
    return [*argv, option, value]


def _load_argv(argv: list[str], target: str) -> list[str]:
    argv = _replace_option(argv, "--target", target)
    argv = _replace_option(argv, "--duration", LOAD_SECONDS)
    argv = _replace_option(argv, "--grace", "0.3")  # conversations still talking then are cancelled
    if "--turns" not in argv:
        argv += ["--turns", "1"]
    return _replace_option(argv, "--warmup", "0")


def _serve(command: Command, workspace: Path) -> None:
    argv = _replace_option(list(command.argv[1:]), "--port", "0")
    with subprocess.Popen(
        [sys.executable, "-m", "engine", *argv],
        cwd=workspace,
        env={**os.environ, **command.env, "HOME": str(workspace)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as process:
        _ask_and_stop(command, process)


def _ask_and_stop(command: Command, process: subprocess.Popen[str]) -> None:
    assert process.stdout is not None
    try:
        first = process.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/\S*", first)
        assert found, f"{command} printed no address: {first}{process.stdout.read() if process.poll() else ''}"
        url = found.group(0)
        probe = url.rstrip("/") + "/models" if url.rstrip("/").endswith("/v1") else url
        assert httpx2.get(probe, timeout=10).status_code == 200, f"{command}: {probe} did not answer"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: f"L{c.line}:{c.text[:48]}")
def test_readme_command_runs(
    command: Command,
    workspace: Path,
    endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rule = command.rule
    assert not SHELL_SYNTAX & set(command.argv), f"{command}: one command per line, no shell pipes or chains"
    assert rule is not None, f"{command}: no rule in tests/test_readme.py says how to run this README command"
    if rule.how in ("skip", "env"):
        pytest.skip(f"{command}: {rule.why}")
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("HOME", str(workspace))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    for name, value in command.env.items():
        monkeypatch.setenv(name, value)
    if rule.how == "serve":
        _serve(command, workspace)
        return
    argv = list(command.argv[1:])
    if rule.how == "options":
        sub = argv[0]
        assert main([sub, "--help"]) == 0
        helped = capsys.readouterr().out
        unknown = [arg.split("=")[0] for arg in argv if arg.startswith("--") and arg.split("=")[0] not in helped]
        assert not unknown, f"{command}: `simrun {sub}` has no option {', '.join(unknown)}"
        return
    expected = {0}
    if rule.how == "dry-run":
        argv.append("--dry-run")
    elif rule.how == "limit":
        argv += ["--limit", LIMIT]
    elif rule.how == "load":
        argv = _load_argv(argv, endpoint)
        expected = {0, 3}  # 3: a gate failed, which a busy test machine's client may cause
    code = main(argv)
    output = capsys.readouterr()
    assert code in expected, f"{command} exited {code} ({rule.why}):\n{output.out[-2000:]}{output.err[-2000:]}"


def test_every_rule_is_used() -> None:
    """A rule no README command needs any more is dead weight."""
    used = {command.rule for command in COMMANDS}
    assert [rule.pattern for rule in RULES if rule not in used] == []


@pytest.mark.parametrize(("line", "code"), python_blocks(README.read_text(encoding="utf-8")), ids=lambda v: str(v)[:8])
def test_readme_python_blocks(
    line: int,
    code: str,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A block that imports `engine` and runs a scenario is executed; a fragment (with `...`) is compiled."""
    compiled = compile(code, f"README.md:{line}", "exec")
    if any(isinstance(node, ast.Constant) and node.value is Ellipsis for node in ast.walk(ast.parse(code))):
        return
    monkeypatch.chdir(workspace)
    exec(compiled, {"__name__": "__readme__"})
    printed = capfd.readouterr().out
    assert printed.strip(), f"README.md:{line}: the example printed nothing"
    assert "run.started" not in printed, f"README.md:{line}: the library wrote log lines to stdout"
