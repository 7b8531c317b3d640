"""The pool schedule a straggler verdict's bound comes from: tasks handed out in order,
each to the worker free first."""

from __future__ import annotations

import pandas as pd
import pytest

from rlscope.analysis.processes.tasks import ROW_COLUMNS, first_gain, makespan


def test_makespan():
    assert makespan([1.0, 1.0, 1.0, 1.0], 2) == 2.0
    assert makespan([0.1, 0.1, 0.1, 1.0], 2) == pytest.approx(1.1)
    assert makespan([1.0, 0.1, 0.1, 0.1], 2) == pytest.approx(1.0)
    assert makespan([0.5], 4) == 0.5 and makespan([], 2) == 0.0


def test_first_gain_from_recorded_rows():
    # Call 1 of f on two workers: three 0.1 s items, then a 1 s one (item 3).
    times = [0.1, 0.1, 0.1, 1.0]
    rows = pd.DataFrame([(100 + i % 2, "f", 1, i, 0, int(t * 1e9), t, 7)
                         for i, t in enumerate(times)], columns=ROW_COLUMNS)
    other = pd.DataFrame([(100, "g", 1, 0, 0, 10**9, 1.0, 7)], columns=ROW_COLUMNS)
    now, first, workers = first_gain(pd.concat([rows, other]), "f", 1)
    assert workers == 2
    assert now == pytest.approx(1.1) and first == pytest.approx(1.0)
    # The same on two threads of one process (a thread pool): two workers too.
    threads = rows.assign(pid=100, tid=[10 + i % 2 for i in range(len(times))])
    assert first_gain(threads, "f", 1) == (now, first, 2)
