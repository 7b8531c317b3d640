"""Joining GPU work to the threads and operations that launched it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rlscope.analysis.engine import categories as C
from rlscope.trace.data import ProcessTrace
from rlscope.trace.gpu import GpuActivities


def api_threads(p: ProcessTrace) -> tuple[np.ndarray, np.ndarray, dict[int, tuple[int, str]]]:
    """Thread index of each CUDA API call (by OS tid), whether it waits, and pseudo
    threads for tids that recorded no Python events."""
    api = p.api_calls
    by_tid = {t.tid: t.index for t in p.threads.values()}
    extra: dict[int, tuple[int, str]] = {}
    next_index = max([*p.threads.keys(), int(p.events.thread.max()) if len(p.events) else -1,
                      -1]) + 1
    out = np.zeros(len(api), np.int64)
    for tid in np.unique(api.tid).tolist():
        idx = by_tid.get(tid)
        if idx is None:
            idx = by_tid[tid] = next_index
            extra[idx] = (tid, f"tid {tid}")
            next_index += 1
        out[api.tid == tid] = idx
    waiting_ids = [i for i, s in enumerate(api.strings) if s in C.WAITING_CUDA_CALLS]
    wait = np.isin(api.name, waiting_ids) if len(api) else np.zeros(0, bool)
    return out, wait, extra


def gpu_launch_times(p: ProcessTrace, api_thread: np.ndarray, main: int
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Launching thread and launch time of every GPU activity: from the CUDA API call with
    the same correlation id; failing that, the latest API call started before it; failing
    that (no API calls), the main thread at the activity's start."""
    g, api = p.gpu, p.api_calls
    thread = np.full(len(g), main, np.int64)
    when = g.start_ns.copy()
    if len(api) and len(g):
        order = np.argsort(api.correlation_id, kind="stable")
        corr = api.correlation_id[order]
        j = np.searchsorted(corr, g.correlation_id)
        jc = np.minimum(j, len(corr) - 1)
        hit = (j < len(corr)) & (corr[jc] == g.correlation_id) & (g.correlation_id != 0)
        row = order[jc]
        by_start = np.argsort(api.start_ns, kind="stable")
        k = np.searchsorted(api.start_ns[by_start], g.start_ns, side="right") - 1
        row = np.where(hit, row, by_start[np.maximum(k, 0)])
        use = hit | (k >= 0)
        thread = np.where(use, api_thread[row], main)
        # Launched no later than it started (CUPTI and host clocks can disagree a little).
        when = np.minimum(np.where(use, api.start_ns[row], g.start_ns), g.start_ns)
    return thread, when


class GpuIndex:
    """One thread's GPU activities, indexed for time windows and GPU-only attribution."""

    def __init__(self, g: GpuActivities, acts: np.ndarray) -> None:
        self.g = g
        self.acts = acts[np.argsort(g.start_ns[acts], kind="stable")]
        self.starts = g.start_ns[self.acts]
        self.cummax_end = np.maximum.accumulate(np.maximum(g.end_ns[self.acts], self.starts))
        prio = np.zeros(256, np.int64)
        for k, v in C.GPU_KIND_PRIORITY.items():
            prio[k] = v
        self.prio = prio
        self.streams = []
        for stream in np.unique(g.stream[acts]).tolist():
            a = acts[g.stream[acts] == stream]
            a = a[np.argsort(g.start_ns[a], kind="stable")]
            ends = g.end_ns[a]
            cummax = np.maximum.accumulate(ends)
            arg = np.maximum.accumulate(np.where(ends == cummax, np.arange(len(a)), 0))
            self.streams.append((a, g.start_ns[a], cummax, arg))

    def window(self, lo: int | None, hi: int | None) -> np.ndarray:
        """Activities running at some point of [lo, hi) (None: no bound)."""
        first = 0 if lo is None else int(np.searchsorted(self.cummax_end, lo, side="right"))
        last = len(self.starts) if hi is None else int(np.searchsorted(self.starts, hi))
        return self.acts[first:last]

    def choose(self, at: np.ndarray) -> np.ndarray:
        """For each time in ``at``, one activity running then: per stream the one with the
        latest end among those started; kernels before copies, then the lowest stream."""
        best = np.full(len(at), -1, np.int64)
        best_score = np.full(len(at), -1, np.int64)
        for a, starts, cummax, arg in self.streams:
            i = np.searchsorted(starts, at, side="right") - 1
            i0 = np.maximum(i, 0)
            ok = (i >= 0) & (cummax[i0] > at)
            cand = a[arg[i0]]
            score = np.where(ok, self.prio[self.g.kind[cand]], -1)
            better = score > best_score
            best[better] = cand[better]
            best_score[better] = score[better]
        return best


def gpu_table(g: GpuActivities, thread, phase, path, cat) -> np.ndarray:
    if not len(g):
        return np.zeros((0, 7), np.int64)
    df = pd.DataFrame({"thread": thread, "phase": phase, "path": path, "category": cat,
                       "stream": g.stream.astype(np.int64),
                       "ns": np.maximum(g.end_ns - g.start_ns, 0)})
    agg = df.groupby(["thread", "phase", "path", "category", "stream"]).agg(
        n=("ns", "size"), ns=("ns", "sum")).reset_index()
    return agg.to_numpy(np.int64)
