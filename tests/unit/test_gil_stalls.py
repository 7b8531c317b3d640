"""The Python stack sampler's stalls (kinds.PY_SAMPLE): a main thread whose true timeline
is known, each sample taken while it ran Python or was in a backend call delaying what
follows by the stall (in a call: at the call's end, when it wanted the GIL back), a
sample taken in a wait delaying nothing; corrected, the true timeline comes back
exactly, and the process tree's CPU overhead does not count the stalls (the thread
waited for the GIL, off the CPU)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rlscope.analysis import analyze
from rlscope.analysis.engine.synthetic import process_trace
from rlscope.analysis.overhead.correction import correct_trace
from rlscope.analysis.overhead.kinds import PY_SAMPLE, count_process
from rlscope.analysis.overhead.model import KindCost
from rlscope.trace import format as fmt
from rlscope.trace.data import ProcessTrace, Trace

OB, OE = fmt.OPERATION_BEGIN, fmt.OPERATION_END
BB, BE = fmt.BACKEND_CALL_BEGIN, fmt.BACKEND_CALL_END
WB, WE = fmt.WAIT_CALL_BEGIN, fmt.WAIT_CALL_END
START, END = fmt.PROCESS_START, fmt.PROCESS_END
STALL = 150_000
COSTS = {PY_SAMPLE: KindCost(STALL, 0, 0, "test")}
NAMES = {START: "", END: "", OB: "inference", OE: "inference", BB: "torch.mm",
         BE: "torch.mm", WB: "time.sleep", WE: "time.sleep"}
# The true timeline: Python, a backend call, Python, a wait, Python.
TRUE = [(0, START), (1_000_000, OB), (3_000_000, BB), (5_000_000, BE), (7_000_000, WB),
        (8_000_000, WE), (9_000_000, OE), (10_000_000, END)]
# Sample times on the true clock: in Python, and in the backend call just before its
# end (charged: it waits for the sampler at its end), in the wait and early in the call
# (the call outlived the sample: nothing).
IN_PYTHON = (2_000_000, 2_500_000, 4_999_000, 6_000_000, 8_500_000)
IN_CALLS = (3_500_000, 7_500_000)


def _recorded() -> tuple[ProcessTrace, ProcessTrace]:
    """The true trace, and the recorded one: each event later by the stalls of the
    samples in Python before it; the samples' times as the sampler stamped them."""
    stamps = [t + STALL * sum(s < t for s in IN_PYTHON) for t, _ in TRUE]
    samples = sorted(s + STALL * sum(x < s for x in IN_PYTHON) for s in IN_PYTHON + IN_CALLS)

    def proc(times: list[int]) -> ProcessTrace:
        return process_trace([(t, 0, k, NAMES[k]) for t, (_, k) in zip(times, TRUE,
                                                                          strict=True)])

    recorded = dataclasses.replace(proc(stamps), py_samples=np.array(samples, np.int64))
    return proc([t for t, _ in TRUE]), recorded


def test_a_sample_taken_while_the_main_thread_ran_python_is_removed_there():
    true, recorded = _recorded()
    fixed, summary = correct_trace(Trace(None, {}, [recorded]), COSTS)  # type: ignore
    assert fixed.processes[0].events.time_ns.tolist() == true.events.time_ns.tolist()
    assert count_process(recorded)[PY_SAMPLE] == len(IN_PYTHON) + len(IN_CALLS)
    # Off the CPU: the run's wall loses the stalls, the tree's CPU overhead does not.
    assert summary.run_overhead_s() * 1e9 == pytest.approx(len(IN_PYTHON) * STALL)
    assert summary.tree_overhead_s() == pytest.approx(0.0)
    # The operation's Python and Backend times are the true ones; the wait keeps its.
    got = analyze(Trace(None, {}, [fixed.processes[0]])).breakdown(  # type: ignore
        by=("operation", "category"))
    want = analyze(Trace(None, {}, [true])).breakdown(  # type: ignore[arg-type]
        by=("operation", "category"))
    assert got.round(9).values.tolist() == want.round(9).values.tolist()


def test_without_samples_or_a_price_nothing_moves():
    _, recorded = _recorded()
    for trace, costs in ((dataclasses.replace(recorded, py_samples=None), COSTS),
                         (recorded, {})):
        fixed, _ = correct_trace(Trace(None, {}, [trace]), costs)  # type: ignore
        assert fixed.processes[0].events.time_ns.tolist() \
            == recorded.events.time_ns.tolist()
