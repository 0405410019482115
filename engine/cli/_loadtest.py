"""`simrun loadtest [CONFIG.yaml] [--flags]`: flags override the file; the result is printed and written.

Exit codes: 0 finished and valid · 2 user error · 3 finished but a validity gate failed (the client may have set
the numbers) · 130 interrupted (what was measured so far is written).
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import anyio
import click
from pydantic import ValidationError
from rich.console import Console
from rich.text import Text

from engine.cli._verbosity import verbosity
from engine.core._dirfiles import exists_in
from engine.core._errors import ScenarioError
from engine.core._format import fit_to_width, format_setting
from engine.core._inputs import load_yaml_file
from engine.tools.loadtest._config import LoadConfig
from engine.tools.loadtest._progress import ConsoleProgress
from engine.tools.loadtest._report import render_console
from engine.tools.loadtest._run import LoadResult, run_load

__all__ = ("loadtest_command",)

EXIT_INVALID = 3
EXIT_INTERRUPTED = 130

# flag name → config key (None: same name); each is applied only when given
_FLAGS = {
    "target": None, "model": None, "api_key_env": None, "transport": None, "stream": None, "max_tokens": None,
    "arrival": None, "rate": None, "concurrency": None, "max_in_flight": None, "turns": None,
    "think_time_s": None, "duration_s": None, "max_requests": None, "warmup_s": None, "grace_s": None,
    "timeout_s": None, "retries": None, "workers": None, "seed": None, "items": None, "name": None,
    "executor": None, "ray_address": None,
}  # fmt: skip
_SLO_FLAGS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
_OUTPUTS = ("summary.json", "requests.csv", "report.md", "report.html")


def _read_yaml(path: Path) -> dict[str, Any]:
    data = load_yaml_file(path, "load test file") or {}
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: a load test is a mapping of settings")
    if data.get("kind", "load") != "load":
        raise ScenarioError(f"{path} is a {data['kind']!r} scenario, not a load test: run it with `simrun {path}`")
    if data.get("items") is not None:
        if not isinstance(data["items"], str):
            raise ScenarioError(f"{path}: `items` of a load test is the path of one simrun YAML item bank")
        data["items"] = str((path.parent / data["items"]).resolve())
    return data


def build_config(path: Path | None, flags: dict[str, Any]) -> LoadConfig:
    data = _read_yaml(path) if path is not None else {}
    data.pop("kind", None)
    for flag, key in _FLAGS.items():
        if flags.get(flag) is not None:
            data[key or flag] = flags[flag]
    slo = {name: flags[f"slo_{name}"] for name in _SLO_FLAGS if flags.get(f"slo_{name}") is not None}
    if slo:
        data["slo"] = {**data.get("slo", {}), **slo}
    if flags.get("sweep"):
        data["sweep"] = {**data.get("sweep", {}), "rates": flags["sweep"]}
    try:
        return LoadConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise ScenarioError(f"invalid load test{f' {path}' if path else ''}: {problems}") from None


def _rates(_ctx: click.Context, _param: click.Parameter, value: str | None) -> list[float] | None:
    if value is None:
        return None
    try:
        return [float(part) for part in value.split(",")]
    except ValueError:
        raise click.BadParameter("a comma-separated list of rates, e.g. 1,2,4,8") from None


@click.command(name="loadtest")
@click.argument("config", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--target", help="Base URL of the OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1.")
@click.option("--model", help="Model name as the server knows it.")
@click.option("--api-key-env", help="Environment variable holding the API key.")
@click.option("--transport", type=click.Choice(["lean", "sdk"]), help="HTTP path (lean: aiohttp; default).")
@click.option("--stream/--no-stream", default=None, help="Stream responses (needed for TTFT/ITL/TPOT).")
@click.option("--max-tokens", type=click.IntRange(min=1), help="max_tokens of every request.")
@click.option("--arrival", type=click.Choice(["constant", "poisson", "concurrency"]), help="Arrival process.")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), help="Conversations started per second.")
@click.option("--concurrency", type=click.IntRange(min=1), help="Conversations at once (closed loop).")
@click.option("--max-in-flight", type=click.IntRange(min=1), help="Client cap on requests in flight.")
@click.option("--turns", type=click.IntRange(min=1), help="Requests per conversation.")
@click.option("--think-time", "think_time_s", type=click.FloatRange(min=0), help="Mean think time in s.")
@click.option("--duration", "duration_s", type=click.FloatRange(min=0, min_open=True), help="Schedule for s.")
@click.option("--max-requests", type=click.IntRange(min=1), help="Stop scheduling after N requests.")
@click.option("--warmup", "warmup_s", type=click.FloatRange(min=0), help="Leave the first s out of the statistics.")
@click.option("--grace", "grace_s", type=click.FloatRange(min=0), help="Hard stop this long after the last schedule.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), help="Per-request timeout in s.")
@click.option("--retries", type=click.IntRange(min=0), help="Retries of 429/5xx/timeouts (counted; default 0).")
@click.option("--slo-ttft-ms", type=float, help="SLO on time to first token.")
@click.option("--slo-itl-ms", type=float, help="SLO on inter-token latency.")
@click.option("--slo-tpot-ms", type=float, help="SLO on time per output token.")
@click.option("--slo-e2e-ms", type=float, help="SLO on end-to-end latency.")
@click.option("--sweep", callback=_rates, help="Step through these rates until the SLOs break, e.g. 1,2,4,8.")
@click.option("--workers", type=click.IntRange(min=1, max=64), help="Client processes.")
@click.option("--executor", type=click.Choice(["local", "ray"]), help="Workers as local processes or Ray actors.")
@click.option("--ray-address", metavar="auto|ray://HOST:PORT", help="Ray cluster to join (default: start one here).")
@click.option("--seed", type=int, help="Seed of arrivals, think times and the simulated students.")
@click.option("--items", type=click.Path(path_type=Path, dir_okay=False), help="Item bank the students ask about.")
@click.option("--name", help="Name of the run folder.")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=Path("runs"), show_default=True)
def loadtest_command(config: Path | None, out: Path, **flags: Any) -> int:
    """Drive simulated students' conversations against an OpenAI-compatible endpoint and measure it."""
    settings = build_config(config, flags)
    if settings.executor == "ray":
        from engine.runtime._ray import require_ray

        require_ray()  # exit 2 saying how to install, before any run folder exists
    console = Console()
    console.print(Text(f"load test {settings.name}: {_shape(settings)} → {settings.target} ({settings.model}), "
                       f"transport {settings.transport}, {settings.workers} worker(s)"))  # fmt: skip
    result = anyio.run(_run_until_interrupted, settings, out, console)
    if result is None:
        console.print("abandoned: the run folder holds what was written")
        return EXIT_INTERRUPTED
    console.print(fit_to_width(render_console(result.summary), console.width))
    written = [name for name in _OUTPUTS if exists_in(result.run_dir.path, name)]
    console.print(f"wrote {result.run_dir.path}: {', '.join(written) or 'no report (nothing was measured)'}")
    if result.summary["status"] == "interrupted":
        return EXIT_INTERRUPTED
    return 0 if result.valid else EXIT_INVALID


