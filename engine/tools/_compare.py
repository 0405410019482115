"""`simrun compare RUN_A RUN_B [...]`: several runs side by side, paired episode by episode.

Episodes are matched by item, condition and replicate, so each matched episode is a pair and item difficulty
cancels out, as in the fairness tests. Two runs get a paired Wilcoxon test with the rank-biserial r and its
bootstrap interval per metric; three or more get Friedman, then Bonferroni-corrected pairs (engine/paired.py
for both). Runs of different kinds, or with no episode in common, are stated to be not comparable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import orjson
from markupsafe import Markup
from rich.console import Console
from rich.table import Table
from rich.text import Text

from engine.core._errors import ScenarioError
from engine.core._format import fit_to_width, nanmean
from engine.core._records import EpisodeRecord
from engine.report._page import render_page
from engine.report._sections import EpisodeScores, EpisodeVerdict, default_scores, default_verdict
from engine.report._svg import new_figure, paragraph, plot, section, table
from engine.runtime._modes import mode_of
from engine.runtime._plugins import SUMMARIZERS
from engine.runtime._rundir import RunDir
from engine.runtime._runs import RUN_DIR
from engine.scenario._plan import derive_seed
from engine.scenario._spec import measured
from engine.stats._paired import MEANINGFUL_R, contrast_rows, correct_family, format_effect, format_p

__all__ = ("Comparison", "compare_command", "compare_runs", "write_comparison")

ALL = "all conditions"
MAX_CHANGED_VERDICTS = 200
FAMILY_METHOD = "bh"
FAMILY_Q = 0.05
"""Every contrast of a comparison is one family, corrected together: a finding is adjusted p ≤ q."""
EpisodeKey = tuple[str, tuple[tuple[str, str], ...], int]


@dataclass
class RunSide:
    label: str
    path: Path
    manifest: dict[str, Any]
    records: dict[EpisodeKey, EpisodeRecord]
    errors: int

    def header(self) -> dict[str, Any]:
        models = self.manifest.get("models") or {}
        return {
            "label": self.label,
            "run": self.path.name,
            "scenario": (self.manifest.get("scenario") or {}).get("name"),
            "kind": self.manifest.get("kind"),
            "scenario_hash": self.manifest.get("scenario_hash"),
            "seed": self.manifest.get("seed"),
            "status": self.manifest.get("status"),
            "ok": len(self.records),
            "error": self.errors,
            "models": {k: v if isinstance(v, str) or v is None else ", ".join(v) for k, v in models.items()},
            "simulated": "sim" in (self.manifest.get("providers") or []),
        }


@dataclass
class Comparison:
    runs: list[dict[str, Any]]
    comparable: bool
    statements: list[str]
    matched: int
    metrics: list[str] = field(default_factory=list)
    contrasts: list[dict[str, Any]] = field(default_factory=list)
    changed_verdicts: list[dict[str, Any]] = field(default_factory=list)
    changed_verdicts_total: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "comparable": self.comparable,
            "statements": self.statements,
            "matched": self.matched,
            "metrics": self.metrics,
            "contrasts": self.contrasts,
            "changed_verdicts": self.changed_verdicts,
            "changed_verdicts_total": self.changed_verdicts_total,
        }


def _key(record: EpisodeRecord) -> EpisodeKey:
    return (record.item_id, tuple(sorted(record.condition.items())), record.replicate)


def _condition_text(key: EpisodeKey) -> str:
    return " · ".join(f"{k}={v}" for k, v in key[1]) or "(none)"


def _load(label: str, path: Path) -> RunSide:
    """A run's current records (the last per planned id; see `RunDir.current_records`)."""
    run = RunDir(path)
    manifest = run.read_manifest()
    mode = mode_of(manifest)
    if mode is not None:
        raise ScenarioError(f"{path} is the run directory of {mode.noun}; compare takes scenario runs")
    current = run.current_records(manifest=manifest)
    for warning in current.warnings:
        click.echo(f"warning: {path}: {warning}", err=True)
    records: dict[EpisodeKey, EpisodeRecord] = {}
    errors = 0
    for record in current.records:
        if record.status == "ok":
            records[_key(record)] = record
        else:
            errors += 1
    return RunSide(label, path, manifest, records, errors)


