"""Trend buckets: a process's timeline cut into at most :data:`MAX_BUCKETS` intervals over
the whole run, so the time of each operation can be followed over training.

A process that reports progress (``rlscope.report_progress``) is cut at its progress
records (when there are more than MAX_BUCKETS, at those nearest to equal numbers of
timesteps apart), so each bucket is a number of timesteps and per-step costs follow; one
that does not (a vector-env worker) is cut into equal slices of its recorded span, which
the analysis maps onto the run's progress by time. The sweep inserts the edges as cuts,
so a CPU interval is charged to the bucket it lies in; GPU-only time is charged to the
bucket where it starts; a bounded trace's aggregated stretches are shared out by the
sweep (engine.overlap: by the steps reported in them).
Time before the first edge and after the last one is in no bucket.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rlscope.trace.data import Progress

MAX_BUCKETS = 100  # bounds the trend rows of a process, whatever the run's length
MIN_BUCKET_NS = 100_000_000  # time-based buckets: no shorter than the sampler's tick


@dataclass
class TrendGrid:
    edges: np.ndarray  # int64 ns, increasing: bucket i is [edges[i], edges[i + 1])
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # at edges

    @property
    def n(self) -> int:
        return max(len(self.edges) - 1, 0)

    @property
    def by_progress(self) -> bool:
        return len(self.steps) == len(self.edges) and len(self.edges) > 1

    def bucket(self, t: np.ndarray) -> np.ndarray:
        """The bucket of each time (-1: outside the grid)."""
        b = np.searchsorted(self.edges, t, side="right") - 1
        b[(b >= self.n)] = -1
        return b


def trend_grid(progress: Progress, start_ns: int, end_ns: int,
               max_buckets: int = MAX_BUCKETS) -> TrendGrid:
    """The buckets of a process recorded over [start_ns, end_ns] with these progress
    records (see the module's docstring)."""
    t = np.asarray(progress.time_ns, np.int64)
    o = np.argsort(t, kind="stable")
    t, steps = t[o], np.asarray(progress.timesteps, np.int64)[o]
    inside = (t >= start_ns) & (t <= end_ns)
    t, steps = t[inside], steps[inside]
    t, first = np.unique(t, return_index=True)  # one record per time: the first
    steps = steps[first]
    if len(t) >= 2:
        n = min(len(t) - 1, max_buckets)
        if steps[-1] > steps[0] and np.all(np.diff(steps) >= 0):
            # Equal numbers of steps per interval, wherever the reports are dense (a
            # bounded trace keeps one per 100 ms in its gaps, all in its windows).
            target = np.linspace(steps[0], steps[-1], n + 1)
            idx = np.searchsorted(steps, target, side="left")
        else:  # a count that restarts: equal numbers of reports
            idx = np.rint(np.linspace(0, len(t) - 1, n + 1)).astype(np.int64)
        idx = np.unique(np.clip(idx, 0, len(t) - 1))
        return TrendGrid(t[idx], steps[idx])
    length = max(int(end_ns) - int(start_ns), 0)
    n = int(min(max_buckets, length // MIN_BUCKET_NS))
    if n < 1:
        return TrendGrid(np.zeros(0, np.int64))
    return TrendGrid(int(start_ns) + (length * np.arange(n + 1, dtype=np.int64)) // n)