def _shape(settings: LoadConfig) -> str:
    if not settings.open_loop:
        return f"closed loop, {settings.concurrency} conversations at once"
    load = (
        f"sweep {', '.join(format_setting(rate) for rate in settings.sweep.rates)}"
        if settings.sweep
        else format_setting(settings.rate)
    )
    until = f" for {format_setting(settings.duration_s)} s" if settings.duration_s is not None else ""
    return f"{settings.arrival}, {load} conversations/s{until}"


async def _run_until_interrupted(settings: LoadConfig, out: Path, console: Console) -> LoadResult | None:
    """The first Ctrl-C ends the run and keeps what it measured; a second one abandons it (None)."""
    stop = anyio.Event()
    result: LoadResult | None = None
    error: ScenarioError | None = None
    async with anyio.create_task_group() as group:

        async def on_interrupt() -> None:
            with anyio.open_signal_receiver(signal.SIGINT) as signals:
                async for _ in signals:
                    if stop.is_set():
                        group.cancel_scope.cancel()
                        return
                    console.print("stopping: requests in flight are cancelled, the results so far are written")
                    stop.set()

        group.start_soon(on_interrupt)
        try:
            progress = None if verbosity.quiet else ConsoleProgress(console)
            result = await run_load(settings, out=out, stop=stop, progress=progress)
        except ScenarioError as exc:  # raised from here, not from inside the group, so it is not wrapped
            error = exc
        group.cancel_scope.cancel()
    if error is not None:
        raise error
    return result
