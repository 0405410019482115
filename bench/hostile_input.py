"""A grammar fuzz of hostile input, by class: how many inputs were tried, how many exited 2 (or were accepted),
how many escaped as a traceback, hung or took over 5 s, and the slowest case and peak memory.

Classes: control characters and tags in a scenario, YAML structure (aliases, nesting, huge scalars, unknown
keys, long lists), `--set` values, templates, and damaged run directories (FIFOs, links out of the directory,
`/dev/zero`, folders, loops, wrong manifest fields, a swapped scenario) under `report`, `compare`, `--resume`,
`runs` and `view`. Every case runs in this process through `engine.cli._main.main`, with an alarm that turns a
hang into a count; a sentinel file outside the directories under test must stay unchanged.
Run: `python bench/hostile_input.py [cases-per-class [class]]` (tests/engine/cli/test_fuzz_hostile.py runs a few
of each).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import random
import resource
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import yaml

ROOT = Path(__file__).resolve().parents[1]
HANG_S = 30.0
SLOW_S = 5.0
_CONTROL = [chr(c) for c in (*range(0, 9), 11, 12, *range(14, 32), 127)] + ["\ufffe", "\ud800"]
_TAGS = ["timestamp", "float", "bool", "int", "binary", "set", "omap", "pairs", "str", "null", "map", "seq"]
_TAG_VALUES = ["abc", "2024-13-45", "1e999", "", "0x", "yes", "[1, 2]", "{a: 1}", "~", "-1", "12:30:00", "=="]
_RUN_FILES = ["manifest.json", "plan.json", "episodes.jsonl", "events.jsonl", "summary.json", "report.md"]
_RUN_FILES += ["report.html", ".lock"]


@dataclass
class Case:
    """One hostile input: the command line to run and, for a run directory, the folder it damages."""

    args: list[str]
    label: str
    call: Callable[[], int] | None = None
    """Run instead of the command line (`view`, which otherwise serves until Ctrl-C)."""


@dataclass
class Tally:
    tried: int = 0
    exit_2: int = 0
    accepted: int = 0
    traceback: int = 0
    hang: int = 0
    slow: int = 0
    slowest_s: float = 0.0
    peak_mb: float = 0.0
    """The process's peak memory after this class (it only grows: a class that raises it is the one to blame)."""
    outside_changed: int = 0
    failures: list[str] = field(default_factory=list)


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    def stop(*_: object) -> None:
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_case(case: Case, tally: Tally) -> tuple[int | None, str]:
    """Run one case in this process; count it; return the exit code (None: it escaped or hung) and stderr."""
    from engine.cli._main import main

    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    code: int | None = None
    try:
        with _alarm(HANG_S), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = case.call() if case.call is not None else main(case.args)
    except TimeoutError:
        tally.hang += 1
        tally.failures.append(f"hang: {case.label}")
    except BaseException as exc:  # what the fuzz hunts for
        tally.traceback += 1
        tally.failures.append(f"traceback {type(exc).__name__}: {case.label}")
    seconds = time.perf_counter() - started
    if seconds > SLOW_S:
        tally.failures.append(f"{seconds:.1f} s: {case.label}")
    tally.tried += 1
    tally.slowest_s = max(tally.slowest_s, seconds)
    tally.slow += seconds > SLOW_S
    if code is not None:
        if "Traceback" in err.getvalue() + out.getvalue():
            tally.traceback += 1
            tally.failures.append(f"printed traceback: {case.label}")
        elif code == 2 and "error:" in err.getvalue():
            tally.exit_2 += 1
        elif code == 0:
            tally.accepted += 1
        else:
            tally.failures.append(f"exit {code}: {case.label}: {err.getvalue()[:200]}")
    return code, err.getvalue()


class Workspace:
    """A scenario (the shipped crescendo one, on the simulator) and a finished small run to damage."""

    def __init__(self, root: Path) -> None:
        self.root = root
        shutil.copytree(ROOT / "scenarios" / "items", root / "items")
        self.base = (ROOT / "scenarios" / "crescendo.yaml").read_text(encoding="utf-8")
        self.sentinel = root / "sentinel.txt"
        self.sentinel.write_text("outside every directory under test\n", encoding="utf-8")
        self.good_run = root / "runs" / "good"
        self._make_good_run()

    def _make_good_run(self) -> None:
        import engine

        scenario = self.write("good.yaml", self.base)
        result = engine.run_sync(engine.load_scenario(scenario, overrides=["limit=2"]), out=self.root / "made")
        shutil.copytree(result.run_dir, self.good_run)

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        return path

    def sentinel_hash(self) -> str:
        return hashlib.sha256(self.sentinel.read_bytes()).hexdigest()


