"""`--dry-run` on a sequential scenario: the expected and the maximum spend next to the fixed-sample cost."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from engine.runtime._sequential_plan import forecast_spend, parse_effects
from engine.scenario._stopping import StoppingSpec

__all__ = ("print_sequential_plan",)


def print_sequential_plan(
    console: Console, stopping: StoppingSpec, items: int, calls: int, cost: float | None, effects: tuple[str, ...]
) -> None:
    named = parse_effects(effects, stopping)
    forecast = forecast_spend(stopping, items, named)

    def usd(share: float) -> str:
        return "unknown price" if cost is None else f"{cost * share:,.2f}"

    table = Table(title="sequential plan: spend under the planted effects (a forecast; nothing was called)")
    for column in ("design", "share of plan", "calls", "cost (USD)", "power at the stop"):
        power_column = column == "power at the stop"
        table.add_column(column, justify="left" if column in ("design", "power at the stop") else "right",
                         no_wrap=not power_column)  # fmt: skip
    power = ", ".join(f"{name} {share:.0%}" for name, share in forecast.power.items())
    expected = forecast.expected_share
    table.add_row("sequential, expected", f"{expected:.0%}", f"{round(calls * expected):,}", usd(expected), power)
    table.add_row("sequential, maximum", "100%", f"{calls:,}", usd(1.0), "")
    table.add_row("fixed sample", "100%", f"{calls:,}", usd(1.0), "")
    console.print(table)
    planted = ", ".join(f"{k}={v}" for k, v in named.items()) or "none (every question at its null)"
    console.print(
        Text(
            f"planted: {planted}; a look every {stopping.look_every} of {items} items; item values drawn as "
            "Bernoulli at the planted mean (the largest variance for that mean: the forecast errs on the costly side)"
        )
    )
