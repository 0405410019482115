"""`--dry-run` on a sequential scenario: the expected and the maximum spend next to the fixed-sample cost."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from engine.core._format import format_count, format_fixed, format_pct
from engine.runtime._sequential_plan import forecast_spend, parse_effects
from engine.scenario._stopping import StoppingSpec

__all__ = ("print_sequential_plan",)


def print_sequential_plan(
    console: Console, stopping: StoppingSpec, items: int, calls: int, cost: float | None, effects: tuple[str, ...]
) -> None:
    named = parse_effects(effects, stopping)
    forecast = forecast_spend(stopping, items, named)

    def usd(share: float) -> str:
        return "unknown price" if cost is None else format_fixed(cost * share, 2)

    table = Table(title="sequential plan: spend under the planted effects (a forecast; nothing was called)")
    for column in ("design", "share of plan", "calls", "cost (USD)", "power at the stop"):
        power_column = column == "power at the stop"
        table.add_column(column, justify="left" if column in ("design", "power at the stop") else "right",
                         no_wrap=not power_column)  # fmt: skip
    power = ", ".join(f"{name} {format_pct(share)}" for name, share in forecast.power.items())
    expected = forecast.expected_share
    expected_calls = format_count(round(calls * expected))
    table.add_row("sequential, expected", format_pct(expected), expected_calls, usd(expected), power)
    table.add_row("sequential, maximum", format_pct(1.0), format_count(calls), usd(1.0), "")
    table.add_row("fixed sample", format_pct(1.0), format_count(calls), usd(1.0), "")
    console.print(table)
    planted = ", ".join(f"{k}={v}" for k, v in named.items()) or "none (every question at its null)"
    console.print(
        Text(
            f"planted: {planted}; a look every {stopping.look_every} of {items} items; item values drawn as "
            "Bernoulli at the planted mean (the largest variance for that mean: the forecast errs on the costly side)"
        )
    )
