"""`simrun serve`: run the loopback OpenAI-compatible server (engine.tools.serve._server) until Ctrl-C."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import click
from pydantic import ValidationError

from engine.core._errors import ScenarioError
from engine.core._inputs import parse_yaml
from engine.tools._http11 import HEADER_TIMEOUT_S, IDLE_TIMEOUT_S
from engine.tools.serve._server import LoopbackServer, ServeOptions

__all__ = ("serve_command",)


def _sim_params(values: Sequence[str]) -> dict[str, dict[str, Any]]:
    """`--sim judge.invalid_rate=0.2` → `{"judge": {"invalid_rate": 0.2}}` (values parsed as YAML)."""
    params: dict[str, dict[str, Any]] = {}
    for value in values:
        key, sep, raw = value.partition("=")
        role, dot, knob = key.partition(".")
        if not sep or not dot or not knob:
            raise click.BadParameter(
                f"{value!r}: expected ROLE.KNOB=VALUE, e.g. judge.invalid_rate=0.2", param_hint="--sim"
            )
        try:
            parsed, _ = parse_yaml(raw, f"--sim {value!r}")
        except ScenarioError as exc:
            raise click.BadParameter(str(exc), param_hint="--sim") from None
        params.setdefault(role, {})[knob] = parsed
    return params


def _options(knobs: Mapping[str, Any], sim: Sequence[str]) -> ServeOptions:
    data = {name: value for name, value in knobs.items() if value is not None}
    if sim:
        data["sim"] = _sim_params(sim)
    try:
        return ServeOptions.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            ": ".join(filter(None, (".".join(map(str, e["loc"])), e["msg"].removeprefix("Value error, "))))
            for e in exc.errors()
        )
        raise click.UsageError(f"invalid serve options: {problems}") from exc


def _probability(name: str, help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A `--NAME P` option for a fault probability in [0, 1]."""
    return click.option(name, type=click.FloatRange(0, 1), help=help_text)


@click.command(name="serve", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="Port (0: any free).")
@click.option("--latency", "latency_s", type=click.FloatRange(min=0), help="Fixed seconds before every answer.")
@click.option("--jitter", "jitter_s", type=click.FloatRange(min=0), help="Extra seconds, uniform in [0, JITTER].")
@click.option("--ttft", "ttft_s", type=click.FloatRange(min=0), help="Streaming: seconds to the first chunk.")
@click.option("--tokens-per-s", "tokens_per_s", type=click.FloatRange(min=0, min_open=True), help="Streaming pace.")
@click.option("--chunk-words", type=click.IntRange(min=1), help="Streaming: words per chunk (default 3).")
@click.option("--rpm", type=click.IntRange(min=1), help="Requests per window, then 429 with Retry-After.")
@click.option("--tpm", type=click.IntRange(min=1), help="Tokens per window, then 429 with Retry-After.")
@click.option("--window", "window_s", type=click.FloatRange(min=0, min_open=True), help="Rate window in s (60).")
@_probability("--error-429", "Chance of an injected 429 rate_limit_exceeded.")
@_probability("--error-500", "Chance of a 500.")
@_probability("--error-503", "Chance of a 503.")
@_probability("--quota-rate", "Chance of a 429 insufficient_quota.")
@_probability("--drop-rate", "Chance of closing the connection mid-response.")
@_probability("--malformed-rate", "Chance of a 200 with truncated JSON.")
@_probability("--slow-drip-rate", "Chance of a slow-drip response.")
@click.option("--slow-drip", "slow_drip_s", type=click.FloatRange(min=0), help="Gap of a slow drip in s (1).")
@click.option("--stall-at", "stall_at_s", type=click.FloatRange(min=0), help="Stall this many s after start.")
@click.option("--stall", "stall_s", type=click.FloatRange(min=0), help="Length of the stall in s (0).")
@click.option("--retry-after", "retry_after_s", type=click.FloatRange(min=0), help="Retry-After of injected 429/503.")
@click.option("--seed", type=int, help="Seed of the fault, jitter and drip draws (0).")
@click.option("--sim", "sim", multiple=True, metavar="ROLE.KNOB=VALUE", help="A sim knob, e.g. judge.error_rate=0.1.")
@click.option(
    "--header-timeout",
    "header_timeout_s",
    type=click.FloatRange(min=0, min_open=True),
    default=HEADER_TIMEOUT_S,
    show_default=True,
    help="Seconds for a request to arrive after its first byte (then 408).",
)
@click.option(
    "--idle-timeout",
    "idle_timeout_s",
    type=click.FloatRange(min=0, min_open=True),
    default=IDLE_TIMEOUT_S,
    show_default=True,
    help="Seconds a connection may stay silent between requests (then closed).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    help="Open connections at once; more get a 503 (default: half the file-descriptor limit, at most 8192).",
)
def serve_command(
    host: str,
    port: int,
    sim: tuple[str, ...],
    header_timeout_s: float,
    idle_timeout_s: float,
    max_connections: int | None,
    **knobs: Any,
) -> int:
    """Serve an OpenAI-compatible API on this machine, with content from the sim provider, until Ctrl-C.

    A model name containing "student" or "judge" plays sim/student or sim/judge; any other plays sim/tutor.
    """
    server = LoopbackServer(
        _options(knobs, sim),
        host=host,
        port=port,
        header_timeout_s=header_timeout_s,
        idle_timeout_s=idle_timeout_s,
        max_connections=max_connections,
    )

    async def serve() -> None:
        async with server:
            click.echo(f"simrun serve: {server.base_url} (content from the sim provider; Ctrl-C stops)")
            await anyio.sleep_forever()

    try:
        anyio.run(serve)
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        raise click.ClickException(f"cannot serve on {host}:{port}: {exc}") from exc
    stats = server.stats
    click.echo(
        f"simrun serve: stopped after {stats.requests} chat requests "
        f"({stats.too_many_requests} 429s, {stats.dropped} dropped, {stats.tokens} tokens)"
    )
    return 0
