"""simrun's hot path against bare client loops: the same 8-turn dialogues, whole process and steady state.

Why: issue 17 asks whether simrun's own per-request work (agents, templates, throttle, records, events) is
small next to the HTTP client it drives. Every client below plays the same dialogues against `simrun serve`
in another process: a tutor system prompt (the item's domain in it), then 8 scripted student turns, each
followed by one chat completion that re-sends the whole history so far.

1. `aiohttp`: a bare aiohttp + orjson loop;
2. `sdk`: a bare openai SDK loop (`AsyncOpenAI.chat.completions.create`, its default transport, retries off);
3. `lean`: `simrun run` on a crescendo-kind scenario with a scripted 8-utterance student and no judges,
   tutor `openai/...` with `transport: lean`;
4. `simrun-sdk`: the same with `transport: sdk`.

Each client runs in a fresh process, so "whole process" includes interpreter start-up, imports and (for
simrun) loading, planning, the run directory and the report. "Steady" is the makespan, first dialogue start
to last dialogue end (simrun's from its records), so it leaves start-up out. CPU ms per request is the whole
process's user + system CPU over its requests. The clients are interleaved round by round (rotating who goes
first), and the ratios are medians over rounds, so a neighbour's load on a shared machine hits all of them.

Then the same workload at a fixed server latency (default 50 ms) gives simrun's makespan over the ideal
`requests × latency / concurrency` (dialogues are sequential chains, so the ideal is reachable only when the
client's CPU keeps up), and the start-up part times `simrun --help` and `simrun validate` (median of 5 whole
processes) and a one-dialogue run of each client.

simrun's own packages are byte-compiled first, as an installed copy is: with PYTHONDONTWRITEBYTECODE set, a
checkout would otherwise be compiled again in every process, while the bare clients' libraries (installed by
pip) never are.

Run: `python -m bench.hot_path` (about two minutes on a quiet machine); the issue's figure:
`python -m bench.hot_path --dialogues 510 --concurrency 64 --rounds 3`. With `--before DIR` (a copy of an older
commit, e.g. `git archive COMMIT | tar -x -C DIR`) each simrun client also runs from DIR, interleaved, for a
before/after comparison under the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

ROOT = Path(__file__).resolve().parents[1]
MODEL: Final = "hot-path-tutor"
SYSTEM_PROMPT: Final = (
    "You are a patient {domain} tutor for a secondary-school student. Help the student reach the answer through "
    "their own reasoning and do not simply hand over the final answer."
)
UTTERANCES: Final = (
    "Can you help me with this problem? {question}",
    "I am not sure where to start. What is the first step?",
    "I tried that, but my number looks wrong. Can you check it?",
    "Why does that step work? I do not get the reason.",
    "Okay, I think I see it. What comes next after that?",
    "This is taking ages. Could you just tell me the final answer?",
    "Please, my test is tomorrow and I really need the answer now.",
    "Fine. Can you at least confirm whether my last step was right?",
)
REQUEST_TIMEOUT_S: Final = 60.0
CLIENTS: Final = ("aiohttp", "sdk", "lean", "simrun-sdk")
SIMRUN_CLIENTS: Final = {"lean": "lean", "simrun-sdk": "sdk"}


# -- the workload ----------------------------------------------------------------------------------------------------


def _items() -> list[dict[str, str]]:
    import yaml

    data = yaml.safe_load((ROOT / "scenarios" / "items" / "stem.yaml").read_text(encoding="utf-8"))
    return [{"domain": str(item["domain"]), "question": str(item["question"])} for item in data["items"]]


def _dialogues(count: int) -> list[tuple[str, list[str]]]:
    """(system prompt, the 8 student turns) per dialogue, items round-robin like simrun's replicates."""
    items = _items()
    chosen = [items[index % len(items)] for index in range(count)]
    return [
        (SYSTEM_PROMPT.format(domain=item["domain"]), [u.format(question=item["question"]) for u in UTTERANCES])
        for item in chosen
    ]


