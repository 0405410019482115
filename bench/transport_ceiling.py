"""The client-side ceiling of three ways to call an OpenAI-compatible chat endpoint from one Python process.

Why: issue 5 adds a lean transport for load-test mode (JSON over HTTP with orjson, no per-response model objects)
and asks to measure before choosing its library, httpx2 or aiohttp. A Python load generator is bounded by its
own CPU long before the network (../shared/reference/loadtest.md, "Client-side limits"), so this script times
the same work three ways, in this process, at equal concurrency and with the same 8-message chat histories:

1. the openai SDK (`AsyncOpenAI(...).chat.completions.create` over an httpx2 client, SDK retries off);
2. a bare httpx2 loop (`httpx2.AsyncClient`, orjson bodies in and out);
3. a bare aiohttp loop (`aiohttp.ClientSession` on a `TCPConnector(limit=C)`, orjson in and out).

The target is `python -m engine serve` at zero latency in a separate process (never on this event loop), so the
figures are the client's. Each transport is warmed up first; then it reports requests/s, client CPU per request
(`time.process_time`) and the share of a core it used, the server's CPU share, and latency p50/p99 per request.
At the end come the ratios httpx2/SDK, aiohttp/SDK and aiohttp/httpx2.

Reading the figures:

* This is a closed loop (C requests in flight), so latency is service time at saturation, not what an open-loop
  arrival would see; the ceiling is the requests/s column.
* A request is due the moment a slot frees (the first C at the start), and latency runs from then, not from
  when its task got round to sending: the client's own dispatch and scheduling delay stays inside the figure
  and is printed on its own ("start lag"), rather than hidden (coordinated omission). "In flight" is the mean
  number of requests actually between send and reply (time in `call` / wall time); well below C means the
  client could not keep C requests going, so the figures are not at concurrency C.
* A client that used clearly less than one core was not the bottleneck: the server (one Python process sharing
  the machine) or the loopback was, and that rate is a lower bound of the client's ceiling. The script says so.

Run: `python -m bench.transport_ceiling [--requests N] [--concurrency C] [--warmup W]`.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import os
import platform
import random
import re
import select
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiohttp
import anyio
import httpx2
import openai
import orjson
from openai.types.chat import ChatCompletionMessageParam

ROOT = Path(__file__).resolve().parents[1]
MODEL: Final = "sim-tutor"
HEADERS: Final = {"content-type": "application/json", "authorization": "Bearer x"}
REQUEST_TIMEOUT_S: Final = 30.0
PHASE_TIMEOUT_S: Final = 300.0  # a whole warm-up or measured phase; a hung transport fails instead of hanging
STARTUP_TIMEOUT_S: Final = 30.0
HISTORIES: Final = 256  # distinct conversations, reused round-robin
SATURATED: Final = 0.85  # share of one core above which the client is taken to be the bottleneck
_VOCABULARY: Final = (
    "fraction numerator denominator slope equation variable graph area triangle angle proof derivative limit "
    "ratio percent probability mean median integer prime factor because so therefore but why how what if then "
    "I think you said the answer is not sure can we check again step first next last please just tell me"
)

History = list[ChatCompletionMessageParam]
Call = Callable[[History], Awaitable[int]]  # one chat completion; returns its completion tokens


@dataclass
class Outcome:
    """One phase of closed-loop requests: per-request latency, start lag and time in `call` (s), tokens, errors."""

    latencies: list[float] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)
    busy_s: float = 0.0
    tokens: int = 0
    errors: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Result:
    name: str
    outcome: Outcome
    wall_s: float
    cpu_s: float
    server_cpu_s: float | None

    @property
    def ok(self) -> int:
        return len(self.outcome.latencies)

    @property
    def rate(self) -> float:
        return self.ok / self.wall_s

    @property
    def cpu_per_request_s(self) -> float:
        return self.cpu_s / max(1, self.ok + sum(self.outcome.errors.values()))

    @property
    def in_flight(self) -> float:
        return self.outcome.busy_s / self.wall_s

    @property
    def client_share(self) -> float:
        return self.cpu_s / self.wall_s


# -- workload --------------------------------------------------------------------------------------------------------


def _histories(count: int, seed: int = 0) -> list[History]:
    """`count` tutoring conversations of 8 messages: a system prompt, three exchanges and the next student turn."""
    rng = random.Random(seed)
    words = _VOCABULARY.split()

    def text(low: int, high: int) -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(low, high))).capitalize() + "."

    histories: list[History] = []
    for _ in range(count):
        history: History = [
            {"role": "system", "content": "You are a patient maths tutor. Guide the student; never give the answer."}
        ]
        for _ in range(3):
            history.append({"role": "user", "content": text(15, 40)})
            history.append({"role": "assistant", "content": text(30, 80)})
        history.append({"role": "user", "content": text(15, 40)})
        histories.append(history)
    return histories


def _completion_tokens(reply: Any) -> int:
    """The completion tokens of a decoded chat completion; ValueError unless it has text content and usage."""
    try:
        content = reply["choices"][0]["message"]["content"]
        tokens = reply["usage"]["completion_tokens"]
    except (KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"malformed chat completion ({type(exc).__name__})") from None
    if not isinstance(content, str) or not isinstance(tokens, int):
        raise ValueError("malformed chat completion (content or usage)")
    return tokens


# -- transports ------------------------------------------------------------------------------------------------------


def _limits(concurrency: int) -> httpx2.Limits:
    return httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)


@asynccontextmanager
async def _openai_sdk(base_url: str, concurrency: int) -> AsyncIterator[Call]:
    http = httpx2.AsyncClient(timeout=httpx2.Timeout(REQUEST_TIMEOUT_S), limits=_limits(concurrency))
    client = openai.AsyncOpenAI(
        base_url=base_url, api_key="x", max_retries=0, timeout=REQUEST_TIMEOUT_S, http_client=http
    )

    async def call(messages: History) -> int:
        completion = await client.chat.completions.create(model=MODEL, messages=messages)
        if not isinstance(completion.choices[0].message.content, str) or completion.usage is None:
            raise ValueError("malformed chat completion (content or usage)")
        return completion.usage.completion_tokens

    try:
        yield call
    finally:
        await client.close()
        await http.aclose()


@asynccontextmanager
async def _bare_httpx2(base_url: str, concurrency: int) -> AsyncIterator[Call]:
    url = f"{base_url}/chat/completions"
    async with httpx2.AsyncClient(
        headers=HEADERS, timeout=httpx2.Timeout(REQUEST_TIMEOUT_S), limits=_limits(concurrency)
    ) as http:

        async def call(messages: History) -> int:
            response = await http.post(url, content=orjson.dumps({"model": MODEL, "messages": messages}))
            if response.status_code != 200:
                raise RuntimeError(f"HTTP {response.status_code}")
            return _completion_tokens(orjson.loads(response.content))

        yield call


@asynccontextmanager
async def _bare_aiohttp(base_url: str, concurrency: int) -> AsyncIterator[Call]:
    url = f"{base_url}/chat/completions"
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession(connector=connector, headers=HEADERS, timeout=timeout) as session:

        async def call(messages: History) -> int:
            async with session.post(url, data=orjson.dumps({"model": MODEL, "messages": messages})) as response:
                body: bytes = await response.read()
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}")
            return _completion_tokens(orjson.loads(body))

        yield call


Transport = Callable[[str, int], AbstractAsyncContextManager[Call]]
TRANSPORTS: Final[dict[str, Transport]] = {"openai SDK": _openai_sdk, "httpx2": _bare_httpx2, "aiohttp": _bare_aiohttp}


# -- measurement -----------------------------------------------------------------------------------------------------


async def _drive(call: Call, histories: Sequence[History], count: int, concurrency: int) -> Outcome:
    """`count` requests, at most `concurrency` in flight: a task holds a limiter slot from its start to its end.

    Each request is due when the slot it takes was freed (the first `concurrency` at the start). The dispatcher
    starts every slot that is free each time it runs, so the hand-off cannot throttle concurrency (taking one
    slot per event-loop pass would leave a busy client with only a few requests in flight).
    """
    limiter = anyio.CapacityLimiter(concurrency)
    outcome = Outcome()
    freed: deque[float] = deque()  # when slots were released, oldest first: the due times of the next requests

    async def one(index: int, due: float, slot: object) -> None:
        began = time.perf_counter()
        try:
            # Awaited first: `outcome.tokens += await ...` would read the total before the await and lose updates.
            tokens = await call(histories[index % len(histories)])
        except Exception as exc:  # counted, so one bad reply does not cancel the phase
            name = type(exc).__name__
            outcome.errors[name] = outcome.errors.get(name, 0) + 1
        else:
            done = time.perf_counter()
            outcome.latencies.append(done - due)
            outcome.busy_s += done - began
            outcome.tokens += tokens
        finally:
            outcome.lags.append(began - due)
            limiter.release_on_behalf_of(slot)
            freed.append(time.perf_counter())

    started = time.perf_counter()
    with anyio.fail_after(PHASE_TIMEOUT_S):
        async with anyio.create_task_group() as group:
            index = 0
            while index < count:  # every pass starts at least one request
                slot = object()
                await limiter.acquire_on_behalf_of(slot)
                while True:
                    group.start_soon(one, index, freed.popleft() if freed else started, slot)
                    index += 1
                    slot = object()
                    if index >= count:
                        break
                    try:
                        limiter.acquire_on_behalf_of_nowait(slot)
                    except anyio.WouldBlock:
                        break
    return outcome


def _server_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process `pid` from /proc (Linux); None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


async def _measure(
    name: str,
    transport: Transport,
    base_url: str,
    server_pid: int,
    histories: Sequence[History],
    args: argparse.Namespace,
) -> Result:
    async with transport(base_url, args.concurrency) as call:
        await _drive(call, histories, args.warmup, args.concurrency)
        server_started = _server_cpu_s(server_pid)
        cpu_started = time.process_time()
        started = time.perf_counter()
        outcome = await _drive(call, histories, args.requests, args.concurrency)
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        server_ended = _server_cpu_s(server_pid)
    server_cpu = None if server_started is None or server_ended is None else server_ended - server_started
    return Result(name, outcome, wall, cpu, server_cpu)


# -- report ----------------------------------------------------------------------------------------------------------


def _percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def _report(results: Sequence[Result], args: argparse.Namespace) -> None:
    header = (
        f"{'transport':<11} {'req/s':>7} {'CPU ms/req':>10} {'client CPU':>10} {'server CPU':>10} "
        f"{'in flight':>9} {'p50 ms':>7} {'p99 ms':>7} {'start lag p99 ms':>16} {'errors':>6}"
    )
    print()
    print(f"{args.requests:,} requests per transport after {args.warmup} warm-up, concurrency {args.concurrency}")
    print(header)
    print("-" * len(header))
    for result in results:
        server = "n/a" if result.server_cpu_s is None else f"{result.server_cpu_s / result.wall_s:.0%}"
        print(
            f"{result.name:<11} {result.rate:>7,.0f} {result.cpu_per_request_s * 1e3:>10.2f} "
            f"{result.client_share:>10.0%} {server:>10} {result.in_flight:>9.1f} "
            f"{_percentile(result.outcome.latencies, 0.5) * 1e3:>7.1f} "
            f"{_percentile(result.outcome.latencies, 0.99) * 1e3:>7.1f} "
            f"{_percentile(result.outcome.lags, 0.99) * 1e3:>16.2f} "
            f"{sum(result.outcome.errors.values()):>6}"
        )
    print("(CPU shares are of one core; latency runs from when the request's slot freed, start lag included)")

    by_name = {result.name: result for result in results}
    print()
    for top, bottom in (("httpx2", "openai SDK"), ("aiohttp", "openai SDK"), ("aiohttp", "httpx2")):
        if top in by_name and bottom in by_name:
            a, b = by_name[top], by_name[bottom]
            print(
                f"{top} / {bottom}:{'':<{22 - len(top) - len(bottom)}} {a.rate / b.rate:5.2f}x requests/s, "
                f"{b.cpu_per_request_s / a.cpu_per_request_s:5.2f}x less client CPU per request"
            )

    print()
    for result in results:
        if result.outcome.errors:
            errors = ", ".join(f"{n} {k}" for k, n in sorted(result.outcome.errors.items()))
            print(f"{result.name}: ERRORS ({errors}); its figures are not a clean ceiling")
        server_share = None if result.server_cpu_s is None else result.server_cpu_s / result.wall_s
        if result.client_share < SATURATED:
            print(
                f"{result.name}: the client used {result.client_share:.0%} of a core, so it was not the bottleneck "
                f"(the server or the loopback was): its ceiling is at least {result.rate:,.0f} requests/s"
            )
        elif server_share is not None and server_share >= SATURATED:
            print(
                f"{result.name}: the server was saturated too ({server_share:.0%} of a core), so "
                f"{result.rate:,.0f} requests/s may understate this client's ceiling"
            )
    tokens = {result.outcome.tokens for result in results if not result.outcome.errors}
    if len(tokens) > 1:
        print(f"completion tokens differ between transports ({sorted(tokens)}): the work was not the same")


# -- main ------------------------------------------------------------------------------------------------------------


async def _run(base_url: str, server_pid: int, names: Sequence[str], args: argparse.Namespace) -> list[Result]:
    histories = _histories(HISTORIES)
    results: list[Result] = []
    for name in names:
        print(f"measuring {name} …", flush=True)
        results.append(await _measure(name, TRANSPORTS[name], base_url, server_pid, histories, args))
    return results


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _base_url(server: subprocess.Popen[bytes]) -> str:
    """The server's base URL from its first stdout line, printed once it listens (loopback only)."""
    assert server.stdout is not None
    ready, _, _ = select.select([server.stdout], [], [], STARTUP_TIMEOUT_S)
    line = server.stdout.readline().decode(errors="replace") if ready else ""
    found = re.search(r"http://127\.0\.0\.1:\d+/v1", line)
    if found is None:
        raise SystemExit(f"simrun serve did not start on 127.0.0.1 within {STARTUP_TIMEOUT_S:.0f} s: {line!r}")
    return found.group(0)


