"""Busy time on a fixed time grid: how much of each bin a set of intervals covers.

Used for "over time" views that must agree with the aggregated numbers: the time each
process's threads spent on the CPU by rlscope's categories per bin (summed over
threads, fed batch by batch by the overlap sweep), and the GPU time in kernels/copies
per bin (from merged intervals).
"""

from __future__ import annotations

import numpy as np

BIN_NS = 100_000_000  # 0.1 s: the sampler's default interval


class TimeBins:
    """Bins of ``width_ns`` from ``start_ns`` covering up to ``end_ns``; :meth:`add`
    accumulates the part of each interval inside each bin."""

    def __init__(self, start_ns: int, end_ns: int, width_ns: int = BIN_NS) -> None:
        self.start_ns, self.width_ns = int(start_ns), int(width_ns)
        self.n = max(1, -(-(int(end_ns) - self.start_ns) // self.width_ns))
        self.ns = np.zeros(self.n)

    def add(self, start: np.ndarray, dur: np.ndarray, mask: np.ndarray | None = None) -> None:
        """Add the intervals [start, start + dur) (where ``mask``), clipped to the grid."""
        s = start if mask is None else start[mask]
        d = dur if mask is None else dur[mask]
        if not len(s):
            return
        lo, hi = self.start_ns, self.start_ns + self.n * self.width_ns
        a = np.clip(s.astype(np.int64), lo, hi)
        b = np.clip(s.astype(np.int64) + d.astype(np.int64), lo, hi)
        keep = b > a
        if not keep.all():
            a, b = a[keep], b[keep]
        if not len(a):
            return
        w = self.width_ns
        i0 = (a - lo) // w
        i1 = (b - 1 - lo) // w  # an end on an edge belongs to the bin before it
        one = i0 == i1
        self.ns += np.bincount(i0[one], weights=(b - a)[one], minlength=self.n)[:self.n]
        many = ~one
        if many.any():
            j0, j1, a2, b2 = i0[many], i1[many], a[many], b[many]
            self.ns += np.bincount(j0, weights=lo + (j0 + 1) * w - a2, minlength=self.n)
            self.ns += np.bincount(j1, weights=b2 - (lo + j1 * w), minlength=self.n)
            # Whole bins strictly between: a difference array, summed once.
            diff = np.bincount(j0 + 1, minlength=self.n + 1)[:self.n + 1].astype(np.float64)
            diff -= np.bincount(j1, minlength=self.n + 1)[:self.n + 1]
            self.ns += np.cumsum(diff)[:self.n] * w

    def centres_ns(self) -> np.ndarray:
        return self.start_ns + (np.arange(self.n) + 0.5) * self.width_ns