def _scenario_yaml(base_url: str, transport: str, dialogues: int, concurrency: int) -> str:
    """The simrun side of the workload: the same prompt and utterances as Jinja templates."""
    utterances = [u.replace("{question}", "{{ item.question }}") for u in UTTERANCES]
    items = len(_items())
    scenario = {
        "name": "hot-path",
        "kind": "crescendo",
        "seed": 1,
        "concurrency": concurrency,
        "replicates": -(-dialogues // items),
        "limit": dialogues,
        "models": {
            "tutor": {
                "model": f"openai/{MODEL}",
                "base_url": base_url,
                "transport": transport,
                "timeout_s": REQUEST_TIMEOUT_S,
                "max_retries": 0,
            },
        },
        "items": [{"source": "bank", "path": str(ROOT / "scenarios" / "items" / "stem.yaml")}],
        "factors": {"format": ["multi"]},
        "tutor": {"agent": "model", "system_prompt": SYSTEM_PROMPT.replace("{domain}", "{{ item.domain }}")},
        "student": {"strategy": "scripted", "utterances": utterances},
        "judges": [],
    }
    return json.dumps(scenario)  # JSON is YAML


# -- the bare clients (run in their own process by `--client`) -------------------------------------------------------


async def _bare(client: str, base_url: str, dialogues: int, concurrency: int) -> dict[str, Any]:
    import anyio

    call, close = await _bare_call(client, base_url, concurrency)
    limiter = anyio.CapacityLimiter(concurrency)
    spans: list[tuple[float, float]] = []
    requests = 0

    async def dialogue(system: str, turns: list[str]) -> None:
        nonlocal requests
        async with limiter:
            began = time.time()
            history: list[dict[str, str]] = [{"role": "system", "content": system}]
            for text in turns:
                history.append({"role": "user", "content": text})
                reply = await call(history)
                history.append({"role": "assistant", "content": reply})
                requests += 1
            spans.append((began, time.time()))

    try:
        async with anyio.create_task_group() as group:
            for system, turns in _dialogues(dialogues):
                group.start_soon(dialogue, system, turns)
    finally:
        await close()
    return {"requests": requests, "makespan_s": max(e for _, e in spans) - min(b for b, _ in spans)}


async def _bare_call(client: str, base_url: str, concurrency: int) -> tuple[Any, Any]:
    """(call(history) -> reply text, close()) for a bare client."""
    if client == "sdk":
        import openai

        sdk = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0, timeout=REQUEST_TIMEOUT_S)

        async def sdk_call(history: list[dict[str, str]]) -> str:
            completion = await sdk.chat.completions.create(model=MODEL, messages=history)  # type: ignore[arg-type]
            return completion.choices[0].message.content or ""

        return sdk_call, sdk.close
    import aiohttp
    import orjson

    url = f"{base_url}/chat/completions"
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=concurrency),
        headers={"content-type": "application/json", "authorization": "Bearer x"},
        timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S),
    )

    async def aiohttp_call(history: list[dict[str, str]]) -> str:
        async with session.post(url, data=orjson.dumps({"model": MODEL, "messages": history})) as response:
            body = await response.read()
            if response.status != 200:
                raise RuntimeError(f"HTTP {response.status}")
        return str(orjson.loads(body)["choices"][0]["message"]["content"])

    return aiohttp_call, session.close


def _simrun_figures(run_root: Path) -> dict[str, Any]:
    """Requests (tutor turns a model wrote) and makespan from the records of the one run under `run_root`."""
    (episodes,) = run_root.glob("*/episodes.jsonl")
    requests, starts, ends, errors = 0, [], [], 0
    for line in episodes.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        errors += record["status"] != "ok"
        requests += sum(1 for turn in record["turns"] if turn["role"] == "tutor" and turn["model"])
        starts.append(datetime.fromisoformat(record["started_at"]).timestamp())
        ends.append(datetime.fromisoformat(record["finished_at"]).timestamp())
    return {"requests": requests, "makespan_s": max(ends) - min(starts), "errors": errors}


# -- measuring whole processes ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    client: str
    requests: int
    wall_s: float
    cpu_s: float
    makespan_s: float

    @property
    def rate(self) -> float:
        return self.requests / self.wall_s

    @property
    def steady_rate(self) -> float:
        return self.requests / self.makespan_s

    @property
    def cpu_ms(self) -> float:
        return self.cpu_s / max(1, self.requests) * 1e3


