"""Trends (rlscope.analysis.trends) on synthetic timelines with known numbers: the sweep's
per-interval rows add up to the operations table, cut at progress reports or in equal
slices of time; the drift rule names a 2x growth through +-30% noise and names nothing on
the same noise without growth."""

from __future__ import annotations

import numpy as np
import pytest

from rlscope.analysis import trends
from rlscope.analysis.engine import synthetic
from rlscope.analysis.engine.overlap import analyze_process
from rlscope.analysis.engine.paths import NameTable, PathTable
from rlscope.analysis.engine.trendbins import MAX_BUCKETS, trend_grid
from rlscope.analysis.frames import Analysis, ProcessMeta
from rlscope.trace import format as fmt
from rlscope.trace.data import Progress

MS = 1_000_000


def _loop(n: int, sim_ms, inf_ms, steps: int = 8, progress: bool = True, pid: int = 100,
          nested: bool = False):
    """A loop of n iterations: simulation (with a nested env.step when ``nested``), then
    inference; a progress report after each."""
    ev, prog, t = [(0, 0, fmt.PROCESS_START, "")], [], 0
    for i in range(n):
        sim, inf = int(sim_ms(i) * MS), int(inf_ms(i) * MS)
        ev.append((t, 0, fmt.OPERATION_BEGIN, "simulation"))
        if nested:
            ev += [(t + 1, 0, fmt.OPERATION_BEGIN, "env.step"),
                   (t + sim - 1, 0, fmt.OPERATION_END, "env.step")]
        ev.append((t + sim, 0, fmt.OPERATION_END, "simulation"))
        t += sim
        ev += [(t, 0, fmt.OPERATION_BEGIN, "inference"), (t + inf, 0, fmt.OPERATION_END,
                                                            "inference")]
        t += inf
        prog.append((t, (i + 1) * steps, n * steps))
    ev.append((t + 1, 0, fmt.PROCESS_END, ""))
    return synthetic.process_trace(ev, progress=prog if progress else (), pid=pid)


def _analysis(*procs, batch_events=None) -> Analysis:
    paths, phases = PathTable(), NameTable()
    results = [analyze_process(p, paths, phases, batch_events=batch_events) for p in procs]
    metas = [ProcessMeta(p.pid, 1, p.header.process_name, "synthetic", True, len(p.events),
                         p.metadata, p.progress, p.header) for p in procs]
    return Analysis(".", {}, results, metas, paths, phases, [])


