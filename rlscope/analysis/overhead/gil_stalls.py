"""Where the Python stack sampler stalled a process's main thread.

Each sample (rlscope.inprocess.pysampler) holds the GIL for a while: a thread running
Python pauses meanwhile (a forced switch, the sample, a switch back; kinds.PY_SAMPLE,
timed by rlscope.calibration.microbench.in_situ_pysample: ~0.15 ms here, three times the
sample's own CPU). The sampler gets the GIL at once when the thread is in a call that
released it (a torch op: in a torch loop nearly every sample lands in one), and the
thread then waits for it when the call returns, a few µs later: the stall lands at the
call's end. So each sample is charged at the main thread's next event, off the CPU (it
waited for the GIL): in full when the thread ran Python, and inside a backend or
simulator call when the call ended within 1.5x the stall after the sample (the end it
recorded, the stall included; a longer call outlived the sample and waited for
nothing), at most the time to that end; not at all in a wait call (a sleep, a pipe
read: off the CPU anyway). Other threads are not charged: the trace cannot tell which
of them wanted the GIL.
"""

from __future__ import annotations

import numpy as np

from rlscope.analysis.engine.summary import process_span
from rlscope.trace import format as fmt
from rlscope.trace.data import ProcessTrace


def stalls(p: ProcessTrace, cost_ns: float) -> np.ndarray | None:
    """Extra pre-stamp cost (ns) of each of ``p``'s events: each sample's stall (see the
    module's docstring; ``cost_ns`` in full) at the main thread's first event after it,
    for the samples inside the recording (between its first and last event). None when
    nothing is charged."""
    t = p.py_samples
    ev = p.events
    if not cost_ns > 0 or t is None or not len(t) or not len(ev):
        return None
    idx = np.flatnonzero(ev.thread == process_span(p).main_thread)
    if not len(idx):
        return None
    idx = idx[np.argsort(ev.time_ns[idx], kind="stable")]
    times, kinds = ev.time_ns[idx], ev.kind[idx]
    waiting = _open(kinds, fmt.WAIT_CALL_BEGIN, fmt.WAIT_CALL_END)
    calling = _open(kinds, fmt.BACKEND_CALL_BEGIN, fmt.BACKEND_CALL_END) \
        + _open(kinds, fmt.SIMULATOR_CALL_BEGIN, fmt.SIMULATOR_CALL_END)
    k = np.searchsorted(times, t, side="right")  # each sample's next event
    keep = (k > 0) & (k < len(times))
    t, k = t[keep], k[keep]
    to_next = (times[k] - t).astype(np.float64)
    in_call = calling[k - 1] > 0
    stall = np.where(in_call, np.where(to_next <= 1.5 * cost_ns,
                                       np.minimum(to_next, cost_ns), 0.0), cost_ns)
    stall[waiting[k - 1] > 0] = 0.0
    if not stall.any():
        return None
    extra = np.zeros(len(ev.time_ns))
    np.add.at(extra, idx[k], stall)
    return extra


def _open(kinds: np.ndarray, begin: int, end: int) -> np.ndarray:
    """How many calls of a category are open after each event."""
    return np.cumsum((kinds == begin).astype(np.int64) - (kinds == end))
