"""Overhead correction on synthetic traces: inject known per-event costs into a true
timeline the way book-keeping does, correct, and get the true breakdown back exactly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlscope.analysis import analyze
from rlscope.analysis.engine.synthetic import process_trace
from rlscope.analysis.overhead.correction import correct_trace
from rlscope.analysis.overhead.kinds import PAIR_KINDS
from rlscope.analysis.overhead.model import KindCost
from rlscope.trace import format as fmt
from rlscope.trace import gpu as G
from rlscope.trace.data import EnvEvents, Trace

OB, OE = fmt.OPERATION_BEGIN, fmt.OPERATION_END
BB, BE = fmt.BACKEND_CALL_BEGIN, fmt.BACKEND_CALL_END
SB, SE = fmt.SIMULATOR_CALL_BEGIN, fmt.SIMULATOR_CALL_END
WB, WE = fmt.WAIT_CALL_BEGIN, fmt.WAIT_CALL_END
EB, EE = fmt.ENV_STEP_BEGIN, fmt.ENV_STEP_END
MB, ME = fmt.MARK_CALL_BEGIN, fmt.MARK_CALL_END
START, END = fmt.PROCESS_START, fmt.PROCESS_END

COSTS = {"annotation": KindCost(200, 80, 0, "test"),
         "backend_call": KindCost(400, 60, 0, "test"),
         "simulator_call": KindCost(300, 100, 0, "test"),
         "wait_call": KindCost(350, 70, 0, "test"),
         "env_call": KindCost(500, 240, 0, "test"),
         "cuda_api": KindCost(120, 40, 0, "test"),
         "phase_marker": KindCost(250, 230, 0, "test"),
         "process": KindCost(1e6, 0, 0, "test")}


def _split(kind: int) -> tuple[float, float]:
    """(pre-stamp, post-stamp) cost of an event, as book-keeping pays it."""
    for k, (begins, ends) in PAIR_KINDS.items():
        c = COSTS[k]
        if kind in begins:
            return c.outside_ns / 2, c.inside_ns / 2
        if kind in ends:
            return c.inside_ns / 2, c.outside_ns / 2
    return 0.0, 0.0


def inject(events: list[tuple[int, int, int, str]]) -> list[tuple[int, int, int, str]]:
    """The instrumented timeline of one thread: every event delays what follows."""
    out, delay = [], 0.0
    for t, th, k, n in events:
        pre, post = _split(k)
        delay += pre
        out.append((t + int(delay), th, k, n))
        delay += post
    return out


def breakdown(*procs) -> dict[tuple, int]:
    df = analyze(Trace(None, {}, list(procs))).breakdown(  # type: ignore[arg-type]
        by=("thread", "operation", "category", "region"))
    return {tuple(r[:-1]): round(r[-1] * 1e9) for r in df.itertuples(index=False)
            if round(r[-1] * 1e9)}


TRUE = [(0, 0, START, ""), (1000, 0, OB, "inference"), (1200, 0, MB, "torch.nn.Module"),
        (1500, 0, BB, "torch.mm"), (4000, 0, BE, "torch.mm"), (4200, 0, BB, "torch.relu"),
        (5000, 0, BE, "torch.relu"), (5500, 0, ME, "torch.nn.Module"), (6000, 0, OE, "inference"),
        (6050, 0, EB, "CartPole-v1"),
        (6100, 0, OB, "simulation"), (6300, 0, SB, "step"), (9000, 0, SE, "step"),
        (9500, 0, OE, "simulation"), (9600, 0, EE, "CartPole-v1"), (12000, 0, END, "")]


def test_injected_costs_are_removed_exactly():
    true = process_trace(TRUE)
    measured = process_trace(inject(TRUE))
    assert breakdown(measured) != breakdown(true)
    corrected, summary = correct_trace(Trace(None, {}, [measured]), COSTS)  # type: ignore
    assert breakdown(*corrected.processes) == breakdown(true)
    r = summary.root()
    assert r is not None and r.main_removed_ns == 2 * 200 + 2 * 400 + 300 + 500 + 250 == 2250
    assert abs(summary.run_overhead_s() - (2250 + 1e6) / 1e9) < 1e-12


def test_env_steps_are_corrected_in_the_env_table_too():
    """The env table (lock-step, slices) is read from the same events: its times move with
    them, and an env step's recorded duration loses the part of its cost inside it."""
    measured = process_trace(inject(TRUE))
    e = np.isin(measured.events.kind, (EB, EE))
    measured.env = EnvEvents(measured.events.time_ns[e], measured.events.thread[e],
                             measured.events.kind[e], measured.events.name[e],
                             np.array([0, -1]))
    corrected, _ = correct_trace(Trace(None, {}, [measured]), COSTS)  # type: ignore
    p = corrected.processes[0]
    assert p.env.time_ns.tolist() == p.events.time_ns[e].tolist()
    assert int(np.diff(p.env.time_ns)[0]) == 9600 - 6050