_ABSENT = object()


def _changed(old: Any, new: Any, prefix: str = "") -> tuple[list[str], list[str]]:
    """(keys whose values differ, keys present on one side only — written by another simrun version)."""
    if old is _ABSENT or new is _ABSENT:
        return [], [prefix.rstrip(".")]
    if isinstance(old, dict) and isinstance(new, dict):
        pairs = [
            (f"{prefix}{key}.", old.get(key, _ABSENT), new.get(key, _ABSENT)) for key in sorted(set(old) | set(new))
        ]
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        pairs = [(f"{prefix}{index}.", a, b) for index, (a, b) in enumerate(zip(old, new, strict=True))]
    else:
        return ([] if old == new else [prefix.rstrip(".")]), []
    differ: list[str] = []
    one_sided: list[str] = []
    for path, a, b in pairs:
        d, o = _changed(a, b, path)
        differ += d
        one_sided += o
    return differ, one_sided


def _statements(sides: Sequence[RunSide], matched: int) -> tuple[bool, list[str]]:
    base = sides[0]
    notes: list[str] = []
    kinds = {side.manifest.get("kind") for side in sides}
    if len(kinds) > 1:
        return False, [f"Not comparable: the runs are of different scenario kinds ({', '.join(map(str, kinds))})."]
    if matched == 0:
        return False, ["Not comparable: no episode matches by item, condition and replicate (different plans)."]
    for side in sides[1:]:
        if side.manifest.get("scenario_hash") == base.manifest.get("scenario_hash"):
            notes.append(
                f"{side.label} and {base.label} have the same scenario hash: they measure the same thing, so "
                "differences are run-to-run variation (none at all on the deterministic sim provider)."
            )
            continue
        differ, one_sided = _changed(
            measured(base.manifest.get("scenario") or {}), measured(side.manifest.get("scenario") or {})
        )
        changed = [key for key in differ if key not in ("name", "description")]
        notes.append(
            f"{side.label} and {base.label} have different scenario hashes; they differ in: "
            f"{', '.join(changed) or 'no setting both runs record'}. The paired differences measure the effect of "
            "these changes."
        )
        if one_sided:
            notes.append(
                f"Settings recorded by only one of {side.label} and {base.label} (written by different simrun "
                f"versions): {', '.join(one_sided)}."
            )
        if any(k.startswith(("judges", "models.judge", "judge_votes")) for k in changed):
            notes.append(
                f"Caution: the judges differ between {side.label} and {base.label}, so a difference can come from the "
                "judge rather than the tutor."
            )
    for side in sides:
        unmatched = len(side.records) - matched
        if unmatched:
            notes.append(
                f"Plans differ: {unmatched} ok episodes of {side.label} have no match in every other run and are left "
                f"out; the comparison uses the {matched} matched episodes."
            )
        if side.errors:
            notes.append(f"{side.label} has {side.errors} error episodes; they are left out.")
    return True, notes


def _scores(summarizer: object, record: EpisodeRecord) -> Mapping[str, float]:
    if isinstance(summarizer, EpisodeScores):
        return summarizer.episode_scores(record)
    return default_scores(record)


def _verdict(summarizer: object, record: EpisodeRecord) -> str:
    return summarizer.episode_verdict(record) if isinstance(summarizer, EpisodeVerdict) else default_verdict(record)


def _rows_for(
    labels: Sequence[str], columns: Mapping[str, list[float]], *, metric: str, condition: str, seed: int
) -> list[dict[str, Any]]:
    means = {label: nanmean(values) for label, values in columns.items()}
    base = {"metric": metric, "condition": condition, "means": means}
    cell_seed = derive_seed(seed, "compare", metric, condition)
    # two runs: the later against the first, so a positive difference reads "B is higher"
    family = {label: columns[label] for label in (reversed(labels) if len(labels) == 2 else labels)}
    return [{**base, **row} for row in contrast_rows(family, seed=cell_seed)]