def _insert(rng: random.Random, text: str, fragment: str) -> str:
    at = rng.randrange(len(text) + 1)
    return text[:at] + fragment + text[at:]


def yaml_control(rng: random.Random, ws: Workspace) -> Case:
    text = ws.base
    for _ in range(rng.randint(1, 3)):
        text = _insert(rng, text, rng.choice(_CONTROL))
    return Case(["validate", str(ws.write("control.yaml", text))], "control character")


def yaml_tags(rng: random.Random, ws: Workspace) -> Case:
    tag = rng.choice([*_TAGS, "python/object/apply:os.system", "!mine", "!"])
    tag = tag if tag.startswith("!") else f"!!{tag}"
    line = f"unused_{rng.randrange(99)}: {tag} {rng.choice(_TAG_VALUES)}\n"
    return Case(["validate", str(ws.write("tags.yaml", ws.base + line))], f"tag {line.strip()!r}")


def yaml_structure(rng: random.Random, ws: Workspace) -> Case:
    kind = rng.choice(["bomb", "self-alias", "deep", "long-int", "unknown-keys", "long-list", "long-string"])
    if kind == "bomb":
        fan, depth = rng.randint(2, 12), rng.randint(3, 9)
        extra = "b0: &a0 [x]\n" + "".join(f"b{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fan)}]\n" for i in range(1, depth))
    elif kind == "self-alias":
        extra = rng.choice(["u: &me [1, *me]\n", "u: &me {a: *me}\n", "u: &me [[[*me]]]\n"])
    elif kind == "deep":
        depth = rng.randint(50, 3000)
        extra = "u: " + rng.choice(["[" * depth + "]" * depth, "{a: " * depth + "1" + "}" * depth]) + "\n"
    elif kind == "long-int":
        extra = f"u: {'9' * rng.randint(15, 6000)}\n"
    elif kind == "unknown-keys":
        extra = "".join(f"unknown{i}: {i}\n" for i in range(rng.randint(1, 20_000)))
    elif kind == "long-list":
        extra = "u: [" + ", ".join(["1"] * rng.randint(1000, 3_000_000)) + "]\n"
    else:
        extra = f"description: {'x' * rng.randint(1000, 8_000_000)}\n"
    return Case(["validate", str(ws.write("structure.yaml", ws.base + extra))], kind)


def _random_text(rng: random.Random, size: int) -> str:
    alphabet = "ab{}[]:,&*!|>'\"%-#\n\t \\" + "".join(_CONTROL[:4])
    return "".join(rng.choice(alphabet) for _ in range(size))


def set_values(rng: random.Random, ws: Workspace) -> Case:
    path = rng.choice(["seed", "limit", "models.tutor", "models.tutor.params", "items.0.path", "judge_votes", "x.y"])
    value = rng.choice([_random_text(rng, rng.randint(0, 40)), f"!!{rng.choice(_TAGS)} {rng.choice(_TAG_VALUES)}"])
    scenario = ws.write("set.yaml", ws.base)
    return Case(["validate", str(scenario), "--set", f"{path}={value}"], f"--set {path}={value!r}")


_STRINGS = ["a", "a ", "ab\\n", "{0}", "%s"]
_NUMBERS = ["0", "1", "7", "99", "9999", "99999", "999999", "10**6", "10**9", "10**12"]
_FILTERS = [
    "wordwrap({n})", "indent({s})", "join({s})", "center({n})", "truncate({n})", "replace('a', {s})",
    "sum(start=[])", "list", "sort", "unique", "slice({n})", "batch({n}, 'x')", "groupby('0')", "string",
    "tojson", "pprint", "map('string')", "map('list')", "format({s})", "reverse", "first", "length", "int",
]  # fmt: skip


def _expression(rng: random.Random, depth: int = 0) -> str:
    choice = rng.randrange(8 if depth < 3 else 3)
    n = rng.choice(_NUMBERS)
    if choice == 0:
        return f"'{rng.choice(_STRINGS)}' * {n}"
    if choice == 1:
        return f"range({n})"
    if choice == 2:
        return n
    inner = _expression(rng, depth + 1)
    if choice == 3:
        flt = rng.choice(_FILTERS).format(n=rng.choice(_NUMBERS), s=f"({_expression(rng, depth + 1)})")
        return f"({inner})|{flt}"
    if choice == 4:
        return f"({inner}) {rng.choice(['*', '**', '+', '~', '%'])} ({_expression(rng, depth + 1)})"
    if choice == 5:
        return "[" + ", ".join([f"({inner})"] * rng.randint(1, 12)) + "]"
    if choice == 6:
        return f"lipsum({n})"
    return f"'{{0.__class__}}'.format_map({inner})"


