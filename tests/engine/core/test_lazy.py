"""engine.lazy_module: a module stand-in that imports on first attribute access and keeps what it handed out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine import lazy_module

ROOT = Path(__file__).resolve().parents[3]


def test_lazy_module_imports_on_first_attribute_only() -> None:
    code = (
        "import sys\n"
        "from engine import lazy_module\n"
        "fractions = lazy_module('fractions')\n"
        "assert 'fractions' not in sys.modules\n"
        "assert fractions.Fraction(1, 2) + fractions.Fraction(1, 2) == 1\n"
        "assert 'fractions' in sys.modules and fractions.Fraction is sys.modules['fractions'].Fraction\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_lazy_module_keeps_attributes_and_reports_missing_ones() -> None:
    statistics = lazy_module("statistics")
    assert statistics.median([3, 1, 2]) == 2
    assert "median" in vars(statistics)  # kept: the next access is a plain attribute read
    with pytest.raises(AttributeError):
        _ = statistics.no_such_function
    with pytest.raises(AttributeError):
        _ = statistics.__wrapped__  # introspection never triggers an import
