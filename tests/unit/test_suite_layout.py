"""The test suite's own layout: test directories are not packages, so pytest imports each
test file by its base name, and two files with one name stop the whole suite at collection."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_test_file_base_names_are_unique():
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert not [n for n, k in names.items() if k > 1], names.most_common(3)