def compare_runs(paths: Sequence[Path]) -> Comparison:
    """Match the runs' ok episodes and compute the paired differences; runs are labelled A, B, C, ..."""
    if len(paths) < 2:
        raise ScenarioError("compare needs at least two run directories")
    if len(paths) > 26:
        raise ScenarioError("compare takes at most 26 run directories")
    sides = [_load(chr(ord("A") + i), Path(path)) for i, path in enumerate(paths)]
    keys = sorted(set.intersection(*(set(side.records) for side in sides)))
    comparable, statements = _statements(sides, len(keys))
    result = Comparison([side.header() for side in sides], comparable, statements, len(keys))
    if not comparable:
        return result
    summarizer = SUMMARIZERS.get(str(sides[0].manifest.get("kind")))
    scores = [{key: _scores(summarizer, side.records[key]) for key in keys} for side in sides]
    metrics: list[str] = []
    for table_ in scores:
        for values in table_.values():
            metrics += [m for m in values if m not in metrics]
    result.metrics = metrics
    seed = int(sides[0].manifest.get("seed") or 0)
    labels = [side.label for side in sides]
    groups: dict[str, list[EpisodeKey]] = {ALL: keys}
    for key in keys:
        groups.setdefault(_condition_text(key), []).append(key)
    for condition, members in groups.items():
        for metric in metrics:
            columns = {
                side.label: [float(scores[i][k].get(metric, math.nan)) for k in members] for i, side in enumerate(sides)
            }
            if all(math.isnan(v) for values in columns.values() for v in values):
                continue  # the metric does not apply in this condition (e.g. backtracks of single-turn dialogues)
            result.contrasts += _rows_for(labels, columns, metric=metric, condition=condition, seed=seed)
    correct_family(result.contrasts, method=FAMILY_METHOD, q=FAMILY_Q)
    changed = []
    for key in keys:
        verdicts = [_verdict(summarizer, side.records[key]) for side in sides]
        if len(set(verdicts)) > 1:
            changed.append({"episode": sides[0].records[key].id, **dict(zip(labels, verdicts, strict=True))})
    result.changed_verdicts_total = len(changed)
    result.changed_verdicts = changed[:MAX_CHANGED_VERDICTS]
    return result


def _mean(value: float | None) -> str:
    return "–" if value is None else f"{value:.4g}"


def _contrast_label(c: Mapping[str, Any]) -> str:
    return f"Friedman: {c['a']}" if c["test"] == "friedman" else f"{c['a']} − {c['b']}"


def _family_p(c: Mapping[str, Any]) -> float | None:
    """A tested contrast's p adjusted over the whole family; an omnibus row shows its own p."""
    value = c.get("p_family")
    return float(value) if value is not None else c.get("p")


def _chance_note(comparison: Comparison) -> str:
    """What the flags mean: one family over every metric × condition × pair, Benjamini–Hochberg adjusted."""
    tested = sum(1 for c in comparison.contrasts if c.get("p_family") is not None)
    flagged = sum(1 for c in comparison.contrasts if c["violation"])
    return (
        f"{tested} contrasts with an interval were tested as one family; {flagged} are findings "
        f"(Benjamini–Hochberg adjusted p ≤ {FAMILY_Q:g}). If the runs did not differ, the chance of any finding "
        f"would be at most {FAMILY_Q:.0%}."
    )


