"""The `simrun` command line: a thin layer over the library that maps errors to exit codes.

Exit codes: 0 all episodes ok · 2 user error (bad scenario, argument, missing key) · 3 finished with some
episodes recorded as errors · 130 interrupted (records flushed; `--resume` completes the run).
"""

from __future__ import annotations

import importlib
import inspect
import json
import shlex
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from engine.cli._live import LiveDetail, print_end_summary, resume_hint, run_with_progress_lines
from engine.cli._runs import RUN_DIR
from engine.cli._verbosity import LEVELS, split_verbosity, verbosity
from engine.core._errors import ScenarioError
from engine.core._events import configure_console_logging
from engine.core._format import fit_to_width
from engine.core._records import EpisodeRecord
from engine.models._breaker import parse_max_errors
from engine.models._provider import PROVIDERS
from engine.runtime._build import BuiltScenario, load_built
from engine.runtime._duration import duration_text
from engine.runtime._modes import mode_of
from engine.runtime._plugins import JUDGES, PROTOCOLS, STUDENTS, SUMMARIZERS, TUTORS, planning_notes
from engine.runtime._rundir import RunDir
from engine.runtime._runner import Runner, RunResult
from engine.scenario._budget import Budget, price_of

__all__ = ("main",)

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


class _RunByDefault(click.Group):
    """`simrun SCENARIO` means `simrun run SCENARIO`; the other subcommands are imported when used.

    Loading every subcommand's dependencies (aiohttp, scikit-learn, the HTTP server) on each start cost
    about a second per command, so they are named here and imported on first use.
    """

    LAZY = {
        "serve": "engine.cli._serve:serve_command",
        "loadtest": "engine.cli._loadtest:loadtest_command",
        "cache": "engine.cli._cache:cache_group",
        "calibrate": "engine.cli._calibrate:calibrate_command",
        "view": "engine.cli._view:view_command",
        "compare": "engine.cli._compare:compare_command",
        "embed": "engine.cli._embed:embed_command",
        "runs": "engine.cli._runs:runs_command",
    }
    LAZY_HELP = {
        "serve": "Serve an OpenAI-compatible API on this machine, with content from the sim provider, until Ctrl-C.",
        "loadtest": "Drive simulated students' conversations against an OpenAI-compatible endpoint and measure it.",
        "cache": "Inspect or empty the response cache that `--cache` runs read and write.",
        "calibrate": "Run judges over human-labelled responses in LABELS and report their agreement with the humans.",
        "view": "Serve RUN_DIR's report.html on 127.0.0.1 and print the address (Ctrl-C stops).",
        "compare": "Compare RUN_A RUN_B [...] episode by episode; writes compare.md and compare.html (exit 2: not "
        "comparable).",
        "embed": "Embed the texts of the items in PATH and write {id: vector} to OUT, for `retrieval: embeddings`.",
        "runs": "List the runs in PARENT (default runs/), oldest first; `latest` names the last one.",
    }
    """Each lazy command's short help (a test keeps it equal to the command's own), so `simrun --help` lists
    the commands without importing them."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.LAZY and cmd_name not in self.commands:
            module, _, name = self.LAZY[cmd_name].partition(":")
            self.add_command(getattr(importlib.import_module(module), name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows: list[tuple[str, str]] = []
        for name in names:
            command = self.commands.get(name)
            if command is None and name in self.LAZY_HELP:
                command = click.Command(name, help=self.LAZY_HELP[name])  # a stand-in, to shorten the help alike
            command = command or self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        front, args = split_verbosity(args)
        if args and args[0] not in self.commands and args[0] not in self.LAZY and not args[0].startswith("-"):
            args = ["run", *args]
        return super().parse_args(ctx, [*front, *args])


@click.group(cls=_RunByDefault, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="simrun", prog_name="simrun")
@click.option("--quiet", "-q", is_flag=True, help="Print results and errors only: no progress, no warnings.")
@click.option("--log-level", type=click.Choice(LEVELS), help="Run events echoed on the console (default warning).")
def cli(quiet: bool, log_level: str | None) -> None:
    """Run tutor / simulated-student / judge scenarios and summarise what the judges found.

    --quiet and --log-level may be given anywhere on the line.
    """
    verbosity.set(quiet=quiet, level=log_level)


_scenario_arg = click.argument("scenario", type=click.Path(path_type=Path, dir_okay=False))
_set_opt = click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="PATH=VALUE",
    help="Override a scenario key, e.g. --set student.max_turns=6 (value parsed as YAML).",
)
_model_opt = click.option(
    "--model",
    "models",
    multiple=True,
    metavar="ROLE=SPEC",
    help="Model for a role: provider/model, or a YAML mapping such as '{model: openai/x, base_url: http://...}'.",
)
_data_dir_opt = click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder of downloaded public datasets, for item paths written data:FOLDER/FILE (default: $SIMRUN_DATA).",
)
_max_episodes_opt = click.option(
    "--max-episodes",
    type=click.IntRange(min=1),
    help="Accept a plan this big (default 200,000 episodes; a bigger plan is refused as a likely typo).",
)


def _load(
    scenario: Path,
    overrides: Sequence[str],
    models: Sequence[str],
    *,
    credentials: bool = True,
    limit: int | None = None,
    seed: int | None = None,
    concurrency: int | None = None,
    max_episodes: int | None = None,
    executor: dict[str, str | int | None] | None = None,
    data_dir: Path | None = None,
) -> BuiltScenario:
    flags: dict[str, object] = {"limit": limit, "seed": seed, "concurrency": concurrency, "max_episodes": max_episodes}
    flags["data_dir"] = str(data_dir.expanduser().resolve()) if data_dir is not None else None
    flags |= {f"executor.{key}": value for key, value in (executor or {}).items()}
    extra = [f"{key}={json.dumps(value)}" for key, value in flags.items() if value is not None]
    return load_built(scenario, overrides=[*overrides, *extra], models=models, check_credentials=credentials)


@cli.command()
@_scenario_arg
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("runs"),
    show_default=True,
    help="Folder for the run directory.",
)
@_model_opt
@_set_opt
@click.option("--limit", type=click.IntRange(min=1), help="Run only the first N planned episodes.")
@_max_episodes_opt
@_data_dir_opt
@click.option("--seed", type=int, help="Run seed (default: the scenario's).")
@click.option("--concurrency", type=click.IntRange(min=1), help="Episodes in flight at once.")
@click.option(
    "--resume",
    type=RUN_DIR,
    help="Complete an interrupted run: only its missing episodes are run (`latest`: the newest run).",
)
@click.option("--dry-run", is_flag=True, help="Print the plan and estimated calls and tokens; call nothing.")
@click.option("--cache/--no-cache", "cache", default=None, help="Answer repeated calls from the response cache.")
@click.option("--cache-path", type=click.Path(path_type=Path, dir_okay=False), help="Response cache file.")
@click.option("--max-cost", type=click.FloatRange(min=0), help="Stop admitting episodes once this many USD are spent.")
@click.option(
    "--max-tokens", type=click.IntRange(min=1), help="Stop admitting episodes once this many tokens are used."
)
@click.option("--retry-errors", is_flag=True, help="With --resume: run the episodes recorded as errors again.")
@click.option("--no-probe", is_flag=True, help="Skip the one cheap call per endpoint made before the first episode.")
@click.option(
    "--max-errors",
    metavar="N|P%",
    help="Stop once N episodes (or P% of the plan) are recorded as errors; resume with --retry-errors.",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "ray"]),
    help="Where episodes are played: this process (default) or Ray actors (needs simrun[ray]).",
)
@click.option("--ray-address", metavar="auto|ray://HOST:PORT", help="Ray cluster to join (implies --executor ray).")
@click.option(
    "--ray-workers",
    type=click.IntRange(min=1),
    help="Ray worker actors (default: one per cluster CPU; implies --executor ray).",
)
def run(
    scenario: Path,
    out: Path,
    models: tuple[str, ...],
    overrides: tuple[str, ...],
    limit: int | None,
    max_episodes: int | None,
    data_dir: Path | None,
    seed: int | None,
    concurrency: int | None,
    resume: Path | None,
    dry_run: bool,
    cache: bool | None,
    cache_path: Path | None,
    max_cost: float | None,
    max_tokens: int | None,
    retry_errors: bool,
    no_probe: bool,
    max_errors: str | None,
    executor: str | None,
    ray_address: str | None,
    ray_workers: int | None,
) -> int:
    """Run SCENARIO (a YAML file) and print its summary table."""
    built = _load(
        scenario,
        overrides,
        models,
        credentials=not dry_run,
        limit=limit,
        seed=seed,
        concurrency=concurrency,
        max_episodes=max_episodes,
        executor=_executor_choice(executor, ray_address, ray_workers),
        data_dir=data_dir,
    )
    budget = Budget(max_cost=max_cost, max_tokens=max_tokens)
    if dry_run:
        return _dry_run(built, budget)
    _connect_executor(built)
    console = Console(stderr=True)
    runner = Runner(
        built,
        out=out,
        resume=resume,
        cache=cache_path or cache,
        budget=budget,
        retry_errors=retry_errors,
        probe=not no_probe,
        max_errors=parse_max_errors(max_errors) if max_errors is not None else None,
        report=_write_report,
    )
    runner.prepare()
    configure_console_logging(console=console, secrets=runner.redactor, console_level=verbosity.level)
    result = _run_with_progress(runner, console)
    _print_result(built, runner, result, console)
    hint = resume_hint(shlex.quote(str(scenario)), result, _same_flags(models, overrides, limit, seed, data_dir))
    _print_next_step(result, hint, console)
    return result.exit_code


def _dry_run(built: BuiltScenario, budget: Budget) -> int:
    _print_plan(built, estimate=True, budget=budget)
    _warn_missing_keys(built)
    return 0


def _warn_missing_keys(built: BuiltScenario) -> None:
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


def _connect_executor(built: BuiltScenario) -> None:
    """Join the Ray cluster before the run directory exists, so a missing extra (exit 2) leaves nothing behind."""
    if built.scenario.executor.name == "ray":
        from engine.runtime._ray import connect

        connect(built.scenario.executor.address)


def _executor_choice(executor: str | None, address: str | None, workers: int | None) -> dict[str, Any]:
    """`--ray-address` or `--ray-workers` alone mean `--executor ray`."""
    return {"name": executor or ("ray" if address or workers else None), "address": address, "workers": workers}


def _print_next_step(result: RunResult, hint: str, console: Console) -> None:
    if result.exit_code == 130:
        console.print(Text(f"interrupted: {result.reason or 'stopped'}", style="bold yellow"), soft_wrap=True)
        console.print(Text(f"resume with: {hint}"), soft_wrap=True)
    elif result.errors:
        console.print(Text(f"retry the errors with: {hint}"), soft_wrap=True)


def _same_flags(
    models: Sequence[str], overrides: Sequence[str], limit: int | None, seed: int | None, data_dir: Path | None = None
) -> list[str]:
    """The options that keep a resumed or retried run the same run (and find its data again)."""
    same = [
        f"--{name} {shlex.quote(value)}" for name, values in (("model", models), ("set", overrides)) for value in values
    ]
    same += [f"--data-dir {shlex.quote(str(data_dir))}"] if data_dir is not None else []
    return same + [f"--{name} {value}" for name, value in (("limit", limit), ("seed", seed)) if value is not None]


def _print_result(built: BuiltScenario, runner: Runner, result: RunResult, console: Console) -> None:
    """The summary table on stdout, the end-of-run summary on stderr (`console`), then the run directory."""
    out_console = Console(soft_wrap=True)
    out_console.print(fit_to_width(built.summarizer.render_console(result.summary), out_console.width))
    if result.summary.get("run", {}).get("simulated"):
        out_console.print(
            "[dim]Results come from the `sim` provider (a deterministic simulator), not from a language model.[/]"
        )
    if not verbosity.quiet or result.errors:  # quiet keeps the results; errors still get their summary
        print_end_summary(console, runner, result)
    out_console.print(f"run directory: {result.run_dir}  ({result.ok} ok, {result.errors} error)")
    report = Path(result.run_dir) / "report.html"
    if report.is_file():
        out_console.print(f"report: {report}  (open it with: simrun view {shlex.quote(str(result.run_dir))})")


def _write_report(run: RunDir) -> dict[str, Any]:
    from engine.report._rebuild import write_report  # statistics and plotting load once episodes have run

    return write_report(run)


def _run_with_progress(runner: Runner, console: Console) -> RunResult:
    if not console.is_terminal and not verbosity.quiet:
        piped: RunResult = anyio.run(partial(run_with_progress_lines, runner, console), backend="asyncio")
        return piped
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        LiveDetail(runner),
        console=console,
        transient=False,
        disable=verbosity.quiet,
    )
    task = progress.add_task(runner.scenario.name, total=len(runner.episodes), completed=runner.already_done)

    async def on_episode(_: EpisodeRecord) -> None:
        progress.update(task, advance=1)

    runner.on_episode = on_episode
    with progress:
        result: RunResult = anyio.run(partial(runner.run, handle_signals=True), backend="asyncio")
        return result


def _print_plan(built: BuiltScenario, *, estimate: bool, budget: Budget | None = None) -> None:
    spec, episodes = built.scenario, built.episodes
    console = Console(soft_wrap=True)
    conditions = len({tuple(sorted(e.condition.items())) for e in episodes})
    factors = ", ".join(f"{name} ({len(levels)})" for name, levels in spec.factors.items())
    if spec.design is not None:
        factors = ", ".join(filter(None, [f"design {spec.design.name}", factors]))
    items = len({episode.item.id for episode in episodes})
    console.print(
        f"scenario [bold]{escape(spec.name)}[/] ({escape(spec.kind)}): {len(episodes)} episodes = "
        f"{items} items × {conditions} conditions {escape('[' + (factors or 'none') + ']')} × "
        f"{spec.replicates} replicate(s)"
    )
    for note in planning_notes(spec, episodes):
        console.print(Text(note))
    if not estimate:
        return
    totals = built.estimate()
    table = Table(title="estimated model calls (upper bound; nothing was called)")
    for column in ("role", "model", "calls", "tokens", "cost (USD)"):
        table.add_column(column, justify="left" if column in ("role", "model") else "right")
    by_role: dict[str, list[str]] = {}
    for role, model_spec in built.models:
        by_role.setdefault(role, []).append(model_spec.model)
    total_cost: float | None = 0.0
    total_tokens = 0
    for role, guess in totals.items():
        prices = [price_of(m, spec.prices) for m in by_role.get(role, [])]
        # Upper bound: every token at the dearer of the input and output price of the dearest model.
        rate = max((max(p.input, p.output) for p in prices if p is not None), default=None)
        cost = None if rate is None or None in prices else guess.tokens * rate / 1_000_000
        total_cost = None if cost is None or total_cost is None else total_cost + cost
        total_tokens += guess.tokens
        names = ", ".join(sorted(set(by_role.get(role, ["-"]))))
        shown = "unknown price" if cost is None else f"{cost:,.2f}"
        table.add_row(*map(Text, (role, names, f"{guess.calls:,}", f"{guess.tokens:,}", shown)))
    console.print(table)
    console.print(Text(duration_text(spec, totals)))
    if budget is not None and (budget.max_cost is not None or budget.max_tokens is not None):
        cost_text = "unknown" if total_cost is None else f"${total_cost:,.2f}"
        limits = ", ".join(
            part
            for part in (
                f"--max-cost ${budget.max_cost:,.2f}" if budget.max_cost is not None else "",
                f"--max-tokens {budget.max_tokens:,}" if budget.max_tokens is not None else "",
            )
            if part
        )
        console.print(
            Text(f"estimate {total_tokens:,} tokens, {cost_text}; checked before each episode against {limits}")
        )


@cli.command()
@_scenario_arg
@_model_opt
@_set_opt
@_max_episodes_opt
@_data_dir_opt
def validate(
    scenario: Path, models: tuple[str, ...], overrides: tuple[str, ...], max_episodes: int | None, data_dir: Path | None
) -> int:
    """Check SCENARIO and print the size of its plan (API keys are not required)."""
    built = _load(scenario, overrides, models, credentials=False, max_episodes=max_episodes, data_dir=data_dir)
    _print_plan(built, estimate=False)
    Console().print("[green]valid[/]")
    return 0


@cli.command()
@click.argument("run_dir", type=RUN_DIR)
def report(run_dir: Path) -> int:
    """Rebuild summary.json, report.md and report.html of RUN_DIR from its records, and print the table."""
    run = RunDir(run_dir)
    manifest = run.read_manifest()  # a run directory, before anything is written into it
    run.acquire("report")  # it rewrites files a running run writes too
    try:
        mode = mode_of(manifest)
        if mode is not None:
            console = Console()
            console.print(fit_to_width(mode.render_console(mode.rebuild(run)), console.width))
        else:
            summary = _write_report(run)
            for warning in summary["run"].get("warnings") or []:
                Console(stderr=True).print(Text(f"warning: {warning}", style="yellow"))
            renderable = SUMMARIZERS.get(summary["run"]["kind"]).render_console(summary)
            console = Console()
            console.print(fit_to_width(renderable, console.width))
    finally:
        run.release()
    Console().print(f"wrote {run_dir / 'summary.json'}, {run_dir / 'report.md'} and {run_dir / 'report.html'}")
    return 0


@cli.command(name="list")
def list_plugins() -> int:
    """List the registered providers, scenario kinds, agents, strategies and judges."""
    console = Console(soft_wrap=True)
    for title, registry in (
        ("providers", PROVIDERS),
        ("scenario kinds", PROTOCOLS),
        ("tutor agents", TUTORS),
        ("student strategies", STUDENTS),
        ("judges", JUDGES),
    ):
        table = Table(title=title, title_justify="left", show_header=False, box=None, padding=(0, 2, 0, 2))
        plugins: list[tuple[str, object]] = list(registry.items())
        table.add_column(no_wrap=True, min_width=max((len(name) for name, _ in plugins), default=1))
        table.add_column(no_wrap=True, overflow="ellipsis")  # one line per name, cut at the terminal's width
        for name, plugin in plugins:
            described = plugin() if callable(plugin) and registry is PROVIDERS else plugin  # imports its class
            table.add_row(Text(name, style="bold"), Text(_first_line(described)))
        console.print(table)
    return 0


def _first_line(plugin: object) -> str:
    """A plug-in's one-line description: the first sentence of its docstring (its class's for an instance, its
    module's for a factory without one)."""
    doc = inspect.getdoc(plugin) or inspect.getdoc(inspect.getmodule(plugin)) or ""
    paragraph = doc.split("\n\n")[0].replace("\n", " ").strip()
    return paragraph.split(". ")[0].removesuffix(".")


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point; returns the exit code."""
    args = list(argv) if argv is not None else sys.argv[1:]
    if not args:  # a first try: the help is the answer, not a usage error
        args = ["--help"]
    try:
        code = cli.main(args=args, prog_name="simrun", standalone_mode=False)
    except ScenarioError as exc:
        Console(stderr=True, soft_wrap=True).print(Text.assemble(("error: ", "bold red"), str(exc)))
        return EXIT_USER_ERROR
    except click.exceptions.Abort:
        return EXIT_INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return code if isinstance(code, int) else 0