def test_grid_by_progress_and_by_time() -> None:
    t = np.arange(1, 501, dtype=np.int64) * MS
    g = trend_grid(Progress(t, np.zeros(500, np.uint32), t // MS, -np.ones(500, np.int64)),
                   0, 501 * MS)
    assert g.by_progress and g.n == MAX_BUCKETS
    assert g.edges[0] == t[0] and g.edges[-1] == t[-1]  # first report to last
    g = trend_grid(Progress.empty(), 0, 2_000 * MS)
    assert not g.by_progress and g.n == 20  # no shorter than 0.1 s
    assert trend_grid(Progress.empty(), 0, 50 * MS).n == 0


@pytest.mark.parametrize("batch", [None, 7])
def test_intervals_add_up_to_the_operations_table(batch) -> None:
    a = _analysis(_loop(120, lambda i: 1 + i % 3, lambda i: 2, nested=True),
                  batch_events=batch)
    iv = a.trend_intervals()
    ops = a.trend_operations(iv)
    assert len(iv) == 100 and (iv["by"] == "progress").all()
    assert iv["steps"].sum() == 119 * 8  # first report to last
    table = a.operations().set_index("operation")
    for op in ("simulation", "simulation > env.step", "inference"):
        got = ops.loc[ops["operation"] == op, "wall_s"].sum()
        calls = ops.loc[ops["operation"] == op, "calls"].sum()
        # The first iteration's operations are before the first report: outside the grid.
        first = {"simulation": 1e-3, "simulation > env.step": 1e-3 - 2e-9,
                 "inference": 2e-3}[op]
        assert got == pytest.approx(table.loc[op, "wall_s"] - first, abs=1e-9)
        assert calls == table.loc[op, "calls"] - 1
    assert ops.loc[ops["operation"] == "inference", "ms_per_step"].to_numpy() \
        == pytest.approx(2 / 8 * np.ones(100), rel=1e-6)


def test_process_without_progress_follows_the_runs_progress() -> None:
    main = _loop(200, lambda i: 1, lambda i: 1, pid=100)
    worker = _loop(200, lambda i: 1.5, lambda i: 0.5, progress=False, pid=101)
    a = _analysis(main, worker)
    iv = a.trend_intervals()
    w = iv[iv["pid"] == 101]
    assert (w["by"] == "time").all() and len(w) == 4  # 0.4 s of recording
    # Steps from the main process's progress at the same times: 8 per 2 ms.
    assert w["steps_per_s"].median() == pytest.approx(4000, rel=0.05)


def _drifts(sim_ms, seed: int):
    rng = np.random.default_rng(seed)
    noise = rng.uniform(0.7, 1.3, size=(2, 300))
    a = _analysis(_loop(300, lambda i: sim_ms(i) * noise[0, i], lambda i: noise[1, i]))
    iv = a.trend_intervals()
    return trends.drifts(iv, a.trend_operations(iv))


@pytest.mark.parametrize("seed", range(8))
def test_noise_names_no_drift(seed: int) -> None:
    assert _drifts(lambda i: 1.0, seed) == []


@pytest.mark.parametrize("seed", range(8))
def test_growth_through_noise_is_named(seed: int) -> None:
    found = _drifts(lambda i: 1.0 + i / 300, seed)  # 1 ms -> 2 ms per iteration
    sim = [d for d in found if d.operation == "simulation"]
    assert len(sim) == 1 and 1.4 < sim[0].ratio < 2.2, found
    assert sim[0].text.startswith("simulation per timestep grew ")
    assert "between 10% and 90% of the run" in sim[0].text
    assert not any(d.operation == "inference" for d in found)


def test_falling_rate_is_named() -> None:
    found = _drifts(lambda i: 1.0 + 3 * i / 300, 0)  # 2 ms -> 5 ms per iteration
    rate = [d for d in found if d.operation == "steps/s"]
    assert len(rate) == 1 and rate[0].ratio < 1 / 1.5, found
    assert rate[0].text.startswith("timesteps/s fell ")


def test_metrics_table() -> None:
    md = {f"{fmt.META_METRIC_PREFIX}0": [2 * MS, 8, {"reward": 1.5}],
          f"{fmt.META_METRIC_PREFIX}1": [4 * MS, 16, {"reward": 2.5, "loss": 0.1}],
          "other": 3}
    m = trends.metric_table([(100, 0, md)], t0=0)
    assert m[["timesteps", "name", "value"]].values.tolist() == [
        [8, "reward", 1.5], [16, "loss", 0.1], [16, "reward", 2.5]]


def test_aggregated_rows_shared_in_blocks_add_up_the_same(monkeypatch) -> None:
    """A bounded trace's aggregate rows are shared out over the intervals a block of rows
    at a time (memory): blocks of 7 rows give exactly what one block gives, and the
    shares add up to the rows."""
    from rlscope.analysis.engine import trendsums
    from rlscope.analysis.engine.trendbins import TrendGrid

    rng = np.random.default_rng(3)
    edges = np.arange(0, 11 * 100 * MS, 100 * MS, dtype=np.int64)
    steps = np.cumsum(rng.integers(1, 50, len(edges))).astype(np.int64)

    totals = {"ns": 0, "calls": 0}

    def run() -> dict[str, np.ndarray]:
        totals.update(ns=0, calls=0)
        s = trendsums.TrendSums(TrendGrid(edges, steps), int(edges[-1]))
        begins = np.array([50 * MS, 400 * MS], np.int64)
        ends = np.array([300 * MS, 900 * MS], np.int64)
        s.gap_times(0, np.r_[begins, ends],
                    np.r_[[fmt.AGGREGATED_BEGIN] * 2, [fmt.AGGREGATED_END] * 2])
        for gap, (g0, g1) in enumerate(zip(begins, ends, strict=True)):
            writes = np.sort(rng.integers(g0, g1, 30))
            for i, u in enumerate(writes):
                cat, ns, calls = -1 if i % 4 == 0 else i % 5, int(rng.integers(1, 10**7)), \
                    int(rng.integers(1, 100))
                s.gap_row(0, gap, 0, 1 + i % 3, cat, ns, calls, int(u))
                totals["calls" if cat < 0 else "ns"] += calls if cat < 0 else ns
        return s.result(1, 4)

    state = rng.bit_generator.state
    whole = run()
    monkeypatch.setattr(trendsums, "_ROWS", 7)
    rng.bit_generator.state = state
    blocks = run()
    assert whole.keys() == blocks.keys()
    for k in whole:
        np.testing.assert_array_equal(whole[k], blocks[k])
    assert int(blocks["trend_call_n"].sum()) == totals["calls"]  # calls rounded to add up
    assert abs(float(blocks["trend_ns"].sum()) - totals["ns"]) <= 2 * len(edges) * 60
