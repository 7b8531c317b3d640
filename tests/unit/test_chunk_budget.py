"""The chunk calibration's time budget: the driver ends the calibration run when the next
pair of chunks would end past it, never before MIN_CHUNKS, and only after a whole pair."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlscope.calibration.calibrate import MAX_BUDGET_S, MICROBENCH_S, default_budget_s
from rlscope.inprocess import chunk_copies as ch


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(ch.time, "monotonic", c)
    return c


def driver(tmp_path: Path, budget_s: float | None) -> ch.Driver:
    return ch.Driver(tmp_path, [], 0.25, 40, "native", budget_s=budget_s)


def test_the_next_pair_must_fit(tmp_path: Path, clock: Clock):
    d = driver(tmp_path, 30.0)  # started at t=100
    clock.t = 105.0  # start-up: the first progress report
    d.t_first = clock.t
    d.chunk = 4
    clock.t = 113.0  # 2 s a chunk: the next pair ends at 117, 17 s in
    assert not d.budget_spent()
    d.chunk = 6
    clock.t = 117.0  # the next pair would end at 121: 21 s in
    assert not d.budget_spent()
    d.chunk = 10
    clock.t = 125.0  # ... at 129: 29 s in
    assert not d.budget_spent()
    d.chunk = 12
    clock.t = 129.0  # ... at 133: 33 s, past the budget
    assert d.budget_spent()
    d.chunk = 13  # never between the two chunks of a pair
    assert not d.budget_spent()


def test_at_least_min_chunks_and_no_budget_no_limit(tmp_path: Path, clock: Clock):
    d = driver(tmp_path, 1.0)
    d.t_first = clock.t
    clock.t += 60.0
    for n in range(ch.MIN_CHUNKS):
        d.chunk = n
        assert not d.budget_spent()
    d.chunk = ch.MIN_CHUNKS
    assert d.budget_spent()
    unbounded = driver(tmp_path, None)
    unbounded.t_first, unbounded.chunk = clock.t - 1000, 38
    assert not unbounded.budget_spent()


def test_the_default_budget_follows_the_run():
    assert default_budget_s(60.0) == 60.0 - MICROBENCH_S
    assert default_budget_s(1.0) == 0.0  # MIN_CHUNKS still measured
    assert default_budget_s(3600.0) == MAX_BUDGET_S


def test_a_bad_budget_variable_means_none():
    assert ch.parse_budget("12.5") == 12.5
    assert ch.parse_budget("soon") is None and ch.parse_budget(None) is None