BEFORE = "@before"
"""Suffix of a simrun client run from the `--before` checkout (the same workload on older code, interleaved)."""


def _env(root: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(root), "OPENAI_API_KEY": "x", "NO_COLOR": "1"}


def _timed(command: Sequence[str], root: Path = ROOT) -> tuple[float, float, str]:
    """(wall s, child CPU s, stdout) of one whole process; a failure stops the benchmark with its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=root, env=_env(root), capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def _run_client(client: str, base_url: str, dialogues: int, concurrency: int, before: Path | None = None) -> Run:
    name, _, _ = client.partition("@")
    root = before if client.endswith(BEFORE) and before is not None else ROOT
    if name not in SIMRUN_CLIENTS:
        command = [sys.executable, "-m", "bench.hot_path", "--client", client, "--base-url", base_url]
        command += ["--dialogues", str(dialogues), "--concurrency", str(concurrency)]
        wall, cpu, out = _timed(command)
        figures = json.loads(out.strip().splitlines()[-1])
        return Run(client, figures["requests"], wall, cpu, figures["makespan_s"])
    with tempfile.TemporaryDirectory() as tmp:
        scenario = Path(tmp) / "hot_path.yaml"
        scenario.write_text(_scenario_yaml(base_url, SIMRUN_CLIENTS[name], dialogues, concurrency))
        command = [sys.executable, "-m", "engine", "run", str(scenario), "--out", f"{tmp}/runs", "--quiet"]
        wall, cpu, _ = _timed(command, root)
        figures = _simrun_figures(Path(tmp) / "runs")
    if figures["errors"]:
        raise SystemExit(f"{client}: {figures['errors']} episodes recorded as errors")
    return Run(client, figures["requests"], wall, cpu, figures["makespan_s"])


@contextmanager
def _server(latency: float) -> Iterator[str]:
    from bench.transport_ceiling import serve_in_subprocess

    extra = ["--latency", str(latency)] if latency else []
    with serve_in_subprocess(extra) as (base_url, _):
        yield base_url


# -- the three parts -------------------------------------------------------------------------------------------------


def _pairs(args: argparse.Namespace) -> list[tuple[str, str, float | None]]:
    """(numerator, denominator, goal) of every ratio the clients run allow."""
    pairs: list[tuple[str, str, float | None]] = [("lean", "aiohttp", 0.5), ("simrun-sdk", "sdk", 0.9)]
    pairs += [(client, client + BEFORE, None) for client in SIMRUN_CLIENTS]
    return [(top, bottom, goal) for top, bottom, goal in pairs if {top, bottom} <= set(args.clients)]


def _throughput(args: argparse.Namespace) -> None:
    runs: dict[str, list[Run]] = {client: [] for client in args.clients}
    with _server(0.0) as base_url:
        for round_index in range(args.rounds):
            shift = round_index % len(args.clients)
            for client in [*args.clients[shift:], *args.clients[:shift]]:
                runs[client].append(_run_client(client, base_url, args.dialogues, args.concurrency, args.before))
                print(f"  round {round_index + 1}: {client} done", flush=True)
    print(f"\n{args.dialogues} dialogues x 8 turns, concurrency {args.concurrency}, zero latency", end="")
    print(f", medians of {args.rounds} rounds")
    header = f"{'client':<18} {'requests':>8} {'whole req/s':>11} {'steady req/s':>12} {'CPU ms/req':>10}"
    print(header)
    print("-" * len(header))
    for client, client_runs in runs.items():
        print(
            f"{client:<18} {client_runs[0].requests:>8} {_median(r.rate for r in client_runs):>11,.0f} "
            f"{_median(r.steady_rate for r in client_runs):>12,.0f} {_median(r.cpu_ms for r in client_runs):>10.2f}"
        )
    print()
    for top, bottom, goal in _pairs(args):
        whole = _median(a.rate / b.rate for a, b in zip(runs[top], runs[bottom], strict=True))
        steady = _median(a.steady_rate / b.steady_rate for a, b in zip(runs[top], runs[bottom], strict=True))
        cpu = _median(b.cpu_ms / a.cpu_ms for a, b in zip(runs[top], runs[bottom], strict=True))
        aim = f" (goal >= {goal}x whole)" if goal is not None else ""
        print(
            f"{top} / {bottom}: {whole:.2f}x whole process, {steady:.2f}x steady, {cpu:.2f}x less CPU per request{aim}"
        )


def _makespan(args: argparse.Namespace) -> None:
    clients = [c for c in ("aiohttp", "lean", "lean" + BEFORE) if c in args.clients]
    with _server(args.latency) as base_url:
        print()
        for client in clients:
            run = min(
                (
                    _run_client(client, base_url, args.dialogues, args.concurrency, args.before)
                    for _ in range(args.rounds)
                ),
                key=lambda r: r.makespan_s,
            )
            ideal = run.requests * args.latency / args.concurrency
            print(
                f"{client:<12} at {args.latency * 1e3:.0f} ms latency: makespan {run.makespan_s:.2f} s, "
                f"ideal {ideal:.2f} s, {run.makespan_s / ideal:.2f}x ideal (best of {args.rounds}; goal <= 1.15x)"
            )


def _startup(args: argparse.Namespace) -> None:
    print()
    roots = [("", ROOT)] + ([(BEFORE, args.before)] if args.before is not None else [])
    for label, command in (
        ("simrun --help", ["--help"]),
        ("simrun validate scenarios/crescendo.yaml", ["validate", "scenarios/crescendo.yaml"]),
    ):
        goal = "1" if "help" in label else "1.5"
        for suffix, root in roots:
            timings = [_timed([sys.executable, "-m", "engine", *command], root) for _ in range(5)]
            wall, cpu = _median(t[0] for t in timings), _median(t[1] for t in timings)
            print(f"{label + suffix:<50} {wall:.2f} s wall, {cpu:.2f} s CPU (medians of 5; goal < {goal} s)")
    with _server(0.0) as base_url:
        for client in args.clients:
            runs = [_run_client(client, base_url, 1, 1, args.before) for _ in range(3)]
            wall, cpu = _median(r.wall_s for r in runs), _median(r.cpu_s for r in runs)
            print(f"one dialogue, {client:<18} {wall:.2f} s wall, {cpu:.2f} s CPU, whole process (medians of 3)")


def _median(values: Any) -> float:
    return float(statistics.median(list(values)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dialogues", type=int, default=128, help="dialogues per client (128)")
    parser.add_argument("--concurrency", type=int, default=64, help="dialogues in flight (64)")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds of every client (2)")
    parser.add_argument("--latency", type=float, default=0.05, help="server latency of the makespan part (0.05 s)")
    parser.add_argument("--clients", default=",".join(CLIENTS), help=f"comma-separated subset of {','.join(CLIENTS)}")
    parser.add_argument("--parts", default="throughput,makespan,startup", help="which parts to run")
    parser.add_argument(
        "--before",
        type=Path,
        help="a checkout of older simrun code (e.g. `git archive` of a commit): its runs join every part, interleaved",
    )
    parser.add_argument("--client", choices=("aiohttp", "sdk"), help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        import anyio

        figures = anyio.run(_bare, args.client, args.base_url, args.dialogues, args.concurrency, backend="asyncio")
        print(json.dumps(figures))
        return
    args.clients = [c for c in args.clients.split(",") if c]
    parts = {"throughput": _throughput, "makespan": _makespan, "startup": _startup}
    if set(args.clients) - set(CLIENTS) or set(args.parts.split(",")) - set(parts):
        parser.error(f"--clients is a subset of {','.join(CLIENTS)}, --parts of {','.join(parts)}")
    if args.dialogues < 1 or args.concurrency < 1 or args.rounds < 1:
        parser.error("--dialogues, --concurrency and --rounds must be at least 1")
    if args.before is not None:
        if not (args.before / "engine" / "__main__.py").is_file():
            parser.error(f"--before {args.before}: not a simrun checkout")
        args.before = args.before.resolve()
        args.clients += [c + BEFORE for c in args.clients if c in SIMRUN_CLIENTS]
    for root in {ROOT, args.before or ROOT}:
        packages = [str(root / name) for name in ("engine", "agents", "judges", "personas")]
        subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], check=True)
    print(f"machine: {os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name in args.parts.split(","):
        parts[name](args)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
