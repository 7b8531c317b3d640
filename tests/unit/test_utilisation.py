"""The pieces of the sampled-vs-measured contrast: interval unions, coverage before a
time, the 0.1 s grid, phase spans and the per-phase rows, on hand-made data."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlscope.analysis.engine.timebins import TimeBins
from rlscope.analysis.intervals import covered_before
from rlscope.analysis.intervals import union as merged
from rlscope.analysis.processes.utilisation import (
    STARTUP_PHASE,
    contrast,
    gpu_truth,
    phase_spans,
)
from rlscope.trace.gpu import GpuActivities
from rlscope.trace.samples import Samples, rates

intervals = st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 200)), max_size=30)


def _brute(iv: list[tuple[int, int]], lo: int, hi: int) -> int:
    cover = np.zeros(1300, bool)
    for s, d in iv:
        cover[s:s + d] = True
    return int(cover[lo:hi].sum())


@given(intervals, st.integers(0, 1300), st.integers(0, 1300))
def test_union_coverage_matches_brute_force(iv, a, b):
    lo, hi = min(a, b), max(a, b)
    s = np.array([x for x, _ in iv], np.int64)
    e = s + np.array([d for _, d in iv], np.int64)
    ms, me = merged(s, e)
    assert np.all(ms[1:] > me[:-1])  # disjoint, sorted
    got = covered_before(ms, me, np.array([hi]))[0] - covered_before(ms, me, np.array([lo]))[0]
    assert got == _brute(iv, lo, hi)


@given(intervals, st.integers(1, 300))
def test_time_bins_match_brute_force(iv, width):
    bins = TimeBins(100, 1250, width)
    s = np.array([x for x, _ in iv], np.int64)
    d = np.array([y for _, y in iv], np.int64)
    bins.add(s, d)
    for k in range(bins.n):
        lo, hi = 100 + k * width, 100 + (k + 1) * width
        want = sum(max(0, min(x + y, hi, 100 + bins.n * width) - max(x, lo)) for x, y in iv)
        assert bins.ns[k] == want


def test_phase_spans_and_rates():
    s, e, ph = phase_spans((0, 100), np.array([10, 10, 40]), np.array([1, 2, 0]))
    assert s.tolist() == [0, 10, 40] and e.tolist() == [10, 40, 100]
    assert ph.tolist() == [0, 2, 0]  # the empty span [10, 10) is dropped
    # The main thread's start-up: the span before its first event, a phase of its own.
    s, e, ph = phase_spans((0, 100), np.array([10, 40]), np.array([1, 0]), startup_ns=4)
    assert s.tolist() == [0, 4, 10, 40] and e.tolist() == [4, 10, 40, 100]
    assert ph.tolist() == [STARTUP_PHASE, 0, 1, 0]
    k, a, b, pct = rates(np.array([0, 10, 0, 20]), np.array([7, 7, 8, 8]),
                         np.array([0, 5, 100, 120]))
    assert k.tolist() == [7, 8] and a.tolist() == [0, 0] and b.tolist() == [10, 20]
    assert pct.tolist() == [50.0, 100.0]


def test_contrast_rows():
    """One process, phase 1 from 0 to 1 s, none after: 10 NVML samples per phase (all
    busy in phase 1, half in phase 0); kernels of 0.1 s in phase 1 only."""
    ms = 1_000_000
    t = np.arange(1, 21) * 100 * ms  # samples at 0.1 .. 2.0 s
    util = np.r_[np.full(10, 80), np.tile([0, 40], 5)].astype(np.uint32)
    z = np.zeros(0, np.int64)
    samples = Samples(100 * ms, np.r_[0, t], np.full(21, 5), np.r_[0, t // 2],
                      np.full(21, 1 << 20), z, z.astype(np.uint32), z,
                      t, np.zeros(20, np.uint32), util, util, np.full(20, 1 << 30),
                      np.full(20, 1500, np.uint32))
    g = GpuActivities(np.array([1, 1], np.uint8), np.zeros(2, np.uint32),
                      np.zeros(2, np.uint32), np.array([100, 500]) * ms,
                      np.array([200, 600]) * ms, np.array([1, 2], np.uint64),
                      np.zeros(2, np.uint32), np.zeros(2, np.int64), [""])
    span = (0, 2000 * ms)
    times, ids = np.array([0, 1000 * ms]), np.array([1, 0], np.int32)
    truth = gpu_truth(g, span, times, ids)
    rows = {r["phase"]: r for r in contrast(5, "p", span, times, ids, ["", "train"],
                                            {"train": 0.9}, truth, samples)}
    tr, rest = rows["train"], rows[""]
    assert tr["wall_s"] == pytest.approx(1.0) and rest["wall_s"] == pytest.approx(1.0)
    assert tr["gpu_samples"] == 10 and rest["gpu_samples"] == 10
    assert tr["sampled_gpu_busy_pct"] == 100 and tr["sampled_gpu_util_pct"] == 80
    assert rest["sampled_gpu_busy_pct"] == 50 and rest["sampled_gpu_util_pct"] == 20
    assert tr["rlscope_gpu_s"] == pytest.approx(0.2) and rest["rlscope_gpu_s"] == 0
    assert tr["rlscope_gpu_pct"] == pytest.approx(20.0)
    assert tr["rlscope_cpu_s"] == 0.9 and tr["rlscope_cpu_pct"] == pytest.approx(90.0)
    assert tr["sampled_cpu_pct"] == pytest.approx(50.0)  # cpu grows at half the wall rate
    assert tr["cpu_samples"] == 10 and tr["gpu_devices"] == "0"
    assert truth.bins[0].sum() == pytest.approx(200 * ms)


def test_a_reused_pid_keeps_its_sessions_apart():
    """Two trace files of one pid (a second rlscope.start, or a pid the system reused):
    each gets its own utilisation rows, with its own CPU time, not their sum."""
    from rlscope.analysis import analyze
    from rlscope.analysis.engine.synthetic import process_trace
    from rlscope.trace import format as fmt
    from rlscope.trace.data import Trace

    def proc(t0: int, busy_ns: int):
        return process_trace([(t0, 0, fmt.PROCESS_START, ""),
                              (t0 + 10, 0, fmt.OPERATION_BEGIN, "work"),
                              (t0 + 10 + busy_ns, 0, fmt.OPERATION_END, "work"),
                              (t0 + 20 + busy_ns, 0, fmt.PROCESS_END, "")], pid=100)

    a = analyze(Trace(None, {}, [proc(0, 1_000_000), proc(10_000_000, 3_000_000)]))
    u = a.utilisation()
    # Each session: its start-up (10 ns before the first event) and the rest.
    assert u["session"].tolist() == [0, 0, 1, 1]
    assert u["phase"].tolist() == ["(start-up)", ""] * 2
    assert u["rlscope_cpu_s"].tolist() == pytest.approx(
        [10e-9, 1_000_010e-9, 10e-9, 3_000_010e-9])