def test_diffuse_cost_is_removed_as_a_uniform_stretch():
    # Recording slowed everything by 5% (not at the events): the measured timeline is
    # the true one stretched; its cost is carried by 2 annotations (begin/end pairs).
    true = [(0, 0, START, ""), (1000, 0, OB, "a"), (5000, 0, OE, "a"), (5000, 0, OB, "b"),
            (11000, 0, OE, "b"), (20000, 0, END, "")]
    stretched = [(int(t * 1.05), th, k, n) for t, th, k, n in true]
    costs = {"annotation": KindCost(500, 0, 0, "test", diffuse_ns=500)}  # 2 x 500 = 1000
    corrected, summary = correct_trace(Trace(None, {}, [process_trace(stretched)]), costs)
    assert breakdown(*corrected.processes) == breakdown(process_trace(true))
    assert summary.root().main_removed_ns == 1000  # type: ignore[union-attr]
    assert costs["annotation"].outside_ns == 0


def test_input_trace_is_not_modified():
    measured = process_trace(inject(TRUE))
    before = measured.events.time_ns.copy()
    correct_trace(Trace(None, {}, [measured]), COSTS)  # type: ignore[arg-type]
    assert np.array_equal(measured.events.time_ns, before)


def test_no_costs_is_identity():
    measured = process_trace(inject(TRUE))
    corrected, _ = correct_trace(Trace(None, {}, [measured]), {})  # type: ignore[arg-type]
    assert np.array_equal(corrected.processes[0].events.time_ns, measured.events.time_ns)


def test_overestimated_costs_keep_event_order():
    ev = [(0, 0, START, ""), (10, 0, OB, "a"), (11, 0, OE, "a"), (20, 0, END, "")]
    big = {"annotation": KindCost(1000, 500, 0, "test")}
    corrected, _ = correct_trace(Trace(None, {}, [process_trace(ev)]), big)  # type: ignore
    t = corrected.processes[0].events.time_ns
    assert np.all(np.diff(t) >= 0)


def test_cuda_api_calls_and_gpu_work_move_with_their_thread():
    # True: op "train" [1000, 9000); cudaLaunchKernel [2000, 2500) launches a kernel
    # [3000, 6000); cudaDeviceSynchronize [2600, 6100).
    true_api = [(1000, 2000, 2500, 1, "cudaLaunchKernel"),
                (1000, 2600, 6100, 2, "cudaDeviceSynchronize")]
    true_gpu = [(G.KERNEL, 7, 3000, 6000, 1)]
    ev = [(0, 0, START, ""), (1000, 0, OB, "train"), (9000, 0, OE, "train"),
          (10000, 0, END, "")]
    true = process_trace(ev, threads={0: 1000}, api=true_api, gpu=true_gpu)
    # Instrumented: annotation begin pays 60 before / 40 after its stamp; each API call 40
    # before its start stamp, 20 after, 20 before its end stamp, 40 after.
    m_ev = [(0, 0, START, ""), (1000 + 60, 0, OB, "train"), (9000 + 380, 0, OE, "train"),
            (10000 + 440, 0, END, "")]
    m_api = [(1000, 2000 + 140, 2500 + 180, 1, "cudaLaunchKernel"),
             (1000, 2600 + 260, 6100 + 300, 2, "cudaDeviceSynchronize")]
    m_gpu = [(G.KERNEL, 7, 3000 + 180, 6000 + 180, 1)]  # launched 180 ns late
    measured = process_trace(m_ev, threads={0: 1000}, api=m_api, gpu=m_gpu)
    costs = {"annotation": KindCost(200, 80, 0, "test"),
             "cuda_api": KindCost(120, 40, 0, "test")}
    corrected, _ = correct_trace(Trace(None, {}, [measured]), costs)  # type: ignore
    assert breakdown(*corrected.processes) == breakdown(true)


