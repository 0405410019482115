"""Small, exact text checks shared by the simulator and the deterministic judges."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

__all__ = (
    "STOPWORDS",
    "brief",
    "content_words",
    "mentions_answer",
    "numbers_in",
    "parse_json_object",
    "word_count",
)

_NUMBER = re.compile(r"(?<![\w.])[-−]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])[-−]?\d+(?:\.\d+)?(?![\w])")
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)
_NUMERIC_ANSWER = re.compile(r"^-?\d+(?:\.\d+)?$")
STOPWORDS = frozenset(
    (
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "can",
        "can't",
        "do",
        "does",
        "don't",
        "each",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "him",
        "his",
        "how",
        "i",
        "i'm",
        "if",
        "in",
        "into",
        "is",
        "it",
        "it's",
        "its",
        "just",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "one",
        "or",
        "our",
        "she",
        "so",
        "such",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "they",
        "this",
        "to",
        "up",
        "us",
        "was",
        "we",
        "what",
        "when",
        "which",
        "who",
        "will",
        "with",
        "you",
        "your",
    )
)
"""Function words left out when texts are compared by the words they share."""
_WORD = re.compile(r"[a-z][a-z']+")


def numbers_in(text: str) -> list[Decimal]:
    """Every number written in `text`, exactly (thousands separators and a Unicode minus understood)."""
    found: list[Decimal] = []
    for match in _NUMBER.finditer(text):
        token = match.group().replace(",", "").replace("−", "-").rstrip(".")
        try:
            found.append(Decimal(token))
        except InvalidOperation:
            continue
    return found


def mentions_answer(text: str, answer: str) -> bool:
    """Whether `text` states `answer`: the same number anywhere, or the same phrase as a whole word."""
    answer = answer.strip()
    if not answer:
        return False
    if _NUMERIC_ANSWER.match(answer):
        target = Decimal(answer)  # exact: "2.50" states 2.5, but 1000000001 never states 1000000000
        return any(value == target for value in numbers_in(text))
    return re.search(rf"(?<!\w){re.escape(answer)}(?!\w)", text, flags=re.IGNORECASE) is not None


def word_count(text: str) -> int:
    return len(text.split())


def parse_json_object(text: str) -> Any:
    """The JSON object in a model's reply, tolerating a code fence or prose around it."""
    cleaned = _FENCE.sub("", text.strip())
    try:
        return orjson.loads(cleaned)
    except orjson.JSONDecodeError:
        start, end = cleaned.find("{"), cleaned.rfind("}")
        if start == -1 or end <= start:
            raise
        return orjson.loads(cleaned[start : end + 1])


def brief(text: str, limit: int = 200) -> str:
    """`text` shortened for a message: the first line always whole, then whole words up to `limit` characters, so
    an error never ends mid-word (a validation error's first line names the model, the next ones the fields)."""
    first, _, rest = text.strip().partition("\n")
    if not rest or len(first) >= limit:
        return first
    kept = first
    for word in " ".join(rest.split()).split(" "):
        if len(kept) + 1 + len(word) > limit:
            return kept + " …"
        kept += (" | " if kept == first else " ") + word
    return kept


def content_words(text: str) -> list[str]:
    """Lower-case words of `text` without stop words: what lexical similarity and the sim judges compare."""
    return [word for word in _WORD.findall(text.lower()) if word not in STOPWORDS]
