"""The `sim` provider's embeddings (`sim/embed`): a deterministic stand-in for an embedding model, offline.

A text becomes a hashed bag of features, so texts that share words, or only parts of words, point the same way:

* every lower-cased word (`[a-z0-9]` runs, with an apostrophe suffix such as `don't`), and
* every character trigram of each word padded with `<` and `>` (`panicked` and `panicking` share `<pa`, `pan`,
  `ani`, `nic`, `ick`), which no word-level method sees.

Each feature counts `1 + ln(count)` (sublinear, so a repeated word does not dominate) and is added with a sign
to one of `dimensions` coordinates, both taken from its BLAKE2b hash (feature hashing: collisions cancel in
expectation instead of piling up). The vector is then scaled to unit length; a text without any word embeds as
the first basis vector. So an embedding is a pure function of the text and `dimensions` — the same in every
process, on every machine — its cosine with another is their dot product, and a text's word order does not
matter. It is not a language model: synonyms with no letters in common (`quiz`, `test`) are unrelated to it.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

__all__ = ("SimEmbedParams", "embed_text", "embed_texts", "features")

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


class SimEmbedParams(BaseModel):
    """Knobs of `sim/embed` (the model spec's `params`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    dimensions: int = Field(default=512, ge=8, le=8192)
    """Length of every vector."""
    latency_s: float = Field(default=0.0, ge=0)
    """Delay per request (not per text), as a real endpoint would add."""


def features(text: str) -> Counter[str]:
    """The hashed features of `text` with their counts: `w:` words and `c:` character trigrams."""
    found: Counter[str] = Counter()
    for word in _WORD.findall(text.lower()):
        found["w:" + word] += 1
        padded = f"<{word}>"
        found.update("c:" + padded[i : i + 3] for i in range(len(padded) - 2))
    return found


def _slot(feature: str, dimensions: int) -> tuple[int, float]:
    digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
    return digest % dimensions, 1.0 if digest >> 63 else -1.0


def embed_text(text: str, dimensions: int = 512) -> list[float]:
    """One unit-length vector of `dimensions` floats."""
    vector = [0.0] * dimensions
    for feature, count in features(text).items():
        index, sign = _slot(feature, dimensions)
        vector[index] += sign * (1.0 + math.log(count))
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if norm == 0.0:  # no word, or (rarely) every feature cancelled out
        vector[0] = norm = 1.0
    return [x / norm for x in vector]


def embed_texts(texts: Sequence[str], dimensions: int = 512) -> list[list[float]]:
    return [embed_text(text, dimensions) for text in texts]