events_st = st.lists(st.tuples(st.sampled_from(["op", "backend", "sim", "wait"]),
                               st.integers(1, 5000), st.integers(1, 5000),
                               st.sampled_from(["a", "b", "c"])), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(events_st, st.integers(0, 2))
def test_random_nested_timelines_are_corrected_exactly(spec, nest_every):
    # Build a true timeline: a sequence of scopes, every third one nested in an outer op.
    t, ev = 0, [(0, 0, START, "")]
    kinds = {"op": (OB, OE), "backend": (BB, BE), "sim": (SB, SE), "wait": (WB, WE)}
    for i, (what, gap, dur, name) in enumerate(spec):
        outer = nest_every and i % 3 == 0
        t += gap
        if outer:
            ev.append((t, 0, OB, "outer"))
            t += gap
        b, e = kinds[what]
        ev.append((t, 0, b, name))
        t += dur
        ev.append((t, 0, e, name))
        if outer:
            t += gap
            ev.append((t, 0, OE, "outer"))
    ev.append((t + 100, 0, END, ""))
    true, measured = process_trace(ev), process_trace(inject(ev))
    corrected, _ = correct_trace(Trace(None, {}, [measured]), COSTS)  # type: ignore
    assert breakdown(*corrected.processes) == breakdown(true)


def test_chunk_costs_follow_the_runs_speed():
    from rlscope.analysis.overhead.applied import apply_correction, speed_scale
    from rlscope.analysis.overhead.model import Calibration

    # The run took 2 s for progress reports 0->2 and 1 s for 2->3; the calibration's
    # full copies took 1 s and 0.5 s for the same chunks: the run went half as fast.
    s = 1_000_000_000
    ev = [(0, 0, START, ""), (s // 2, 0, OB, "a"), (5 * s // 2, 0, OE, "a"),
          (4 * s, 0, END, "")]
    p = process_trace(ev, progress=[(0, 1, 9), (s, 2, 9), (2 * s, 3, 9), (3 * s, 4, 9)])
    runs = [{"config": "full", "round": 0, "seconds": 1.0, "boundaries": 2, "counts": {}},
            {"config": "full", "round": 1, "seconds": 0.5, "boundaries": 1, "counts": {}},
            {"config": "uninstrumented", "round": 0, "seconds": 0.9, "counts": {}}]
    cal = Calibration([], {"annotation": KindCost(1000, 0, 0, "chunks")}, runs=runs,
                      mode="chunks")
    trace = Trace(None, {}, [p])  # type: ignore[arg-type]
    assert speed_scale(trace, cal) == 2.0
    c = apply_correction(trace, cal).run["correction"]
    assert c["speed_scale"] == 2.0 and c["removed_s"] == 2 * 1000 / 1e9
    cal.mode = "runs"  # whole-run costs are not rescaled
    assert speed_scale(trace, cal) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40), st.integers(0, 30)),
                max_size=40), st.integers(1, 5), st.booleans())
def test_blocks_change_nothing(rows, block, with_api):
    """Shifting a thread's times a block at a time (running sums carried over) gives the
    times one pass gives, bit for bit."""
    from rlscope.analysis.overhead import correction

    events, t = [(0, 0, START, "")], 0
    for i, (th, gap, dur) in enumerate(rows):
        t += gap
        k = (OB, BB, SB)[i % 3]
        events += [(t, th, k, "x"), (t + dur, th, k + 1, "x")]
    api = [(1000, 5, 9, 1, "cudaLaunchKernel"), (1001, 20, 30, 2, "cudaMemcpy")] \
        if with_api else []
    gpu = [(G.KERNEL, 1, 12, 40, 1)] if with_api else []
    p = process_trace(events, threads={0: 1000, 1: 1001, 2: 1002}, api=api, gpu=gpu)
    costs = {k: KindCost(c.per_event_ns, c.inside_ns, 0, "test", diffuse_ns=13.0)
             for k, c in COSTS.items()}
    one, _ = correct_trace(Trace(None, {}, [p]), costs)  # type: ignore[arg-type]
    old = correction._BLOCK
    correction._BLOCK = block
    try:
        blocked, _ = correct_trace(Trace(None, {}, [p]), costs)  # type: ignore[arg-type]
    finally:
        correction._BLOCK = old
    a, b = one.processes[0], blocked.processes[0]
    assert a.events.time_ns.tolist() == b.events.time_ns.tolist()
    assert a.api_calls.start_ns.tolist() == b.api_calls.start_ns.tolist()
    assert a.gpu.start_ns.tolist() == b.gpu.start_ns.tolist()


