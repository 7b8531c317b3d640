"""A thread's events inside one batch of the sweep (engine.overlap): a batch split by
thread, its CUDA API calls as events, no-op events inserted as cuts, and the events that
re-open the scopes a thread carried over from the previous batch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rlscope.analysis.engine.paths import NameTable, PathTable
from rlscope.analysis.engine.threadstate import API_BEGIN, API_END, WAIT_BEGIN, WAIT_END
from rlscope.trace import format as fmt
from rlscope.trace.data import Events
from rlscope.trace.gpu import CudaApiCalls


class ThreadEvents:
    """A thread's events (and its CUDA API calls) in time order."""

    def __init__(self, time: np.ndarray, kind: np.ndarray, name: np.ndarray) -> None:
        self.time, self.kind, self.name = time, kind, name


def insert_times(te: ThreadEvents, times: np.ndarray, append: bool = False) -> None:
    """Insert no-op events at ``times`` inside the thread's time range (or after it,
    with ``append``)."""
    inside = times[(times > te.time[0]) & ((times < te.time[-1]) | append)]
    if not len(inside):
        return
    pos = np.searchsorted(te.time, inside, side="right")
    te.time = np.insert(te.time, pos, inside)
    te.kind = np.insert(te.kind, pos, np.uint8(0))
    te.name = np.insert(te.name, pos, np.uint32(0))


@dataclass
class Carry:
    """A thread's state after the last event of the previous batch."""

    last_time: int
    ops: list[int]  # open operations, path ids outermost first (innermost last)
    phases: list[int]  # open phases (phase ids)
    calls: list[int]  # open backend/simulator/wait call kinds, in begin order
    call_names: list[int]  # string id each of ``calls`` re-opens with (0: unnamed)
    api: int
    wait: int


def reopening_events(c: Carry | None, string_id: Callable[[str], int], paths: PathTable,
                     phases: NameTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Events that re-open the carried scopes at the previous batch's last time."""
    if c is None:
        z = np.zeros(0, np.int64)
        return z, z.astype(np.uint8), z.astype(np.uint32)
    # A no-op first, so the batch starts where the previous one stopped.
    kinds = ([0] + [fmt.OPERATION_BEGIN] * len(c.ops) + [fmt.PHASE_BEGIN] * len(c.phases)
             + c.calls + [API_BEGIN] * c.api + [WAIT_BEGIN] * c.wait)
    names = ([0] + [string_id(paths.name[x]) for x in c.ops]
             + [string_id(phases.names[x]) for x in c.phases]
             + c.call_names + [0] * (c.api + c.wait))
    n = len(kinds)
    return (np.full(n, c.last_time, np.int64), np.array(kinds, np.uint8),
            np.array(names, np.uint32))


def by_thread(ev: Events) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each thread's events (a view when the batch has one thread)."""
    if not len(ev):
        return {}
    th = ev.thread
    lo, hi = int(th.min()), int(th.max())
    if lo == hi:
        return {lo: (ev.time_ns, ev.kind, ev.name)}
    key = th.astype(np.uint16) if hi < 1 << 16 else th
    order = np.argsort(key, kind="stable")
    bounds = np.searchsorted(th[order], np.arange(lo, hi + 2))
    out = {}
    for t in range(lo, hi + 1):
        a, b = bounds[t - lo], bounds[t - lo + 1]
        if b > a:
            idx = order[a:b]
            out[t] = (ev.time_ns[idx], ev.kind[idx], ev.name[idx])
    return out


def api_events(api: CudaApiCalls, thread: np.ndarray, wait: np.ndarray) -> dict[int, list]:
    """Per thread (``thread``: each call's), its CUDA API calls as begin/end events in time
    order (``wait``: a synchronising call), and the position the sweep has reached:
    [times, kinds, 0]."""
    out: dict[int, list] = {}
    for t in np.unique(thread).tolist():
        sel = np.flatnonzero(thread == t)
        w = wait[sel]
        times = np.r_[api.start_ns[sel], api.end_ns[sel]]
        kinds = np.r_[np.where(w, WAIT_BEGIN, API_BEGIN),
                      np.where(w, WAIT_END, API_END)].astype(np.uint8)
        o = np.argsort(times, kind="stable")
        out[t] = [times[o], kinds[o], 0]
    return out
