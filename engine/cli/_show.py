"""What the run command prints around a run: the plan and its estimated calls and cost, the keys a real run
would need, a sim judge on a model's text, and at the end the tables, who played what and where the report is."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from engine.cli._live import print_end_summary
from engine.cli._sequential_plan import print_sequential_plan
from engine.cli._verbosity import verbosity
from engine.core._errors import ScenarioError
from engine.core._format import fit_to_width, format_count, format_fixed
from engine.models._provider import PROVIDERS
from engine.report._blocks import Table
from engine.report._console import console_blocks
from engine.report._judge_agreement import judge_agreement_blocks
from engine.report._judging import all_simulated, judging_line, played_by_line, sim_judge_note
from engine.report._sequential import sequential_lines
from engine.runtime._build import BuiltScenario
from engine.runtime._duration import duration_text
from engine.runtime._players import played_by
from engine.runtime._plugins import planning_notes
from engine.runtime._runner import Runner, RunResult
from engine.runtime._sequential import expand_questions
from engine.scenario._budget import Budget, price_of

__all__ = ("print_plan", "print_result", "print_tables", "warn_missing_keys", "warn_sim_judge")


def warn_missing_keys(built: BuiltScenario) -> None:
    """A dry run calls nothing, so it needs no key, but says which the real run would stop for (exit 2)."""
    said: set[str] = set()
    for role, spec in built.models:
        try:
            PROVIDERS.get(spec.provider)().check(spec, role)
        except ScenarioError as exc:
            if str(exc) not in said:
                said.add(str(exc))
                Console(stderr=True, soft_wrap=True).print(
                    Text(f"warning: {exc} (the run itself would stop with exit 2)", style="yellow")
                )


def print_result(built: BuiltScenario, runner: Runner, result: RunResult, console: Console) -> None:
    """The summary table on stdout, the end-of-run summary on stderr (`console`), then the run directory."""
    out_console = Console(soft_wrap=True)
    print_tables(out_console, result.summary, built.summarizer)
    if not verbosity.quiet or result.errors:  # quiet keeps the results; errors still get their summary
        print_end_summary(console, runner, result)
    out_console.print(f"run directory: {result.run_dir}  ({result.ok} ok, {result.errors} error)")
    report = Path(result.run_dir) / "report.html"
    if report.is_file():
        out_console.print(f"report: {report}  (open it with: simrun view {shlex.quote(str(result.run_dir))})")


def print_tables(console: Console, summary: dict[str, Any], summarizer: Any) -> None:
    """A run's tables as the terminal shows them (after a run and by `simrun report`): who played each role, the
    kind's tables (or a study's comparison of its tutors), where the numbers come from, a sequential stop."""
    from engine.report._models import view_for  # loaded with the report, after the episodes

    _print_played_by(console, summary)
    console.print(fit_to_width(view_for(summary, summarizer).render_console(summary), console.width))
    agreement = judge_agreement_blocks(summary.get("judge_agreement"))
    if agreement:
        console.print(fit_to_width(console_blocks(agreement), console.width))
    _print_provenance(console, summary)
    for line in sequential_lines(summary):
        console.print(Text(line))


def _print_played_by(console: Console, summary: dict[str, Any]) -> None:
    played = summary.get("run", {}).get("played_by") or {}
    if played:
        console.print(Text(f"played by: {played_by_line(played)}", style="bold"))


def _print_provenance(console: Console, summary: dict[str, Any]) -> None:
    """Under the table: where the numbers come from, per role rather than one blanket line for a mixed run."""
    info = summary.get("run", {})
    played = info.get("played_by") or {}
    block = summary.get("judging") or {}
    judging = judging_line(block)
    if judging is not None:
        failed = any(row["unjudged"] for row in block["judges"].values()) or "parse failures:" in judging
        console.print(Text(judging, style="yellow" if failed else "dim"))
    note = sim_judge_note(played)
    if note is not None:
        console.print(Text(f"note: {note}.", style="yellow"))
    if not info.get("simulated"):
        return
    if all_simulated(played):
        console.print(
            "[dim]Results come from the `sim` provider (a deterministic simulator), not from a language model.[/]"
        )
    else:
        console.print(
            "[dim]Roles played by the `sim` simulator (named above) give simulated output; the others a model's.[/]"
        )


def warn_sim_judge(console: Console, runner: Runner) -> None:
    note = sim_judge_note(played_by(runner.scenario.models, custom_tutor=False))  # the CLI takes no custom agent
    if note is not None:
        console.print(Text(f"warning: {note}", style="yellow"), soft_wrap=True)


def print_plan(
    built: BuiltScenario,
    *,
    estimate: bool,
    budget: Budget | None = None,
    effects: tuple[str, ...] = (),
    power_r: float | None = None,
) -> None:
    spec, episodes = built.scenario, built.episodes
    console = Console(soft_wrap=True)
    conditions = len({tuple(sorted(e.condition.items())) for e in episodes})
    factors = ", ".join(f"{name} ({len(levels)})" for name, levels in spec.factors.items())
    if spec.design is not None and spec.design.name is not None:
        factors = ", ".join(filter(None, [f"design {spec.design.name}", factors]))
    items = len({episode.item.id for episode in episodes})
    labels = spec.models.tutor_labels
    free = sum(1 for e in episodes if e.tutor is None) if labels else 0  # tutor-free units, played once
    console.print(
        f"scenario [bold]{escape(spec.name)}[/] ({escape(spec.kind)}): {len(episodes)} episodes = "
        f"{items} items × {conditions} conditions {escape('[' + (factors or 'none') + ']')} × "
        f"{spec.replicates} replicate(s)"
        + (f" × {len(labels)} tutors" if labels else "")
        + (f", less {free * (len(labels) - 1)} (the {free} tutor-free ones are played once)" if free and labels else "")
    )
    for note in planning_notes(spec, episodes, power_r=power_r):
        console.print(Text(note))
    if estimate:
        _print_estimate(console, built, budget, effects, items)


def _print_estimate(
    console: Console, built: BuiltScenario, budget: Budget | None, effects: tuple[str, ...], items: int
) -> None:
    """The dry run's table of calls, tokens and cost per role, its duration, and the spending limits it meets."""
    spec, episodes = built.scenario, built.episodes
    totals = built.estimate()
    rows: list[tuple[str, ...]] = []
    by_role: dict[str, list[str]] = {}
    for role, model_spec in spec.models.by_named_role():
        by_role.setdefault(role, []).append(model_spec.model)
    total_cost: float | None = 0.0
    total_tokens = upper_tokens = 0
    for role, guess in totals.items():
        prices = [price_of(m, spec.prices) for m in by_role.get(role, [])]
        # Upper bound: every token at the dearer of the input and output price of the dearest model.
        rate = max((max(p.input, p.output) for p in prices if p is not None), default=None)
        cost = None if rate is None or None in prices else guess.upper_tokens * rate / 1_000_000
        total_cost = None if cost is None or total_cost is None else total_cost + cost
        total_tokens += guess.tokens
        upper_tokens += guess.upper_tokens
        names = ", ".join(sorted(set(by_role.get(role, ["-"]))))
        shown = "unknown price" if cost is None else format_fixed(cost, 2)
        counts = (format_count(guess.calls), format_count(guess.tokens), format_count(guess.upper_tokens))
        rows.append((role, names, *counts, shown))
    table = Table(
        ("role", "model", "calls", "tokens", "at most", "cost ≤ (USD)"),
        tuple(rows),
        title="estimated model calls (expected, and the most they can be; nothing was called)",
        left=("model",),
    )
    console.print(fit_to_width(console_blocks([table]), console.width))
    console.print(Text(duration_text(spec, totals)))
    stopping = spec.design.stopping if spec.design is not None else None
    if stopping is not None:
        calls = sum(guess.calls for guess in totals.values())
        print_sequential_plan(console, expand_questions(stopping, episodes), items, calls, total_cost, effects)
    if budget is not None and (budget.max_cost is not None or budget.max_tokens is not None):
        cost_text = "unknown" if total_cost is None else f"${format_fixed(total_cost, 2)}"
        limits = ", ".join(
            part
            for part in (
                f"--max-cost ${format_fixed(budget.max_cost, 2)}" if budget.max_cost is not None else "",
                f"--max-tokens {format_count(budget.max_tokens)}" if budget.max_tokens is not None else "",
            )
            if part
        )
        console.print(
            Text(
                f"estimate {format_count(total_tokens)} tokens (at most {format_count(upper_tokens)}, at most "
                f"{cost_text}); "
                f"checked before each episode against {limits}"
            )
        )