def render_markdown(comparison: Comparison) -> str:
    labels = [run["label"] for run in comparison.runs]
    lines = ["# simrun comparison", "", "| run | directory | scenario | hash | tutor | seed | status | ok | error |"]
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for run in comparison.runs:
        lines.append(
            f"| {run['label']} | `{run['run']}` | {run['scenario']} | `{str(run['scenario_hash'])[:12]}` | "
            f"`{run['models'].get('tutor')}` | {run['seed']} | {run['status']} | {run['ok']} | {run['error']} |"
        )
    lines.append("")
    if any(run["simulated"] for run in comparison.runs):
        lines += [
            "> **Simulated results.** At least one run used simrun's `sim` provider, a deterministic simulator, "
            "not a language model.",
            "",
        ]
    lines += [f"- {s}" for s in comparison.statements] or ["- The runs match episode for episode."]
    lines.append("")
    if not comparable_rows(comparison):
        return "\n".join(lines) + "\n"
    lines += [
        f"## Paired differences over {comparison.matched} matched episodes",
        "",
        f"Rank-biserial r of the per-episode differences (later run − {labels[0]}), 95% bootstrap interval; "
        f"|r| ≥ {MEANINGFUL_R:.2f} is practically meaningful; **bold**: a finding of the corrected family.",
        "",
        _chance_note(comparison),
        "",
        "| condition | metric | " + " | ".join(f"mean {label}" for label in labels) + " | contrast | r [95% CI] | p "
        "| p (family, BH) | n |",
        "|---|---|" + "---|" * len(labels) + "---|---|---|---|---|",
    ]
    for c in comparison.contrasts:
        effect = format_effect(c)
        means = " | ".join(_mean(c["means"][label]) for label in labels)
        lines.append(
            f"| {c['condition']} | {c['metric']} | {means} | {_contrast_label(c)} | "
            f"{f'**{effect}**' if c['violation'] else effect} | {format_p(c['p'])} | "
            f"{format_p(_family_p(c))} | {c['n']} |"
        )
    if comparison.changed_verdicts_total:
        lines += [
            "",
            f"## Episodes whose verdict differs ({comparison.changed_verdicts_total})",
            "",
            "| episode | " + " | ".join(labels) + " |",
            "|---|" + "---|" * len(labels),
        ]
        for row in comparison.changed_verdicts:
            lines.append(f"| {row['episode']} | " + " | ".join(str(row[label]) for label in labels) + " |")
    return "\n".join(lines) + "\n"


def render_console(comparison: Comparison) -> Table | None:
    """The headline: each metric's paired difference over all conditions, with its interval, as in compare.md."""
    overall = [c for c in comparison.contrasts if c["condition"] == ALL]
    if not comparable_rows(comparison) or not overall:
        return None
    labels = [run["label"] for run in comparison.runs]
    table = Table(title=f"Paired differences over {comparison.matched} matched episodes (all conditions)")
    for column in ("metric", *(f"mean {label}" for label in labels), "contrast", "r [95% CI]", "p (family, BH)", "n"):
        table.add_column(column, justify="left" if column in ("metric", "contrast", "r [95% CI]") else "right")
    for c in overall:
        table.add_row(
            *map(Text, (c["metric"], *(_mean(c["means"][label]) for label in labels), _contrast_label(c))),
            Text(format_effect(c), style="bold" if c["violation"] else ""),
            *map(Text, (format_p(_family_p(c)), str(c["n"]))),
        )
    table.caption = f"bold: a finding. {_chance_note(comparison)}"
    return table


def comparable_rows(comparison: Comparison) -> bool:
    return comparison.comparable and bool(comparison.contrasts)


def _forest(comparison: Comparison) -> Markup:
    overall = [c for c in comparison.contrasts if c["condition"] == ALL and c["r"] is not None]
    if not overall:
        return paragraph("No pooled contrast had an interval to plot (see the table).")
    fig = new_figure(7.5, 0.3 * len(overall) + 1.3)
    ax = fig.add_subplot()
    ax.axvspan(-MEANINGFUL_R, MEANINGFUL_R, color="#eaecf0", zorder=0)
    ax.axvline(0, color="#344054", linewidth=0.8)
    for row, c in enumerate(overall):
        color = "#d92d20" if c["violation"] else "#1570ef"
        ax.plot([c["ci_low"], c["ci_high"]], [row, row], color=color, linewidth=1.6)
        ax.plot([c["r"]], [row], marker="D" if c["violation"] else "o", color=color, markersize=5)
    ax.set_yticks(range(len(overall)), [f"{c['metric']} · {c['a']} − {c['b']}" for c in overall], fontsize=8)
    ax.set_ylim(len(overall) - 0.5, -0.5)
    ax.set_xlim(-1.05, 1.05)
    ax.set_xlabel("rank-biserial r with 95% bootstrap CI (red: a finding after correction)")
    ax.grid(axis="x", alpha=0.3)
    return plot(fig, key="compare-forest", caption="Paired differences over all matched episodes, per metric.")


