"""Where the Python stack sampler stalled a process's main thread.

Each sample (rlscope.inprocess.pysampler) takes the GIL from the thread running Python,
which pauses meanwhile: a forced switch, the sample, a switch back (kinds.PY_SAMPLE,
timed by rlscope.calibration.microbench.in_situ_pysample: ~0.15 ms here, three times the
sample's own CPU). A sample taken while the main thread ran Python is charged at its
next event, off the CPU (it waited for the GIL); one taken inside a backend, simulator
or wait call is not (those release the GIL, or wait anyway). Other threads are not
charged: the trace cannot tell which of them held the GIL.
"""

from __future__ import annotations

import numpy as np

from rlscope.analysis.engine.summary import process_span
from rlscope.trace import format as fmt
from rlscope.trace.data import ProcessTrace

_BEGINS = (fmt.BACKEND_CALL_BEGIN, fmt.SIMULATOR_CALL_BEGIN, fmt.WAIT_CALL_BEGIN)
_ENDS = (fmt.BACKEND_CALL_END, fmt.SIMULATOR_CALL_END, fmt.WAIT_CALL_END)


def stalls(p: ProcessTrace, cost_ns: float) -> np.ndarray | None:
    """Extra pre-stamp cost (ns) of each of ``p``'s events: ``cost_ns`` at the main
    thread's first event after each sample taken while it ran Python (inside the
    recording: between its first and last event). None when nothing is charged."""
    t = p.py_samples
    ev = p.events
    if not cost_ns > 0 or t is None or not len(t) or not len(ev):
        return None
    idx = np.flatnonzero(ev.thread == process_span(p).main_thread)
    if not len(idx):
        return None
    idx = idx[np.argsort(ev.time_ns[idx], kind="stable")]
    times, kinds = ev.time_ns[idx], ev.kind[idx]
    depth = np.cumsum(np.isin(kinds, _BEGINS).astype(np.int64)
                      - np.isin(kinds, _ENDS).astype(np.int64))  # calls open after each
    k = np.searchsorted(times, t, side="right")  # each sample's next event
    k = k[(k > 0) & (k < len(times))]
    k = k[depth[k - 1] <= 0]
    if not len(k):
        return None
    extra = np.zeros(len(ev.time_ns))
    np.add.at(extra, idx[k], cost_ns)
    return extra