def test_an_annotations_code_between_its_stamps_leaves_the_interval():
    """An annotation adds 10 ns to the run (recording against idle) but puts 50 ns of its
    own code between its two stamps, code that runs outside the operation when nothing
    records: each operation loses 50 ns, the time around it gains 40, the thread 10 per
    operation, exactly as in the run without recording."""
    costs = {"annotation": KindCost(10, 50, 0, "test")}
    assert costs["annotation"].outside_ns == -40
    true = [(0, 0, START, ""), (1000, 0, OB, "a"), (3000, 0, OE, "a"),
            (4000, 0, OB, "b"), (6000, 0, OE, "b"), (8000, 0, END, "")]
    delay, measured = 0, []
    for t, th, k, n in true:  # pre-stamp -20, post-stamp +25 (begin); +25, -20 (end)
        pre, post = (-20, 25) if k in (OB,) else (25, -20) if k in (OE,) else (0, 0)
        delay += pre
        measured.append((t + delay, th, k, n))
        delay += post
    m = process_trace(measured)
    assert breakdown(m) != breakdown(process_trace(true))
    corrected, summary = correct_trace(Trace(None, {}, [m]), costs)  # type: ignore
    assert breakdown(*corrected.processes) == breakdown(process_trace(true))
    r = summary.root()
    assert r is not None and r.main_removed_ns == 2 * 10


def test_check_against_runs_is_like_for_like():
    """Issue 22 item 4: the whole tree's CPU time less what was removed from every
    process, against runs' whole-tree CPU; the main process's wall less its own."""
    from rlscope.analysis.overhead.applied import apply_correction
    from rlscope.analysis.overhead.model import Calibration

    main = process_trace(inject(TRUE))
    worker = process_trace(inject(TRUE), pid=2)
    costs = {k: c for k, c in COSTS.items() if k != "cuda_api"}
    cal = Calibration([], costs, uninstrumented={"mean_s": 1.0, "std_s": 0.0, "n": 1,
                                                 "wall_mean_s": 2.0},
                      metric="cpu", mode="model",
                      validation={"validation_rounds": [0], "total_error_pct": 0.0,
                                  "raw_total_error_pct": 0.2})  # checked: applied
    run = {"cpu_s": 1.0 + 2 * (2250 + 1e6) / 1e9, "duration_s": 2.0 + (2250 + 1e6) / 1e9}
    trace = Trace(None, run, [main, worker])  # type: ignore[arg-type]
    c = apply_correction(trace, cal).run["correction"]
    assert abs(c["removed_cpu_s"] - 2 * (2250 + 1e6) / 1e9) < 1e-12
    assert abs(c["corrected_total_s"] - 1.0) < 1e-12 and abs(c["error_pct"]) < 1e-9
    assert abs(c["corrected_wall_s"] - 2.0) < 1e-12 and abs(c["wall_error_pct"]) < 1e-9


def test_interception_set_up_is_a_fixed_cost_of_its_process():
    """rlscope.intercept records what wrapping a library cost each process (metadata);
    the correction counts it with the process's fixed cost, timeline untouched."""
    key = fmt.META_INSTALL_PREFIX
    p = process_trace(TRUE, metadata={key + "torch": 150_000_000, key + "gym": 2_000_000})
    corrected, summary = correct_trace(Trace(None, {}, [p]), {})  # type: ignore[arg-type]
    r = summary.root()
    assert r is not None and r.fixed_ns == 152_000_000 and r.main_removed_ns == 0
    assert breakdown(*corrected.processes) == breakdown(p)


