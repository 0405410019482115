"""Where the `cases` report's MCQ options came from, and why TutorCaseBench's demographic table is absent.

A report says how its multiple-choice options were made (the heuristic, the construction model, or the release's
own items: `meta.mcq_construction.by` of each record, see `agents.case_mcq_build`), and it says why a table of
the paper that it cannot build is missing rather than leaving it out silently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from engine import Episode, EpisodeRecord, Note, Scenario, Section

__all__ = (
    "DEMOGRAPHICS_ABSENT",
    "HEURISTIC_OPTIONS",
    "demographics_section",
    "mcq_builders",
    "mcq_options_origin",
    "mcq_plan_notes",
)

HEURISTIC_OPTIONS = "options chosen by simrun's heuristic, not the paper's LLM selection"
DEMOGRAPHICS_ABSENT = (
    "Not built. TutorCaseBench's Table 5 splits open-response success by the source paper's region, the students' "
    "education level and their gender. The paper's pipeline extracted those fields from each source paper (its "
    "Stage 1) and did not release them: the public release's scenario, rubric and MCQ files and its "
    "dataset_overall.csv carry no region, education level or gender, and its document_list.csv (title, authors, "
    "year, ERIC id, abstract) names no country or school level and is not linked to the student categories. "
    "simrun's own cases carry none either. Guessing the groups from free-text descriptions would not be the "
    "paper's table, so there is nothing to tabulate."
)


def mcq_builders(records: Sequence[EpisodeRecord]) -> dict[str, int]:
    """MCQs shown, by who built their options: `heuristic`, `dataset`, `model: <id>`, with the fallback's reason."""
    found: Counter[str] = Counter()
    for r in records:
        made = r.meta.get("mcq_construction")
        if isinstance(made, Mapping) and r.metrics.get("mcq_options"):
            why = made.get("why")
            found[f"{made.get('by')} ({why})" if why else str(made.get("by"))] += 1
    return dict(sorted(found.items()))


def mcq_options_origin(builders: Mapping[str, int]) -> str:
    """The MCQ section's provenance clause: which construction made the options, with counts when mixed."""
    if not builders or set(builders) == {"heuristic"}:
        return HEURISTIC_OPTIONS
    parts = []
    for label, count in builders.items():
        if label.startswith("model: "):
            parts.append(f"{count} selected and rewritten by {label.removeprefix('model: ')}, as the paper's model did")
        elif label == "dataset":
            parts.append(f"{count} the release's own")
        else:
            parts.append(f"{count} chosen by simrun's heuristic{label.removeprefix('heuristic')}")
    return "options: " + "; ".join(parts)


def demographics_section() -> Section:
    """The paper's Table 5, as a labelled absence."""
    return Section(
        "Demographic groups (TutorCaseBench Table 5)",
        (Note(DEMOGRAPHICS_ABSENT),),
        key="cases-demographics",
        provenance="TutorCaseBench Table 5; absent: the public data carries no region, education level or gender",
    )


def mcq_plan_notes(scenario: Scenario, episodes: Sequence[Episode]) -> list[str]:
    """What `simrun validate` and `--dry-run` say before a run whose MCQs a model is to build: by which model, at
    how many calls, or that the heuristic will build them for want of a judge model."""
    design = scenario.design.options if scenario.design is not None else {}
    if design.get("mcq_construction") != "model":
        return []
    inputs = {
        (e.item.id, tuple(sorted(e.condition.items())))
        for e in episodes
        if e.condition.get("task") in ("mcq4", "binary")
    }
    if not inputs:
        return []
    if not scenario.models.judge:
        return [
            "MCQ options: simrun's heuristic builds them, as no judge model is configured (mcq_construction: model)"
        ]
    model = scenario.models.judge[0].model
    return [
        f"MCQ options: built by {model}, one call per MCQ ({len(inputs)} MCQs; a second when a reply is unusable), "
        "kept for its replicates"
    ]