def render_html(comparison: Comparison) -> str:
    labels = [run["label"] for run in comparison.runs]
    runs = table(
        ("run", "directory", "scenario", "kind", "scenario hash", "models", "seed", "status", "ok", "error"),
        [
            (
                r["label"],
                r["run"],
                r["scenario"],
                r["kind"],
                r["scenario_hash"],
                "; ".join(f"{k}: {v}" for k, v in r["models"].items() if v),
                r["seed"],
                r["status"],
                r["ok"],
                r["error"],
            )
            for r in comparison.runs
        ],
        key="runs",
    )
    css = "statement" if comparison.comparable else "statement not-comparable"
    statements = Markup("").join(paragraph(s, css=css) for s in comparison.statements) or paragraph(
        "The runs match episode for episode.", css="statement"
    )
    parts = [section("Runs", runs, statements, key="runs")]
    if any(run["simulated"] for run in comparison.runs):
        parts.insert(
            0,
            paragraph(
                Markup(
                    "<strong>Simulated results.</strong> At least one run used simrun's <code>sim</code> provider, "
                    "a deterministic simulator, not a language model."
                ),
                css="sim-note",
            ),
        )
    if comparable_rows(comparison):
        rows = [
            [
                c["condition"],
                c["metric"],
                *(_mean(c["means"][label]) for label in labels),
                _contrast_label(c),
                format_effect(c),
                format_p(c["p"]),
                format_p(_family_p(c)),
                c["n"],
            ]
            for c in comparison.contrasts
        ]
        parts.append(
            section(
                f"Paired differences over {comparison.matched} matched episodes",
                paragraph(
                    f"Per-episode differences (later run − {labels[0]}), matched by item, condition and replicate. "
                    f"|r| ≥ {MEANINGFUL_R:.2f} is practically meaningful; highlighted rows: findings after "
                    "the family's correction."
                ),
                paragraph(_chance_note(comparison)),
                _forest(comparison),
                table(
                    (
                        "condition",
                        "metric",
                        *(f"mean {label}" for label in labels),
                        "contrast",
                        "r [95% CI]",
                        "p",
                        "p (family, BH)",
                        "n",
                    ),
                    rows,
                    row_classes=["violation" if c["violation"] else "" for c in comparison.contrasts],
                    key="contrasts",
                ),
                key="contrasts",
            )
        )
    if comparison.changed_verdicts:
        parts.append(
            section(
                f"Episodes whose verdict differs ({comparison.changed_verdicts_total})",
                table(
                    ("episode", *labels),
                    [[row["episode"], *(row[label] for label in labels)] for row in comparison.changed_verdicts],
                    key="changed-verdicts",
                ),
                key="changed-verdicts",
            )
        )
    return render_page(title="simrun comparison", header=None, body=Markup("").join(parts), nav=[])


def write_comparison(paths: Sequence[Path], out: Path) -> Comparison:
    """Compare the runs and write compare.json, compare.md and compare.html into `out`."""
    comparison = compare_runs(paths)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ScenarioError(f"cannot create {out}: {exc.strerror or exc}") from None
    (out / "compare.json").write_bytes(orjson.dumps(comparison.as_dict(), option=orjson.OPT_INDENT_2))
    (out / "compare.md").write_text(render_markdown(comparison), encoding="utf-8")
    (out / "compare.html").write_text(render_html(comparison), encoding="utf-8")
    return comparison


@click.command(name="compare")
@click.argument("runs", nargs=-1, required=True, type=RUN_DIR)
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), help="Folder for the comparison report.")
def compare_command(runs: tuple[Path, ...], out: Path | None) -> int:
    """Compare RUN_A RUN_B [...] episode by episode; writes compare.md and compare.html (exit 2: not comparable)."""
    target = out or Path("runs") / f"compare-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"
    comparison = write_comparison(runs, target)
    console = Console(soft_wrap=True)
    for statement in comparison.statements:
        console.print(Text(statement))
    headline = render_console(comparison)
    if headline is not None:
        console.print(fit_to_width(headline, console.width))
    click.echo(f"wrote {target / 'compare.md'} and {target / 'compare.html'} ({comparison.matched} matched episodes)")
    return 0 if comparison.comparable else 2
