"""The one number formatter: each form by hand-written examples, and for any value the text reads back as the value
rounded to the digits asked, with no "-0" and "–" for what is missing."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core._format import (
    MISSING,
    format_count,
    format_estimate,
    format_fixed,
    format_interval,
    format_ms,
    format_pct,
    format_points,
    format_rate,
    format_setting,
    format_sig,
    format_usd,
    pct_or_none,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (format_fixed(0.4249), "0.42"),
        (format_fixed(-0.004), "0.00"),
        (format_fixed(-0.004, signed=True), "+0.00"),
        (format_fixed(0.5, 3, signed=True), "+0.500"),
        (format_fixed(-1.25, 1, signed=True), "-1.2"),
        (format_fixed(1234.5, 1), "1,234.5"),
        (format_fixed(None), MISSING),
        (format_fixed(math.nan), MISSING),
        (format_interval(0.3, 0.55), "[0.30, 0.55]"),
        (format_interval(None, 0.55), MISSING),
        (format_estimate(0.42, 0.3, 0.55), "0.42 [0.30, 0.55]"),
        (format_estimate(0.5, -0.1, 0.9, signed=True), "+0.50 [-0.10, +0.90]"),
        (format_estimate(0.42), "0.42"),
        (format_pct(0.625), "62%"),
        (format_pct(0.6254, 1), "62.5%"),
        (format_pct(0.99985, 2), "99.98%"),
        (format_pct(-0.001), "0%"),
        (format_pct(None), MISSING),
        (pct_or_none(None), None),
        (pct_or_none(0.5), "50%"),
        (format_points(0.062, -0.01, 0.135), "+6.2 pp [-1.0, +13.5]"),
        (format_points(-0.0004), "+0.0 pp"),
        (format_points(0.187, digits=0, unit=""), "+19"),
        (format_points(0.031, unit=" pts"), "+3.1 pts"),
        (format_ms(1234.56), "1,234.6"),
        (format_ms(12.3456, 0), "12"),
        (format_sig(0.0012345), "0.00123"),
        (format_sig(123456.0, 2), "1.2e+05"),
        (format_setting(0.05), "0.05"),
        (format_setting(2.0), "2"),
        (format_setting(None), MISSING),
        (format_count(12345), "12,345"),
        (format_count(9999, compact=True), "9,999"),
        (format_count(12345, compact=True), "12.3k"),
        (format_count(4_560_000, compact=True), "4.6M"),
        (format_usd(0.01234), "$0.0123"),
        (format_usd(1234.5), "$1,234.50"),
        (format_usd(None), "price unknown"),
        (format_rate({"rate": 0.62, "low": 0.55, "high": 0.68, "n": 120}), "62% [55%, 68%]"),
        (format_rate({"rate": 0.62, "low": 0.551, "high": 0.684, "n": 120}, "precise"), "62.0% [55.1%–68.4%] n=120"),
        (format_rate({"rate": 0.62, "low": 0.55, "high": 0.68, "n": 120}, "compact"), "62 [55–68]"),
        (format_rate(None), MISSING),
    ],
)
def test_each_form_reads_as_written(text: str | None, expected: str | None) -> None:
    assert text == expected


@given(st.floats(-1e6, 1e6, allow_nan=False), st.integers(0, 4), st.booleans())
def test_a_fixed_number_reads_back_as_the_value_rounded(value: float, digits: int, signed: bool) -> None:
    text = format_fixed(value, digits, signed=signed)
    assert not text.startswith("-0") or text.strip("-0.,") != ""
    assert abs(float(text.replace(",", "")) - value) <= 0.5 * 10**-digits + 1e-9 * max(1.0, abs(value))
    assert text.startswith(("+", "-")) if signed else not text.startswith("+")
    assert text.count(".") == (1 if digits else 0)


@given(st.floats(-10, 10, allow_nan=False), st.integers(0, 3))
def test_a_share_in_percent_or_points_reads_back_as_a_hundred_times_it(value: float, digits: int) -> None:
    pct, points = format_pct(value, digits), format_points(value, digits=digits, unit="")
    for text in (pct.removesuffix("%"), points):
        assert abs(float(text.replace(",", "")) - 100 * value) <= 0.5 * 10**-digits + 1e-9 * max(1.0, abs(value))
    assert pct.endswith("%") and points.startswith(("+", "-"))
