"""Small, exact text checks shared by the simulator and the deterministic judges."""

from __future__ import annotations

import re

__all__ = ("mentions_answer", "numbers_in", "word_count")

_NUMBER = re.compile(r"(?<![\w.])[-−]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])[-−]?\d+(?:\.\d+)?(?![\w])")
_NUMERIC_ANSWER = re.compile(r"^-?\d+(?:\.\d+)?$")


def numbers_in(text: str) -> list[float]:
    """Every number written in `text` (thousands separators and a Unicode minus understood)."""
    found: list[float] = []
    for match in _NUMBER.finditer(text):
        token = match.group().replace(",", "").replace("−", "-").rstrip(".")
        try:
            found.append(float(token))
        except ValueError:
            continue
    return found


def mentions_answer(text: str, answer: str) -> bool:
    """Whether `text` states `answer`: the same number anywhere, or the same phrase as a whole word."""
    answer = answer.strip()
    if not answer:
        return False
    if _NUMERIC_ANSWER.match(answer):
        target = float(answer)
        tolerance = 1e-9 * max(1.0, abs(target))
        return any(abs(value - target) <= tolerance for value in numbers_in(text))
    return re.search(rf"(?<!\w){re.escape(answer)}(?!\w)", text, flags=re.IGNORECASE) is not None


def word_count(text: str) -> int:
    return len(text.split())
