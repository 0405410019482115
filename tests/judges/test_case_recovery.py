"""Case-recovery rate: each response's nearest other response (TF-IDF) must answer the same case."""

from __future__ import annotations

from engine import EpisodeRecord
from judges.case_recovery import case_recovery


def _record(case: str, number: int, text: str, response: str = "immediate") -> EpisodeRecord:
    return EpisodeRecord(
        id=f"{case}|{number}",
        scenario="s",
        item_id=case,
        condition={},
        replicate=0,
        seed=0,
        status="ok",
        metrics={"response": response, "text": text},
        started_at="",
        finished_at="",
    )


def _text(record: EpisodeRecord) -> str:
    return str(record.metrics["text"])


def test_case_specific_responses_are_recovered_and_generic_ones_are_not() -> None:
    records = [
        _record("a", 1, "offer the blue puzzle pieces first"),
        _record("a", 2, "offer blue puzzle pieces now"),
        _record("b", 1, "walk to the quiet reading corner together"),
        _record("b", 2, "a quiet reading corner walk"),
        _record("c", 1, "take a deep breath and try again"),
        _record("c", 2, "take a deep breath and try again"),
        _record("d", 1, "take a deep breath and try again please"),
    ]
    (row,) = case_recovery(records, _text)
    # a, b and c's pairs find each other (6 of 7); d's nearest is one of c's generic answers
    assert (row.response, row.k, row.n) == ("immediate", 6, 7)
    # candidates from the same case: a 1, a 1, b 1, b 1, c 1, c 1, d 0 of 6 each
    assert row.chance == 6 / 42


def test_no_case_with_two_responses_means_no_row() -> None:
    records = [_record(case, 1, f"text {case}") for case in "abc"] + [_record("a", 2, "x", response="long_term")]
    assert case_recovery(records, _text) == []
