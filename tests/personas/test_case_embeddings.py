"""Case retrieval by a configured embedding provider, end to end and offline: `simrun embed` with `sim/embed`
writes the vectors, the `cases` source ranks neighbours by them, and the reference prompts follow."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from agents.cases import reference_strategies
from engine import ITEM_SOURCES, Item, ScenarioError
from engine.cli._main import main
from engine.models.sim._embed import embed_text
from personas.case_retrieval import case_text
from personas.cases import Case, CaseFile, CaseSource, builtin_cases

BUILTIN = Path(__file__).resolve().parents[2] / "personas" / "cases.yaml"

# Case `panic` shares whole words with `bored` (fifth, grader) but only word parts with `quiz` (panicked,
# fraction, test): word-level TF-IDF ranks `bored` first, the character-trigram sim embedding ranks `quiz` first.
_FIXTURE = {
    "panic": ("A fifth grader panicking over fractions homework.", "Here is the worksheet.",
              "I'm panicking, fractions never make sense!"),
    "quiz": ("A learner who panicked over fraction tests.", "We could review.",
             "I panicked and failed every fraction test."),
    "bored": ("A fifth grader bored by reading.", "Open the book.", "Reading is boring."),
    "spell": ("A seventh grader who hates spelling.", "Next list.", "Spelling is pointless."),
}  # fmt: skip


def _fixture_cases(tmp_path: Path) -> Path:
    template = builtin_cases()[0]
    cases: list[Case] = []
    for case_id, (context, tutor, student) in _FIXTURE.items():
        dialogue = [
            template.dialogue[0].model_copy(update={"text": tutor}),
            template.dialogue[-1].model_copy(update={"text": student}),
        ]
        cases.append(template.model_copy(update={"id": case_id, "minimal_context": context, "dialogue": dialogue}))
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump(CaseFile(cases=cases).model_dump(mode="json"), sort_keys=False), encoding="utf-8")
    return path


def _load(path: Path, **options: Any) -> dict[str, Item]:
    return {item.id: item for item in ITEM_SOURCES.get("cases")(path, options)}


def _first_neighbour(item: Item) -> str:
    return str(item.data["neighbours"][0]["id"])


def test_provider_embeddings_change_the_neighbours_and_the_references(tmp_path: Path) -> None:
    path = _fixture_cases(tmp_path)
    assert main(["embed", str(path), "--model", "sim/embed", "-o", str(tmp_path / "vectors.json")]) == 0
    lexical = _load(path)
    embedded = _load(path, retrieval="embeddings", vectors="vectors.json", references=1)
    assert _first_neighbour(lexical["panic"]) == "bored"
    assert _first_neighbour(embedded["panic"]) == "quiz"
    assert embedded["panic"].data["retrieval"] == "embeddings"
    assert [ref.case_id for ref in reference_strategies(embedded["panic"], "immediate")] == ["quiz"]
    # the similarity recorded is the cosine of the two vectors the provider returned
    vectors = orjson.loads((tmp_path / "vectors.json").read_bytes())
    cosine = math.fsum(x * y for x, y in zip(vectors["panic"], vectors["quiz"], strict=True))
    assert embedded["panic"].data["neighbours"][0]["similarity"] == pytest.approx(cosine, abs=1e-6)


def test_builtin_cases_under_sim_embeddings(tmp_path: Path) -> None:
    """The built-in set embeds case by case, and ranks every other case for each (most similar first)."""
    out = tmp_path / "builtin.json"
    assert main(["embed", str(BUILTIN), "--model", "sim/embed", "-o", str(out)]) == 0
    items = _load(BUILTIN, retrieval="embeddings", vectors=str(out))
    assert len(items) == 15
    for item in items.values():
        similarities = [near["similarity"] for near in item.data["neighbours"]]
        assert len(similarities) == 14 and similarities == sorted(similarities, reverse=True)
        assert item.id not in {near["id"] for near in item.data["neighbours"]}


def test_command_embeds_what_retrieval_compares(tmp_path: Path) -> None:
    """The file holds `embed_text` of each case's retrieval text (minimal context and dialogue), by case id."""
    out = tmp_path / "v.json"
    assert main(["embed", str(BUILTIN), "--model", "sim/embed", "-o", str(out)]) == 0
    texts = CaseSource().retrieval_texts(BUILTIN, {})
    assert texts == {case.id: case_text(case) for case in builtin_cases()}
    assert orjson.loads(out.read_bytes()) == {case_id: embed_text(text) for case_id, text in texts.items()}


def test_retrieval_texts_honour_the_selection() -> None:
    texts = CaseSource().retrieval_texts(BUILTIN, {"challenge_types": ["academic_struggle"], "limit": 2})
    assert len(texts) == 2


def test_missing_vectors_point_at_the_command(tmp_path: Path) -> None:
    path = _fixture_cases(tmp_path)
    with pytest.raises(ScenarioError, match="simrun embed"):
        _load(path, retrieval="embeddings", vectors="absent.json")
    (tmp_path / "stale.json").write_bytes(orjson.dumps({"panic": [1.0, 0.0]}))
    with pytest.raises(ScenarioError, match="rerun `simrun embed`"):
        _load(path, retrieval="embeddings", vectors="stale.json")
