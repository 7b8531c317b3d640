"""In-process microbenchmarks of the hooks: a sanity check for the run-based estimates
and the source of the inside/outside split (which whole-run times cannot observe).

    python -m rlscope.calibration.microbench TMPDIR    # prints JSON

For each kind: ``per_event_ns`` = (loop time with the hook recording - loop time with the
hook idle) / n, medians over repeats of the thread's CPU time (``error_ns``: the repeats'
half interquartile ranges, in quadrature); ``inside_ns`` = the median recorded duration of an
empty interval (what lands inside the interval the hook times). A tight loop keeps the
hook's code and data in cache, so ``per_event_ns`` is a lower bound of the cost inside a
real workload; the inside part (the code between the two clock reads) varies less.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

N = 20_000
REPEATS = 7


_SPREAD: dict[int, float] = {}  # id of a result -> half the IQR of its repeats, ns


def _loop_ns(body: Callable[[int], None]) -> float:
    best = []
    for _ in range(REPEATS):
        # The thread's CPU time: on a busy machine wall time adds other processes' turns
        # (seen 2.7 µs for an idle annotation at a load of 16 on 2 cores, 0.35 µs idle).
        t0 = time.thread_time_ns()
        body(N)
        best.append(time.thread_time_ns() - t0)
    q1, med, q3 = np.percentile(np.array(best, np.float64) / N, [25, 50, 75])
    _SPREAD[id(med)] = float(q3 - q1) / 2
    return med


def _error(*loops: float) -> float:
    """One kind's error bar (ns) from the loops its cost is the difference of: their
    repeats' half interquartile ranges, in quadrature."""
    return math.sqrt(sum(_SPREAD.get(id(x), math.nan) ** 2 for x in loops))


def _annotation_loop(op: object) -> Callable[[int], None]:
    def body(n: int) -> None:
        for _ in range(n):
            with op:  # type: ignore[attr-defined]
                pass
    return body


def _call_loop(f: Callable[[int], int]) -> Callable[[int], None]:
    def body(n: int) -> None:
        for i in range(n):
            f(i)
    return body


def _noop() -> None:
    return None


def _step_loop(step: Callable[[], None]) -> Callable[[int], None]:
    def body(n: int) -> None:
        for _ in range(n):
            step()
    return body


def _durations(trace_dir: Path, begin: int, end: int) -> np.ndarray:
    from rlscope.trace.reader import read_trace

    ev = read_trace(trace_dir).processes[0].events
    b = ev.time_ns[ev.kind == begin]
    e = ev.time_ns[ev.kind == end]
    n = min(len(b), len(e))
    return (e[:n] - b[:n]).astype(np.float64)


def run(tmp: Path, recorder: str = "native") -> dict[str, dict[str, float]]:
    import rlscope
    from rlscope.trace import format as fmt

    out: dict[str, dict[str, float]] = {}
    idle_ann = _loop_ns(_annotation_loop(rlscope.operation("calibration")))
    raw_call = _loop_ns(_call_loop(abs))
    wrapped = None
    try:
        from rlscope.intercept.patch import BACKEND, Patcher

        wrapped = Patcher().wrapper_for(abs, BACKEND, "calibration.abs")
    except Exception:  # no native wrapper: interception not available
        wrapped = None
    idle_call = _loop_ns(_call_loop(wrapped)) if wrapped is not None else math.nan
    # An env's recorded step (the vector env wrappers do the same work), inside an open
    # simulation operation so that the operation's own annotation is not counted here.
    from rlscope import annotate
    from rlscope.integrations.vecenv import SIMULATION, recorded_method

    env_step = recorded_method(_noop, reset=False, index=0, name="calibration")
    raw_step = _loop_ns(_step_loop(_noop))
    rlscope.start(tmp, recorder=recorder)
    try:
        rec_ann = _loop_ns(_annotation_loop(rlscope.operation("calibration")))
        rec_call = _loop_ns(_call_loop(wrapped)) if wrapped is not None else math.nan
        rec = annotate.active_recorder()
        with rec.operation(SIMULATION):  # type: ignore[union-attr]
            rec_step = _loop_ns(_step_loop(env_step))
    finally:
        rlscope.stop()
    ann_in = float(np.median(_durations(tmp, fmt.OPERATION_BEGIN, fmt.OPERATION_END)))
    out["annotation"] = {"per_event_ns": rec_ann - idle_ann, "inside_ns": ann_in,
                         "idle_ns": idle_ann, "error_ns": _error(rec_ann, idle_ann)}
    if wrapped is not None:
        d = _durations(tmp, fmt.BACKEND_CALL_BEGIN, fmt.BACKEND_CALL_END)
        inside = float(np.median(d)) if len(d) else math.nan
        # (abs() itself, a few ns, runs inside the interval too; left in.)
        out["backend_call"] = {"per_event_ns": rec_call - raw_call, "inside_ns": inside,
                               "idle_ns": idle_call - raw_call,
                               "error_ns": _error(rec_call, raw_call)}
        out["simulator_call"] = dict(out["backend_call"])  # the same C wrapper
        out["wait_call"] = dict(out["backend_call"])
    d = _durations(tmp, fmt.ENV_STEP_BEGIN, fmt.ENV_STEP_END)
    out["env_call"] = {"per_event_ns": rec_step - raw_step,
                       "inside_ns": float(np.median(d)) if len(d) else math.nan,
                       "error_ns": _error(rec_step, raw_step)}
    return out


def main() -> None:
    tmp = Path(sys.argv[1])
    recorder = sys.argv[2] if len(sys.argv) > 2 else "native"
    print(json.dumps(run(tmp, recorder)))


if __name__ == "__main__":
    main()
