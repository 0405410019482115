"""ReMath's automated metrics (the paper's Table 8), computed from records by the summariser.

Each reply is compared with the item's expert reply: ROUGE-1 and ROUGE-L F1 (Google's `rouge-score`, the
reimplementation of ROUGE-1.5.5, with its stemmer) and sentence BLEU (`sacrebleu`, default 13a tokeniser,
exponential smoothing), both on a 0..1 scale. Self-BLEU is the paper's bigram variant: each reply's BLEU (up
to 2-grams) against all other replies of the same row, averaged — high means the replies repeat one another.
Length is the number of space-separated words, as in the paper.

Entropy differs from the paper: it used the mean predictive entropy of GPT-NeoX-20B, a 20B model this project
does not run. Here it is the Shannon entropy (nats, scipy) of each reply's lower-cased word distribution,
averaged over replies: a lexical-variety figure on another scale, not comparable with the paper's numbers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from engine import lazy_module

from .remath_model import AutomatedRow

if TYPE_CHECKING:
    import numpy as np
    import sacrebleu
    from rouge_score import rouge_scorer
    from scipy import stats
else:
    np = lazy_module("numpy")
    rouge_scorer = lazy_module("rouge_score.rouge_scorer")
    sacrebleu = lazy_module("sacrebleu")
    stats = lazy_module("scipy.stats")


__all__ = ("AUTOMATED_METRICS", "automated_metrics", "reply_scores", "self_bleu", "word_entropy")

AUTOMATED_METRICS = ("rouge1", "rougeL", "bleu", "self_bleu", "entropy", "length")


@cache
def _rouge() -> Any:
    return rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=True)


@cache
def _bleu(order: int) -> sacrebleu.BLEU:
    return sacrebleu.BLEU(max_ngram_order=order, effective_order=True)


def word_entropy(text: str) -> float:
    """Shannon entropy (nats) of the reply's lower-cased word distribution; 0 for one repeated word or none."""
    counts = list(Counter(text.lower().split()).values())
    return float(stats.entropy(counts)) if counts else 0.0


def reply_scores(reply: str, reference: str) -> dict[str, float]:
    """ROUGE-1/L F1, BLEU (0..1), entropy and length of one reply against one expert reply."""
    rouge = _rouge().score(reference, reply)
    return {
        "rouge1": float(rouge["rouge1"].fmeasure),
        "rougeL": float(rouge["rougeL"].fmeasure),
        "bleu": float(_bleu(4).sentence_score(reply, [reference]).score) / 100.0,
        "entropy": word_entropy(reply),
        "length": float(len(reply.split())),
    }


def self_bleu(replies: Sequence[str]) -> float | None:
    """Mean bigram BLEU (0..1) of each reply against all the others; None below two replies."""
    if len(replies) < 2:
        return None
    scores = [
        _bleu(2).sentence_score(reply, [other for j, other in enumerate(replies) if j != i]).score / 100.0
        for i, reply in enumerate(replies)
    ]
    return float(np.mean(scores))


def automated_metrics(given: str, pairs: Sequence[tuple[str, str]]) -> AutomatedRow:
    """Table 8's row for `given`: means over `(reply, expert reply)` pairs, and Self-BLEU over the replies."""
    scored = [reply_scores(reply, reference) for reply, reference in pairs if reference.strip()]

    def mean(metric: str) -> float | None:
        return float(np.mean([s[metric] for s in scored])) if scored else None

    return AutomatedRow(
        given=given,
        n=len(scored),
        rouge1=mean("rouge1"),
        rougeL=mean("rougeL"),
        bleu=mean("bleu"),
        entropy=mean("entropy"),
        length=mean("length"),
        self_bleu=self_bleu([reply for reply, _ in pairs]),
    )
