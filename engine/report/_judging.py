"""What judged what: who played each role, the replies left unjudged, and each judge model's parse failures.

A rate says nothing about the replies it could not judge, and a verdict says nothing about whether a simulator's
keyword check or a language model gave it; this block says both, for every kind, from the records alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from engine.core._format import format_pct
from engine.core._records import EpisodeRecord
from engine.report._blocks import SIMRUN_ADDITION, Block, Note, Section, Table
from engine.runtime._plugins import JUDGE_OUTPUTS, UNJUDGED

__all__ = (
    "all_simulated",
    "judging_blocks",
    "judging_line",
    "judging_summary",
    "played_by_line",
    "sim_judge_note",
)


def judging_summary(records: Sequence[EpisodeRecord]) -> dict[str, Any]:
    """Per judge (rubric): judgments given and replies left unjudged; per judge model × rubric: answers and the
    share that failed to parse or validate."""
    judged: Counter[str] = Counter()
    unjudged: Counter[str] = Counter()
    reasons: dict[str, str] = {}
    answers: dict[tuple[str, str], Counter[str]] = {}
    for record in records:
        if record.status != "ok":
            continue
        seen: set[tuple[str, int | str]] = set()
        for judgment in record.judgments:
            if judgment.metric == UNJUDGED:
                unjudged[judgment.judge] += 1
                reasons.setdefault(judgment.judge, judgment.rationale or "")
            elif (judgment.judge, judgment.target) not in seen:
                seen.add((judgment.judge, judgment.target))
                judged[judgment.judge] += 1
        for model, rubrics in (record.meta.get(JUDGE_OUTPUTS) or {}).items():
            for rubric, tally in rubrics.items():
                answers.setdefault((model, rubric), Counter()).update(tally)
    parse = [
        {
            "model": model,
            "rubric": rubric,
            "answers": tally["valid"] + tally["invalid"],
            "invalid": tally["invalid"],
            "rate": tally["invalid"] / (tally["valid"] + tally["invalid"]),
        }
        for (model, rubric), tally in sorted(answers.items())
        if tally["valid"] + tally["invalid"]
    ]
    judges = sorted(set(judged) | set(unjudged))
    return {
        "judges": {
            name: {"judged": judged[name], "unjudged": unjudged[name], "first_reason": reasons.get(name)}
            for name in judges
        },
        "parse_failures": parse,
    }


def judging_blocks(block: Mapping[str, Any] | None) -> list[Block]:
    """The Judging section: each judge's judged and unjudged replies, each judge model's parse failures."""
    if not block or not (block.get("judges") or block.get("parse_failures")):
        return []
    body: list[Block] = [
        Table(
            ("judge", "judged", "unjudged"),
            tuple((name, row["judged"], row["unjudged"]) for name, row in block["judges"].items()),
            key="judging",
        ),
        Note("Rates count judged replies only; an unjudged reply's judge never gave a valid verdict."),
    ]
    if block.get("parse_failures"):
        rows = tuple(
            (f"`{row['model']}`", row["rubric"], row["answers"], row["invalid"], format_pct(row["rate"]))
            for row in block["parse_failures"]
        )
        columns = ("judge model", "rubric", "answers", "invalid", "parse-failure rate")
        body.append(Table(columns, rows, key="parse-failures"))
    body += [
        Note(f"First unjudged reason ({name}): {row['first_reason']}")
        for name, row in block["judges"].items()
        if row.get("first_reason")
    ]
    provenance = f"{SIMRUN_ADDITION} (replies each judge left unjudged)"
    return [Section("Judging", tuple(body), key="judging", provenance=provenance)]


def judging_line(block: Mapping[str, Any] | None) -> str | None:
    """One console line under the rates: each judge's unjudged count (rates leave those replies out) and the
    judge models whose output failed to parse; None when no judge ran."""
    if not block or not block.get("judges"):
        return None
    unjudged = [
        f"{name} {row['unjudged']} of {row['judged'] + row['unjudged']}" for name, row in block["judges"].items()
    ]
    failing = [
        f"`{row['model']}` × {row['rubric']} {row['invalid']}/{row['answers']} ({format_pct(row['rate'])})"
        for row in block.get("parse_failures") or []
        if row["invalid"]
    ]
    line = f"unjudged (rates leave them out): {', '.join(unjudged)}"
    return line + (f" · parse failures: {', '.join(failing)}" if failing else " · no parse failures")


def played_by_line(played: Mapping[str, Any]) -> str:
    """`tutor: model `x` · student: simulator `sim/student` · judge: ...`, from the manifest's `played_by`."""
    roles = ("tutor", "student", "judge")
    order = [role for role in roles if role in played] + sorted(set(played) - set(roles))
    return " · ".join(f"{role}: {_player(played[role])}" for role in order if played[role])


def all_simulated(played: Mapping[str, Any]) -> bool:
    """True when every role was the simulator (or nothing says who played: a run from before `played_by`)."""
    entries = [e for entry in played.values() if entry for e in (entry if isinstance(entry, list) else [entry])]
    return all(e.get("simulator") for e in entries)


def sim_judge_note(played: Mapping[str, Any]) -> str | None:
    """A warning when a language model's replies are judged by the simulator: its verdicts are keyword checks."""
    tutor = played.get("tutor") or {}
    tutors = tutor if isinstance(tutor, list) else [tutor]
    judges = played.get("judge") or []
    if all(t.get("simulator", True) for t in tutors) or not any(j.get("simulator") for j in judges):
        return None
    return (
        "the tutor is a language model but a judge is the `sim` simulator: its verdicts are keyword checks "
        "(e.g. whether a reply states the reference answer), not a reading of the model's text"
    )


def _player(entry: Any) -> str:
    entries = entry if isinstance(entry, list) else [entry]
    return ", ".join(
        f"{_played(e)} `{e.get('model')}`" + (f" ({e['label']})" if e.get("label") else "") for e in entries
    )


def _played(entry: Mapping[str, Any]) -> str:
    if entry.get("simulator"):
        return "simulator"
    return "model" if entry.get("provider") else "agent"
