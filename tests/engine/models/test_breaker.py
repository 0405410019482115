"""The circuit breaker's rule, enumerated by hand, and the `--max-errors` parser on any input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core._errors import ProviderError, QuotaExhausted, ScenarioError
from engine.models._breaker import Breaker, BreakerPolicy, ErrorLimit, parse_max_errors

DOWN = ProviderError("openai/m", "connection failed (ConnectError)", endpoint="http://h/v1")


def _feed(outcomes: str, policy: BreakerPolicy | None = None, error: ProviderError = DOWN) -> tuple[int | None, str]:
    """Feed `outcomes` ('x' failed call, '.' good call); the 1-based call at which the breaker opened."""
    opened: list[str] = []
    breaker = Breaker("tutor openai/m", opened.append, policy)
    for number, outcome in enumerate(outcomes, 1):
        if outcome == "x":
            breaker.failure(error)
        else:
            breaker.success()
        if opened:
            return number, opened[0]
    return None, ""


@pytest.mark.parametrize(
    ("outcomes", "opens_at"),
    [
        ("xxxx", None),
        ("xxxxx", 5),
        ("xxxx.xxxx.xxxx.", None),  # never 5 in a row, and 12 of 15 < a full window of 20
        ("xxxx.xxxx.xxxx.xxxx.", None),  # judged on a failure only
        ("xxxx.xxxx.xxxx.xxxx.x", 21),  # a full window, 16 of the last 20 failed
        ("x." * 10 + "x", 21),  # 10 of the last 20: the 50% share
        ("x.." * 7, None),  # 7 of 20
    ],
)
def test_consecutive_failures_or_a_share_of_the_window_open_it(outcomes: str, opens_at: int | None) -> None:
    at, reason = _feed(outcomes)
    assert at == opens_at
    if at is not None:
        assert reason.startswith("tutor openai/m: ") and "http://h/v1" in reason


def test_a_final_refusal_opens_it_at_once() -> None:
    assert _feed("x", error=QuotaExhausted("openai/m", "HTTP 429: quota", status=429))[0] == 1
    assert _feed("x", error=ProviderError("openai/m", "HTTP 401: no", status=401))[0] == 1
    assert _feed("x", error=ProviderError("openai/m", "HTTP 400: bad", status=400))[0] is None


def test_it_opens_once() -> None:
    opened: list[str] = []
    breaker = Breaker("e", opened.append, BreakerPolicy(consecutive=2))
    for _ in range(6):
        breaker.failure(DOWN)
    assert len(opened) == 1


@given(text=st.text(max_size=12))
def test_max_errors_parses_or_refuses_any_text(text: str) -> None:
    try:
        limit = parse_max_errors(text)
    except ScenarioError as exc:
        assert "--max-errors" in str(exc)
    else:
        assert isinstance(limit, ErrorLimit) and limit.bound(660) >= 0
        assert (limit.count is None) != (limit.percent is None)
