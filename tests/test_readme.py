"""Every command in the README's and the docs/ pages' shell blocks runs, so an example cannot break silently.

The fenced `bash`/`sh`/`shell`/`console` blocks of README.md and of every docs/*.md page are parsed into
commands (comments dropped, `\\` lines joined). RULES says how each form is run: as written when it is
bounded, with `--dry-run` when it needs a paid endpoint, on a few episodes when it is a full offline run,
for a second against a loopback `simrun serve` when it is a load test, or started, asked once and stopped
when it serves. A command no rule covers fails, and so does any shell composition (`|`, `&&`, `;`,
redirection): a line is one command. The commands run in a scratch folder holding copies of scenarios/ and
personas/, with HOME there too, so nothing touches the checkout or the user's cache. Python blocks that run
a scenario are executed (the library example); the others are compiled and their imports executed, so a
renamed module fails. A failure names its page and line. The pages' links and the repository paths and
engine names they cite must resolve, every docs page is linked from the README, and the README stays short.
"""

from __future__ import annotations

import ast
import configparser
import importlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pytest
import yaml
from anyio.from_thread import start_blocking_portal

from engine.cli._main import main
from engine.tools.serve._server import LoopbackServer

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SEED_DATA = ROOT.parent / "shared" / "data"
DOCS = ROOT / "docs"
PAGES = (README, *sorted(DOCS.glob("*.md")))
"""Every page whose shell blocks run: the README and each docs/ page."""
README_MAX_LINES = 300
SHELLS = {"bash", "sh", "shell", "console"}
LIMIT = "6"
"""Episodes run by a full offline run's command."""
LOAD_SECONDS = "0.5"
SHELL_SYNTAX = {"|", "||", "&&", ";", ">", ">>", "<", "2>", "&"}


@dataclass(frozen=True)
class Rule:
    pattern: str
    how: str
    why: str