def template(rng: random.Random) -> str:
    """A template built from the operations that can hang or allocate: loops that grow, filters, products."""
    if rng.random() < 0.3:
        grow = rng.choice(["ns.x * ns.x", "[ns.x, ns.x]", "ns.x ~ ns.x", "ns.x + ns.x", "(ns.x|string) * 2"])
        start = rng.choice(["3", "[1]", "'ab'"])
        steps = rng.choice(["40", "99", "999", "99999"])
        return (
            f"{{% set ns = namespace(x={start}) %}}{{% for i in range({steps}) %}}"
            f"{{% set ns.x = {grow} %}}{{% endfor %}}{{{{ ns.x }}}}"
        )
    return f"{{{{ {_expression(rng)} }}}}"


def templates(rng: random.Random, ws: Workspace) -> Case:
    source = template(rng)
    scenario = ws.write("template.yaml", ws.base)
    value = yaml.safe_dump(source, default_style="'").strip()
    return Case(["run", "--dry-run", str(scenario), "--set", f"tutor.system_prompt={value}"], source)


def _damage(rng: random.Random, run: Path, ws: Workspace) -> str:
    name = rng.choice(_RUN_FILES)
    how = rng.choice(["fifo", "dev-zero", "directory", "loop", "link-out", "garbage", "truncate", "field", "swap"])
    target = run / name
    if how in ("fifo", "dev-zero", "directory", "loop", "link-out"):
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        if how == "fifo":
            os.mkfifo(target)
        elif how == "directory":
            target.mkdir()
        else:
            links: dict[str, Path] = {"dev-zero": Path("/dev/zero"), "loop": target, "link-out": ws.sentinel}
            target.symlink_to(links[how])
    elif how in ("garbage", "truncate") and (target.is_symlink() or not target.is_file()):
        return f"{how} {name} (skipped: not a file)"  # the fuzz itself must not write through its own link
    elif how == "garbage":
        data = bytearray(target.read_bytes())
        for _ in range(rng.randint(1, 8)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        target.write_bytes(bytes(data))
    elif how == "truncate":
        target.write_bytes(target.read_bytes()[: rng.randrange(max(target.stat().st_size, 1))])
    elif how in ("field", "swap"):
        if (run / "manifest.json").is_symlink() or not (run / "manifest.json").is_file():
            return f"{how} manifest.json (skipped: not a file)"  # reading a FIFO here would hang the fuzz itself
        try:
            manifest = orjson.loads((run / "manifest.json").read_bytes())
            manifest["scenario"]["seed"] = manifest["scenario"]["seed"]
        except (OSError, ValueError, TypeError, KeyError):
            return f"{how} manifest.json (skipped: already damaged)"
        if how == "swap":
            manifest["scenario"]["seed"] = rng.randrange(10**6)
        else:
            key = rng.choice(["counts", "calls", "scenario", "scenario_hash", "plan_hash", "seed", "kind", "status"])
            manifest[key] = rng.choice([None, 1, "x", [1, 2], {"a": {"b": []}}, -1, True])
        (run / "manifest.json").write_bytes(orjson.dumps(manifest))
    return f"{how} {name}"


def run_dirs(rng: random.Random, ws: Workspace) -> Case:
    parent = ws.root / "damaged"
    shutil.rmtree(parent, ignore_errors=True)
    run = parent / "run"
    shutil.copytree(ws.good_run, run, symlinks=True)
    what = ", ".join(_damage(rng, run, ws) for _ in range(rng.randint(1, 3)))
    command = rng.choice(["report", "compare", "resume", "runs", "view"])
    args = {
        "report": ["report", str(run)],
        "compare": ["compare", str(run), str(ws.good_run), "--out", str(parent / "cmp")],
        "resume": [str(ws.write("good.yaml", ws.base)), "--resume", str(run), "--limit", "2"],
        "runs": ["runs", str(parent)],
        "view": ["view", str(run)],
    }[command]
    return Case(args, f"{command} after {what}", call=(lambda: _view(run)) if command == "view" else None)


def _view(run: Path) -> int:
    """`simrun view` answering a few requests: 0 when each gets a status, 2 (and a message) when refused."""
    import httpx2

    from engine.core._errors import ScenarioError
    from engine.tools._view import serve_report

    try:
        with serve_report(run) as server:
            for path in ("", "episodes/1.html", "episodes/2.html", f"episodes/{'9' * 4300}.html"):
                status = httpx2.get(f"{server.url}{path}", timeout=HANG_S).status_code
                if status not in (200, 404, 500):
                    raise RuntimeError(f"status {status}")
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


CLASSES: dict[str, Callable[[random.Random, Workspace], Case]] = {
    "scenario: control characters": yaml_control,
    "scenario: tags": yaml_tags,
    "scenario: structure and size": yaml_structure,
    "--set values": set_values,
    "templates": templates,
    "run directories": run_dirs,
}


_ISSUE_TEMPLATES = {
    "wordwrap(1) on a long string": "{{ ('a' * 900000)|wordwrap(1) }}",
    "lipsum(999999)": "{{ lipsum(999999) }}",
    "repeated integer squaring": (
        "{% set ns = namespace(x=3) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}{% endfor %}{{ 1 }}"
    ),
    "sum(start=[]) over large lists": "{{ (range(99999)|map('string')|map('list')|list)|sum(start=[]) }}",
    "printing a 10^10-element list": "{% set a = range(99999)|list %}{% set b = [a] * 99999 %}{{ b }}",
    "join building gigabytes": "{{ range(99999)|join('x' * 999999) }}",
    "indent building gigabytes": "{{ ('a\\n' * 499999)|indent('x' * 999999) }}",
    "slice on a large range": "{{ range(99999)|slice(999999)|list }}",
    "sort on a large range": "{{ (range(99999)|list * 10)|sort }}",
    "format_map IndexError": "{{ '{0.__class__}'.format_map({}) }}",
}


def issue_cases(ws: Workspace) -> dict[str, Case]:
    """The inputs the issue reported, one each: every one must exit 2 in a few seconds."""
    cases = {}
    for label, text in (("form feed", "\x0c"), ("NUL", "\x00"), ("BEL", "\x07")):
        cases[f"{label} in a scenario"] = Case(["validate", str(ws.write("c.yaml", ws.base + text))], label)
    for tag in ("!!timestamp soon", "!!float abc", "!!bool maybe"):
        cases[f"{tag} in a scenario"] = Case(["validate", str(ws.write("t.yaml", ws.base + f"u: {tag}\n"))], tag)
    keys = "".join(f"unknown{i}: {i}\n" for i in range(20_000))
    cases["20,000 unknown keys"] = Case(["validate", str(ws.write("k.yaml", ws.base + keys))], "keys")
    numbers = "u: [" + ", ".join(["1"] * 2_800_000) + "]\n"
    cases["8 MiB list of small numbers"] = Case(["validate", str(ws.write("n.yaml", ws.base + numbers))], "list")
    scenario = str(ws.write("s.yaml", ws.base))
    for label, source in _ISSUE_TEMPLATES.items():
        value = yaml.safe_dump(source, default_style="'").strip()
        args = ["run", "--dry-run", scenario, "--set", f"tutor.system_prompt={value}"]
        cases[f"template: {label}"] = Case(args, source)
    return cases


def main() -> None:
    per_class = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    chosen = sys.argv[2] if len(sys.argv) > 2 else ""  # only the classes whose name contains it
    rng = random.Random(20261202)
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace(Path(tmp))
        before = ws.sentinel_hash()
        print(f"{'class':<30} {'tried':>6} {'exit 2':>7} {'exit 0':>7} {'traceback':>9} {'hang':>5} ", end="")
        print(f"{'>5 s':>5} {'max s':>6} {'peak MB':>7} {'outside':>7}")
        for name, make in CLASSES.items():
            if chosen not in name:
                continue
            tally = Tally()
            for _ in range(per_class):
                case = make(rng, ws)
                run_case(case, tally)
                if ws.sentinel_hash() != before:
                    tally.outside_changed += 1
                    tally.failures.append(f"changed a file outside: {case.label}")
                    ws.sentinel.write_text("outside every directory under test\n", encoding="utf-8")
            tally.peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(
                f"{name:<30} {tally.tried:>6} {tally.exit_2:>7} {tally.accepted:>7} {tally.traceback:>9} "
                f"{tally.hang:>5} {tally.slow:>5} {tally.slowest_s:>6.2f} {tally.peak_mb:>7.0f} "
                f"{tally.outside_changed:>7}",
                flush=True,
            )
            for failure in tally.failures[:5]:
                print(f"    {failure[:300]}")
        print(f"\n{'the issue`s inputs':<45} {'exit':>4} {'wall s':>7} {'cpu s':>6}")
        for label, case in issue_cases(ws).items():
            cpu = time.process_time()
            started = time.perf_counter()
            code, _ = run_case(case, Tally())
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            print(f"{label:<45} {code if code is not None else '-':>4} {wall:>7.2f} {cpu:>6.2f}", flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory of the whole fuzz (this process, every case): {peak:.0f} MB")


if __name__ == "__main__":
    main()