@contextmanager
def serve_in_subprocess(options: Sequence[str] = ()) -> Iterator[tuple[str, int]]:
    """`simrun serve` (zero latency unless `options` say otherwise) in its own process, never on the measuring
    loop: (base URL, pid)."""
    server = subprocess.Popen(
        [sys.executable, "-m", "engine", "serve", "--host", "127.0.0.1", "--port", str(_free_port()), *options],
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        base_url = _base_url(server)
        print(f"server: simrun serve at {base_url} {' '.join(options) or 'zero latency'}, in process {server.pid}")
        yield base_url, server.pid
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000, help="measured requests per transport (3000)")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight (64)")
    parser.add_argument("--warmup", type=int, default=100, help="unmeasured requests per transport first (100)")
    args = parser.parse_args()
    if args.requests < 1 or args.concurrency < 1 or args.warmup < 0:
        parser.error("--requests and --concurrency must be at least 1, --warmup at least 0")

    names = list(TRANSPORTS)
    print(
        f"machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}; "
        f"openai {_version('openai')}, httpx2 {_version('httpx2')}, aiohttp {_version('aiohttp')}, "
        f"orjson {_version('orjson')}, anyio {_version('anyio')}"
    )

    with serve_in_subprocess() as (base_url, pid):
        results = anyio.run(_run, base_url, pid, names, args, backend="asyncio")
    _report(results, args)


if __name__ == "__main__":
    main()