def test_importing_rlscope_is_charged_where_the_script_does_not_import_it():
    """A process's start-up is rlscope's start beyond its import (PROCESS) and the
    import (RLSCOPE_IMPORT); a script that uses rlscope itself imports it anyway, so its
    process is charged the first only."""
    from rlscope.analysis.overhead.kinds import PROCESS, RLSCOPE_IMPORT, count_process

    costs = {PROCESS: KindCost(8e6, 0.0, 0.0, "microbenchmark", 2),
             RLSCOPE_IMPORT: KindCost(24e6, 0.0, 0.0, "microbenchmark", 1)}
    user = process_trace(TRUE, metadata={fmt.META_SCRIPT_USES_RLSCOPE: "1"})
    plain = process_trace(TRUE, pid=2)
    forked = process_trace(TRUE, pid=3, metadata={fmt.META_FORKED: "1"})
    assert [count_process(p)[RLSCOPE_IMPORT] for p in (user, plain, forked)] == [0, 1, 0]
    _corrected, summary = correct_trace(Trace(None, {}, [user, plain, forked]), costs)
    assert [c.fixed_ns for c in summary.processes] == [8e6, 32e6, 0.0]
    assert summary.tree_import_s() == 0.024


def test_a_work_bounds_check_runs_are_not_charged_rlscopes_import():
    """Under a work bound the user set (RLSCOPE_MAX_PROGRESS) the check's runs without
    rlscope import it to count the reports: the check charges the profiled run's
    processes no import (the report's own figures still do)."""
    from rlscope.analysis.overhead.applied import validation
    from rlscope.analysis.overhead.kinds import PROCESS, RLSCOPE_IMPORT
    from rlscope.calibration.build import model_calibration
    from rlscope.calibration.estimate import UNINSTRUMENTED, RunSample

    counts = {PROCESS: 2, RLSCOPE_IMPORT: 2}
    mb: dict[str, dict[str, float]] = {}
    plain = [RunSample(UNINSTRUMENTED, 0, 1.0, {}, 1.0)]

    def cal(bounded_by_user: bool):  # startup 30 ms, of which 20 ms importing rlscope
        return model_calibration(["x"], mb, 30e6, 0.0, counts, 1.1, 1.2, plain, 0.0,
                                 ["0"], import_ns=20e6,
                                 runs_import_rlscope=bounded_by_user)

    free, bounded = cal(False), cal(True)
    assert free.validation["total_error_pct"] == pytest.approx(100 * (1.1 - 0.06 - 1))
    assert bounded.validation["total_error_pct"] == pytest.approx(100 * (1.1 - 0.02 - 1))
    user = process_trace(TRUE)
    plain_p = process_trace(TRUE, pid=2)
    _c, summary = correct_trace(Trace(None, {}, [user, plain_p]), bounded.costs)
    info = validation({"cpu_s": 1.1}, bounded, summary)
    assert info["corrected_total_s"] == pytest.approx(1.1 - summary.tree_overhead_s()
                                                      + 0.04)


def test_own_threads_cpu_counts_in_the_tree_not_the_timeline():
    key = fmt.META_THREAD_CPU_PREFIX
    p = process_trace(TRUE, metadata={key + "rlscope-writer": 30_000_000})
    corrected, summary = correct_trace(Trace(None, {}, [p]), {})  # type: ignore[arg-type]
    assert summary.tree_overhead_s() == 0.03 and summary.run_overhead_s() == 0.0
    assert breakdown(*corrected.processes) == breakdown(p)


def _inject_time(events: list[tuple[int, int, int, str]], t: int) -> int:
    """Where a clock read at true time ``t`` (no cost of its own) lands when the
    events before it pay their costs."""
    return t + int(sum(sum(_split(k)) for te, _th, k, _n in events if te < t))


