"""Which other cases resemble this one: the retrieval behind reference-based prompts and 4-option distractors.

Similarity is computed over what the tutor sees (the minimal context and the dialogue prefix), never over the
hidden strategies, so a case's own answer key cannot leak into its neighbours' ranking. A case's relatives
(the same student, or the same scenario family: `Case.related`) are never its neighbours: in the public
release sibling scenarios of one student share one rubric, so their strategies would hand the tutor the
answer key. Two methods:

* `lexical`: TF-IDF (smoothed idf, sublinear tf) with cosine similarity, on numpy — offline and exact.
* `embeddings`: cosine of embedding vectors stored as JSON `{case_id: [float, ...]}`. `simrun embed` writes
  that file through any provider with embeddings (`openai/...` models, or the offline `sim/embed`), from the
  same texts lexical retrieval compares; vectors from any other embedder work too. Item sources load
  synchronously, so the vectors are computed beforehand, not while loading (see `engine.tools._embed`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from engine import ScenarioError, content_words, lazy_module, read_input_bytes

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .cases import Case

    Matrix = npt.NDArray[np.float64]
else:
    np = lazy_module("numpy")

__all__ = ("RETRIEVAL_METHODS", "SimilarityMethod", "case_text", "neighbours", "tfidf_similarity", "tokens")

SimilarityMethod = Callable[[Sequence[str], Sequence[str], "Path | None"], "Matrix"]
"""(case ids, case texts, vectors file) → square similarity matrix."""


def tokens(text: str) -> list[str]:
    """Lower-case content words (no stop words), the unit of lexical similarity."""
    return content_words(text)


def case_text(case: Case) -> str:
    return " ".join([case.minimal_context, *(turn.text for turn in case.dialogue)])


def tfidf_similarity(texts: Sequence[str]) -> Matrix:
    """Cosine similarity of TF-IDF vectors: tf = 1 + log(count), idf = log((1 + n) / (1 + df)) + 1."""
    counts = [Counter(tokens(text)) for text in texts]
    vocabulary = sorted(set().union(*counts)) if counts else []
    index = {word: i for i, word in enumerate(vocabulary)}
    matrix = np.zeros((len(texts), len(vocabulary)), dtype=np.float64)
    for row, counter in enumerate(counts):
        for word, count in counter.items():
            matrix[row, index[word]] = 1.0 + math.log(count)
    df = np.count_nonzero(matrix, axis=0)
    matrix *= np.log((1 + len(texts)) / (1 + df)) + 1.0
    return _cosine(matrix)


def _cosine(matrix: Matrix) -> Matrix:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit = matrix / np.where(norms > 0, norms, 1.0)
    return np.asarray(unit @ unit.T, dtype=np.float64)


def _lexical(ids: Sequence[str], texts: Sequence[str], vectors: Path | None) -> Matrix:
    del ids, vectors
    return tfidf_similarity(texts)


def _embeddings(ids: Sequence[str], texts: Sequence[str], vectors: Path | None) -> Matrix:
    del texts
    if vectors is None:
        raise ScenarioError("embedding retrieval needs a vectors file")
    try:
        raw = read_input_bytes(vectors, "case vectors file")
    except ScenarioError as exc:
        raise ScenarioError(f"{exc}; write them with `simrun embed CASES --model SPEC -o {vectors.name}`") from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ScenarioError(f"{vectors}: the case vectors are not valid JSON") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{vectors}: expected a JSON object {{case_id: [float, ...]}}")
    missing = [case_id for case_id in ids if case_id not in data]
    if missing:
        raise ScenarioError(
            f"{vectors}: no vector for case(s) {', '.join(missing[:5])}; rerun `simrun embed` on the current cases"
        )
    try:
        matrix = np.asarray([data[case_id] for case_id in ids], dtype=np.float64)
    except (TypeError, ValueError):
        raise ScenarioError(f"{vectors}: every vector must be a list of numbers of the same length") from None
    if matrix.ndim != 2 or not np.all(np.isfinite(matrix)):
        raise ScenarioError(f"{vectors}: every vector must be a list of finite numbers of the same length")
    return _cosine(matrix)


RETRIEVAL_METHODS: dict[str, SimilarityMethod] = {"lexical": _lexical, "embeddings": _embeddings}


def neighbours(
    cases: Sequence[Case], method: SimilarityMethod, *, vectors: Path | None = None
) -> list[list[tuple[Case, float]]]:
    """For each case, every unrelated other case with its similarity, most similar first (ties by case id)."""
    ids = [case.id for case in cases]
    similarity = method(ids, [case_text(case) for case in cases], vectors)
    ranked: list[list[tuple[Case, float]]] = []
    for i in range(len(cases)):
        others = [(cases[j], float(similarity[i, j])) for j in range(len(cases)) if not cases[i].related(cases[j])]
        others.sort(key=lambda pair: (-pair[1], pair[0].id))
        ranked.append(others)
    return ranked