RULES = (
    Rule(r"^make (run|test)\b", "skip", "the set-up itself: CI runs `make test` on a fresh clone"),
    Rule(r"^make real\b", "skip", "installs a real model (~180 MB) and runs it: tests/real does, opt-in"),
    Rule(r"^SIMRUN_REAL_MODEL=1 ", "skip", "the opt-in real-model tests themselves (tests/real)"),
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
    page: str
    line: int
    text: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    """Variables the page exported before this command."""

    @property
    def rule(self) -> Rule | None:
        return next((rule for rule in RULES if re.search(rule.pattern, self.text)), None)

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: `{self.text}`"


def page_name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def shell_commands(text: str, page: str = "README.md") -> list[Command]:
    """The commands of the fenced shell blocks, each with the page line it starts on."""
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
        command = Command(page, start, shlex.join(argv), tuple(argv), dict(env))
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


COMMANDS = [command for path in PAGES for command in shell_commands(path.read_text(encoding="utf-8"), page_name(path))]
FIRST: dict[str, Command] = {}
for _command in COMMANDS:
    FIRST.setdefault(_command.text, _command)
"""Where each distinct command first appears. A server or load test another page repeats (the README and its
docs page) runs once: it reads no run directory, so the second run would prove nothing new."""
PYTHON_BLOCKS = [
    (page_name(path), line, code) for path in PAGES for line, code in python_blocks(path.read_text(encoding="utf-8"))
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch working folder like a checkout's root, with two small runs for `latest` and `latest~1`."""
    root = tmp_path_factory.mktemp("readme")
    work = root / "work"
    work.mkdir()
    for name in ("scenarios", "personas"):
        shutil.copytree(ROOT / name, work / name, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
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


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: f"{c.page}:L{c.line}:{c.text[:40]}")
def test_readme_command_runs(
    command: Command,
    workspace: Path,
    endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rule = command.rule
    assert not SHELL_SYNTAX & set(command.argv), f"{command}: one command per line, no shell pipes or chains"
    assert rule is not None, f"{command}: no rule in tests/test_readme.py says how to run this command"
    if rule.how in ("skip", "env"):
        pytest.skip(f"{command}: {rule.why}")
    first = FIRST[command.text]
    if first is not command and rule.how in ("serve", "load"):
        pytest.skip(f"{command}: the same command runs for {first.page}:{first.line}")
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("HOME", str(workspace))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    for name, value in command.env.items():
        monkeypatch.setenv(name, value)
    if rule.how == "serve":
        _serve(command, workspace)
        return
    argv = list(command.argv[1:])
    if "--data-dir" in argv:  # a public dataset the user downloads: here the seed data, where it is beside the clone
        if not SEED_DATA.is_dir():
            pytest.skip(f"{command}: reads a public dataset, and ../shared/data is absent")
        argv = _replace_option(argv, "--data-dir", str(SEED_DATA))
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
    """A rule no page's command needs any more is dead weight."""
    used = {command.rule for command in COMMANDS}
    assert [rule.pattern for rule in RULES if rule not in used] == []


def _runs_a_scenario(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "engine"
        and node.attr in ("run", "run_sync", "open_run")
        for node in ast.walk(tree)
    )


@pytest.mark.parametrize(("page", "line", "code"), PYTHON_BLOCKS, ids=lambda v: str(v)[:16])
def test_python_blocks(
    page: str,
    line: int,
    code: str,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A whole example that runs a scenario (`engine.run_sync`, `open_run`, `run`) is executed. Any other block,
    a fragment with `...` or one that needs more than the sim (a cluster, a paid key), is compiled and its
    imports are run, so a block naming a module or name that no longer exists fails."""
    compiled = compile(code, f"{page}:{line}", "exec")
    tree = ast.parse(code)
    fragment = any(isinstance(node, ast.Constant) and node.value is Ellipsis for node in ast.walk(tree))
    if fragment or not _runs_a_scenario(tree):
        imports: list[ast.stmt] = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
        exec(compile(ast.Module(body=imports, type_ignores=[]), f"{page}:{line}", "exec"), {})
        return
    monkeypatch.chdir(workspace)
    exec(compiled, {"__name__": "__readme__"})
    printed = capfd.readouterr().out
    assert printed.strip(), f"{page}:{line}: the example printed nothing"
    assert "run.started" not in printed, f"{page}:{line}: the library wrote log lines to stdout"


def test_readme_is_short() -> None:
    """The README says what simrun is and where to read on; the rest lives in docs/."""
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move material to a docs/ page"


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
REPO_PATH = re.compile(r"`((?:engine|agents|judges|personas|tests|bench|scenarios|docs)/[\w./-]*[\w/])`")


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    fence = False
    found: set[str] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        fence ^= line.startswith("```")
        if not fence and line.startswith("#"):
            heading = line.lstrip("#").strip().lower().replace("`", "")
            found.add(re.sub(r"[^\w\- ]", "", heading).replace(" ", "-"))
    return found


def links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize("path", PAGES, ids=page_name)
def test_links_resolve(path: Path) -> None:
    """Every relative link of a page names a file that exists, and an anchor a heading of that file."""
    broken = []
    for target in links(path):
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        if not resolved.exists() or (anchor and resolved.suffix == ".md" and anchor not in anchors(resolved)):
            broken.append(target)
    assert broken == [], f"{page_name(path)}: broken links {broken}"


@pytest.mark.parametrize("path", PAGES, ids=page_name)
def test_cited_paths_exist(path: Path) -> None:
    """A file or folder a page names in backticks (`engine/run/_runner.py`, `tests/test_toy_kind.py`) exists."""
    text = path.read_text(encoding="utf-8")
    missing = sorted({p for p in REPO_PATH.findall(text) if "<" not in p and not (ROOT / p).exists()})
    assert missing == [], f"{page_name(path)} cites paths that do not exist: {missing}"


DOTTED = re.compile(r"`(engine(?:\.\w+)+)[`(]")


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


@pytest.mark.parametrize("path", PAGES, ids=page_name)
def test_cited_engine_names_exist(path: Path) -> None:
    """A dotted engine name a page cites (`engine.stats.clustered_rate`) can be imported as written."""
    missing = sorted({name for name in DOTTED.findall(path.read_text(encoding="utf-8")) if not _resolves(name)})
    assert missing == [], f"{page_name(path)} cites engine names that do not exist: {missing}"


def test_readme_links_every_docs_page_and_each_links_back() -> None:
    """No docs/ page is an orphan: the README links each one, and each one links back to the README."""
    linked = {(README.parent / target.partition("#")[0]).resolve() for target in links(README)}
    assert [page_name(p) for p in PAGES[1:] if p.resolve() not in linked] == []
    for page in PAGES[1:]:
        assert any(t.partition("#")[0] == "../README.md" for t in links(page)), f"{page_name(page)}: no link back"


def _fenced(path: Path, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", path.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE)


def test_the_new_kind_example_is_the_toy_kind_test() -> None:
    """docs/extending.md shows the plug-in and the scenario `tests/test_toy_kind.py` installs and runs, unchanged."""
    from tests.test_toy_kind import TOY_PLUGIN

    page = DOCS / "extending.md"
    shown = [ast.dump(ast.parse(block)) for block in _fenced(page, "python")]
    assert ast.dump(ast.parse(TOY_PLUGIN)) in shown, "docs/extending.md no longer shows the toy kind's module"
    source = ast.parse((ROOT / "tests" / "test_toy_kind.py").read_text(encoding="utf-8"))
    (scenario,) = [
        ast.literal_eval(node.value)
        for node in ast.walk(source)
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["scenario"]
    ]
    assert scenario in [yaml.safe_load(block) for block in _fenced(page, "yaml")]


def test_the_new_kind_declares_the_entry_points_the_toy_kind_test_installs() -> None:
    from tests.test_toy_kind import TOY_ENTRY_POINTS

    installed = configparser.ConfigParser(delimiters=("=",))
    installed.read_string(TOY_ENTRY_POINTS)
    (project,) = [tomllib.loads(block) for block in _fenced(DOCS / "extending.md", "toml")]
    declared = project["project"]["entry-points"]
    assert declared == {group: dict(installed[group]) for group in installed.sections()}


SAMPLE_COLUMNS = "110"
RUN_NAME = re.compile(r"crescendo-\d{8}-\d{6}-\d{6}")


def _sample() -> list[str]:
    """The README's first block of plain output: a fence that opens with no language."""
    inside: str | None = None
    block: list[str] = []
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            if inside == "":
                return block
            inside = line[3:].strip() if inside is None else None
        elif inside == "":
            block.append(line)
    raise AssertionError("README.md shows no sample output")


def test_the_readme_sample_is_what_the_run_prints(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every line the README shows of `simrun scenarios/crescendo.yaml` is printed by the run, in that order
    (a `│ …` row stands for rows left out; run directory names differ by their start time)."""
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("COLUMNS", SAMPLE_COLUMNS)
    assert main(["scenarios/crescendo.yaml", "-q"]) == 0
    printed = [RUN_NAME.sub("crescendo-<time>", line.rstrip()) for line in capsys.readouterr().out.splitlines()]
    shown = [RUN_NAME.sub("crescendo-<time>", line.rstrip()) for line in _sample() if not line.startswith("│ …")]
    position = 0
    for line in shown:
        assert line in printed[position:], f"README.md shows a line the run does not print:\n{line}\n\nprinted:\n" + (
            "\n".join(printed)
        )
        position = printed.index(line, position) + 1