def test_start_up_rows_keep_their_events():
    """Issue 22 item 5: backend calls made at start-up, outside any import, stay in
    (start-up) after correction; those inside an import stay in the imports row. The
    import timer's records move with the events around them."""
    true = [(0, 0, START, ""), (100, 0, BB, "torch.a"), (900, 0, BE, "torch.a"),
            (2000, 0, BB, "torch.b"), (2600, 0, BE, "torch.b"),
            (5100, 0, BB, "torch.c"), (5900, 0, BE, "torch.c"),
            (8000, 0, OB, "inference"), (9000, 0, OE, "inference"), (12000, 0, END, "")]
    imports = {"torch": (1000, 5000)}
    key = fmt.META_IMPORT_PREFIX

    def meta(shift: bool) -> dict:
        f = (lambda t: _inject_time(true, t)) if shift else (lambda t: t)
        return {key + m: [f(b), f(e)] for m, (b, e) in imports.items()}

    t = process_trace(true, metadata=meta(False))
    measured = process_trace(inject(true), metadata=meta(True))
    assert breakdown(measured) != breakdown(t)
    corrected, _ = correct_trace(Trace(None, {}, [measured]), COSTS)  # type: ignore
    assert breakdown(*corrected.processes) == breakdown(t)
    rows = breakdown(t)
    assert any("imports" in str(k) for k in rows) and any("(start-up)" in str(k) for k in rows)


def test_correction_withheld_where_its_check_shows_no_gain():
    """Issue 22: never worse than raw. The demo's chunk check, -1.2% corrected against
    +0.4% raw: raw numbers, and one line saying why; +0.1% against +1.9%: corrected."""
    from rlscope.analysis.overhead.applied import apply_correction
    from rlscope.analysis.overhead.model import Calibration
    from rlscope.reporters.correction import correction_lines

    measured = process_trace(inject(TRUE))
    trace = Trace(None, {}, [measured])  # type: ignore[arg-type]
    bad = Calibration([], COSTS, mode="chunks", metric="thread-cpu",
                      validation={"total_error_pct": -1.2, "raw_total_error_pct": 0.4,
                                  "validation_rounds": [1, 3]})
    out = apply_correction(trace, bad)
    assert breakdown(*out.processes) == breakdown(measured)
    (line,) = correction_lines(out.run)
    assert line.startswith("Overhead: not corrected, raw numbers shown") and "-1.2%" in line
    good = Calibration([], COSTS, mode="chunks", metric="thread-cpu",
                       validation={"total_error_pct": 0.1, "raw_total_error_pct": 1.9,
                                   "validation_rounds": [1, 3]})
    out = apply_correction(trace, good)
    assert out.run["correction"]["applied"]
    assert breakdown(*out.processes) == breakdown(process_trace(TRUE))


def test_a_withheld_bounded_check_names_the_runs_it_compared():
    """A long run's model check compares runs ended at a progress report; where that
    check withholds the correction, its line still says which runs it compared."""
    from rlscope.analysis.overhead.applied import apply_correction
    from rlscope.analysis.overhead.model import Calibration
    from rlscope.reporters.correction import correction_lines

    trace = Trace(None, {}, [process_trace(inject(TRUE))])  # type: ignore[arg-type]
    cal = Calibration([], COSTS, mode="model", metric="cpu",
                      uninstrumented={"mean_s": 1.0, "n": 1, "bounded_progress": 22},
                      validation={"total_error_pct": -6.7, "raw_total_error_pct": 2.6,
                                  "validation_rounds": [1]})
    (line,) = correction_lines(apply_correction(trace, cal).run)
    assert line.startswith("Overhead: not corrected, raw numbers shown")
    assert "check in runs ended at progress report 22 (with rlscope and without, in " \
        "pairs), correcting left the time" in line
    assert "-6.7%" in line and "+2.6%" in line


def test_an_unchecked_cost_model_reports_the_overhead_on_raw_numbers():
    """rls-prof's cost model (costs.json, no check against runs without rlscope): the
    report shows raw numbers and rlscope's share of the run's CPU time by the model."""
    from rlscope.analysis.overhead.applied import apply_correction
    from rlscope.analysis.overhead.model import Calibration
    from rlscope.reporters.correction import correction_lines

    measured = process_trace(inject(TRUE))
    removed = (2250 + 1e6) / 1e9
    trace = Trace(None, {"cpu_s": 0.1 + removed}, [measured])  # type: ignore[arg-type]
    out = apply_correction(trace, Calibration([], COSTS, mode="model"))
    assert breakdown(*out.processes) == breakdown(measured)
    c = out.run["correction"]
    assert not c["applied"] and abs(c["overhead_pct"] - 100 * removed / 0.1) < 1e-9
    (line,) = correction_lines(out.run)
    assert "raw numbers shown; rlscope's book-keeping took 1.0% of this run's CPU" in line
    assert "rls-prof --calibrate" in line


def test_overhead_error_bar_is_the_costs_error_times_the_events():
    import dataclasses

    costs = dict(COSTS, annotation=dataclasses.replace(COSTS["annotation"], error_ns=10.0))
    _, summary = correct_trace(Trace(None, {}, [process_trace(inject(TRUE))]),  # type: ignore
                               costs)
    assert abs(summary.tree_error_s() - 2 * 10 / 1e9) < 1e-15  # two annotation pairs


def test_waits_on_ray_workers_are_said_to_be_uncorrected():
    """ray.get is recorded as a wait; with no Ray worker's calls in the run (here none:
    an actor's waits on others are the same) the wait is not shortened by what rlscope
    cost them, and the report says so."""
    from rlscope.analysis.overhead.applied import apply_correction
    from rlscope.analysis.overhead.model import Calibration
    from rlscope.reporters.correction import correction_lines

    ev = [(0, 0, START, ""), (100, 0, WB, "ray.get"), (900, 0, WE, "ray.get"),
          (1000, 0, WB, "ray.wait"), (1500, 0, WE, "ray.wait"),
          (1600, 0, WB, "os.read"), (1700, 0, WE, "os.read"), (2000, 0, END, "")]
    cal = Calibration([], COSTS, mode="chunks", metric="thread-cpu",
                      validation={"total_error_pct": 0.1, "raw_total_error_pct": 1.9,
                                  "validation_rounds": [1, 3]})
    out = apply_correction(Trace(None, {}, [process_trace(ev)]), cal)  # type: ignore
    lines = correction_lines(out.run)
    assert any(line.startswith("  warning: 2 waits in ray.get/ray.wait are not shortened")
               for line in lines), lines
    plain = apply_correction(Trace(None, {}, [process_trace([ev[0], *ev[5:]])]),
                             cal)  # type: ignore[arg-type]
    assert not any("ray.get" in line for line in correction_lines(plain.run))


def test_pool_tasks_are_said_to_keep_their_own_costs():
    """A worker's pool-task records under a calibration without the pool kinds (made by
    an older rlscope): the report says the waits for their results keep the pool
    integration's own work per task; with them, nothing is said."""
    from rlscope.analysis.overhead.applied import apply_correction
    from rlscope.analysis.overhead.model import Calibration
    from rlscope.reporters.correction import correction_lines
    from rlscope.trace import format as fmt

    cal = Calibration([], COSTS, mode="chunks", metric="thread-cpu",
                      validation={"total_error_pct": 0.1, "raw_total_error_pct": 1.9,
                                  "validation_rounds": [1, 3]})
    ev = [(0, 0, START, ""), (2000, 0, END, "")]
    tasks = {f"{fmt.META_TASK_PREFIX}{i}": ["f", 1, i, 100, 200, 7, 1, 50] for i in range(3)}
    worker = process_trace(ev, pid=2, ppid=1, metadata=tasks)
    out = apply_correction(Trace(None, {}, [process_trace(ev), worker]), cal)  # type: ignore
    lines = correction_lines(out.run)
    assert any(line.startswith("  warning: 3 pool tasks: this calibration has no price")
               for line in lines), lines
    priced = Calibration([], {**COSTS, "pool_task": KindCost(5000, 0, 100, "test")},
                         mode="chunks", metric="thread-cpu", validation=cal.validation)
    out = apply_correction(Trace(None, {}, [process_trace(ev), worker]), priced)  # type: ignore
    assert not any("pool tasks" in line for line in correction_lines(out.run))
    plain = apply_correction(Trace(None, {}, [process_trace(ev)]), cal)  # type: ignore
    assert not any("pool tasks" in line for line in correction_lines(plain.run))


def test_calls_passed_on_inside_an_operation_leave_its_intervals():
    """A marked env's step called inside the user's own ``simulation``: its wrapper passes
    the call on (nothing recorded) and the process counts 4 such calls of ``simulation``
    (format.META_PASSED_CALLS). At 100 ns each they are taken out of the two simulation
    intervals, 200 ns each, and nothing else moves but the time after them."""
    costs = {"passed_call": KindCost(100, 100, 0, "test")}
    true = [(0, 0, START, ""), (1000, 0, OB, "simulation"), (3000, 0, OE, "simulation"),
            (4000, 0, OB, "inference"), (5000, 0, OE, "inference"),
            (6000, 0, OB, "simulation"), (8000, 0, OE, "simulation"), (9000, 0, END, "")]
    delay, measured = 0, []
    for t, th, k, n in true:
        if k == OE and n == "simulation":
            delay += 200  # two passed calls inside each
        measured.append((t + delay, th, k, n))
    md = {fmt.META_PASSED_CALLS: {"simulation": 4}}
    m = process_trace(measured, metadata=md)
    assert breakdown(m) != breakdown(process_trace(true))
    corrected, summary = correct_trace(Trace(None, {}, [m]), costs)  # type: ignore
    assert breakdown(*corrected.processes) == breakdown(process_trace(true, metadata=md))
    r = summary.root()
    assert r is not None and r.main_removed_ns == 400
    from rlscope.analysis.overhead.kinds import count_process

    assert count_process(m)["passed_call"] == 4


def test_a_tallying_checks_main_process_is_not_charged_rlscopes_import():
    """The check's runs without rlscope count their main process's work (its progress
    reports or optimizer steps: RLSCOPE_WORK_TALLY), so that one process imports
    rlscope: the check charges the profiled run's main process no import, the others
    theirs, in rls-prof's check and the report's alike."""
    from rlscope.analysis.overhead.applied import validation
    from rlscope.analysis.overhead.kinds import PROCESS, RLSCOPE_IMPORT
    from rlscope.calibration.build import model_calibration
    from rlscope.calibration.estimate import UNINSTRUMENTED, RunSample

    counts = {PROCESS: 2, RLSCOPE_IMPORT: 2}
    plain = [RunSample(UNINSTRUMENTED, 0, 1.0, {}, 1.0)]
    cal = model_calibration(["x"], {}, 30e6, 0.0, counts, 1.1, 1.2, plain, 0.0, ["0"],
                            import_ns=20e6, root_imports_rlscope=True)
    # removed: 2 x 10 ms start-up + 1 x 20 ms import (the other process's)
    assert cal.validation["total_error_pct"] == pytest.approx(100 * (1.1 - 0.04 - 1))
    assert cal.uninstrumented["root_imports_rlscope"] is True
    _c, summary = correct_trace(Trace(None, {}, [process_trace(TRUE),
                                                 process_trace(TRUE, pid=2)]), cal.costs)
    assert summary.root_import_s() == pytest.approx(0.02)
    info = validation({"cpu_s": 1.1}, cal, summary)
    assert info["corrected_total_s"] == pytest.approx(1.1 - summary.tree_overhead_s()
                                                      + 0.02)
    assert info["error_pct"] == pytest.approx(cal.validation["total_error_pct"])


def test_runs_that_did_other_work_withhold_the_correction_and_say_why():
    """Whole runs without rlscope that did another amount of work than the profiled run
    (and no pair of runs could be ended at a common point) check nothing: the report
    stays raw and says why in one line, and so does rls-prof's check line."""
    from rlscope.analysis.overhead.applied import apply_correction, withheld_reason
    from rlscope.calibration.build import model_calibration
    from rlscope.calibration.estimate import UNINSTRUMENTED, RunSample
    from rlscope.reporters.calibration import summary_lines

    why = "the run without rlscope did 90 optimizer steps against the profiled run's 120"
    cal = model_calibration(["x"], {}, 30e6, 0.0, {}, 1.1, 1.2,
                            [RunSample(UNINSTRUMENTED, 0, 1.0, {}, 1.0)], 0.0, ["0"],
                            unlike_work=why)
    assert cal.validation["errors_pct"] == [] and cal.validation["unlike_work"] == why
    reason = withheld_reason(cal)
    assert reason.startswith(f"the calibration could not check it: {why};")
    trace = Trace(None, {"cpu_s": 1.1}, [process_trace(TRUE)])  # type: ignore[arg-type]
    c = apply_correction(trace, cal).run["correction"]
    assert c["applied"] is False and c["withheld"] == reason
    (line,) = [x for x in summary_lines(cal, False) if "check" in x]
    assert line == (f"  check: none: {why}; so rls-analyze shows raw numbers (make every "
                    "run do the same work, or bound it with RLSCOPE_MAX_PROGRESS, and "
                    "calibrate again)")
