"""Busy time on a fixed time grid: how much of each bin a set of intervals covers.

Used for "over time" views that must agree with the aggregated numbers: the time each
process's threads spent on the CPU by rlscope's categories per bin (summed over
threads, fed batch by batch by the overlap sweep), and the GPU time in kernels/copies
per bin (from merged intervals).
"""

from __future__ import annotations

import numpy as np

BIN_NS = 100_000_000  # 0.1 s: the sampler's default interval
BLOCK = 1 << 16  # intervals per block in TimeBins.add


class TimeBins:
    """Bins of ``width_ns`` from ``start_ns`` covering up to ``end_ns``; :meth:`add`
    accumulates the part of each interval inside each bin."""

    def __init__(self, start_ns: int, end_ns: int, width_ns: int = BIN_NS) -> None:
        self.start_ns, self.width_ns = int(start_ns), int(width_ns)
        self.n = max(1, -(-(int(end_ns) - self.start_ns) // self.width_ns))
        self.ns = np.zeros(self.n)

    def add(self, start: np.ndarray, dur: np.ndarray, mask: np.ndarray | None = None) -> None:
        """Add the intervals [start, start + dur) (where ``mask``), clipped to the grid.

        A block of :data:`BLOCK` intervals at a time: the sweep adds a 1M-event batch's
        pieces, and whole-batch temporaries set the analysis's peak memory. The sums are
        exact (integer ns in float64), so neither the blocks nor the path a block takes
        change a bit of the result."""
        for i in range(0, len(start), BLOCK):
            s = np.asarray(start[i:i + BLOCK], np.int64)
            d = np.asarray(dur[i:i + BLOCK], np.int64)
            m = None if mask is None else mask[i:i + BLOCK]
            if len(s) and not self._add_disjoint(s, d, m):
                self._add(s, d) if m is None else self._add(s[m], d[m])

    def _add_disjoint(self, s: np.ndarray, d: np.ndarray, m: np.ndarray | None) -> bool:
        """Intervals in time order that do not overlap (the sweep's pieces of a thread's
        timeline, a union of GPU work): the time covered before each bin edge from a
        running sum, no per-interval bin. False (nothing added) for any other block."""
        if m is not None:
            d = np.where(m, d, 0)
        e = s + d
        if not ((d >= 0).all() and (e[:-1] <= s[1:]).all()):
            return False
        lo, w = self.start_ns, self.width_ns
        first, last = max(int(s[0]), lo), min(int(e[-1]), lo + self.n * w)
        if last <= first:
            return True  # nothing on the grid
        base, top = (first - lo) // w, (last - 1 - lo) // w + 1
        edges = lo + np.arange(base, top + 1, dtype=np.int64) * w
        # Covered before t: the lengths of the intervals that begin before t, less what
        # the last of them has left after t.
        covered = np.cumsum(d)
        k = np.searchsorted(s, edges, side="left") - 1
        j = np.maximum(k, 0)
        before = np.where(k >= 0, covered[j] - np.maximum(e[j] - edges, 0), 0)
        self.ns[base:top] += np.diff(before)
        return True

    def _add(self, s: np.ndarray, d: np.ndarray) -> None:
        """Any intervals: each one's bins, clipped to the grid."""
        if not len(s):
            return
        lo, hi = self.start_ns, self.start_ns + self.n * self.width_ns
        b = np.clip(s + d, lo, hi)
        a = np.clip(s, lo, hi)
        keep = b > a
        if not keep.all():
            a, b = a[keep], b[keep]
        if not len(a):
            return
        w = self.width_ns
        i0 = (a - lo) // w
        i1 = (b - 1 - lo) // w  # an end on an edge belongs to the bin before it
        # Only the bins these intervals touch: [base, top).
        base, top = int(i0.min()), int(i1.max()) + 1
        ns = self.ns[base:top]
        m = top - base
        i0 -= base
        i1 -= base
        one = i0 == i1
        ns += np.bincount(i0[one], weights=(b - a)[one], minlength=m)
        many = ~one
        if many.any():
            j0, j1, a2, b2 = i0[many], i1[many], a[many], b[many]
            ns += np.bincount(j0, weights=lo + (base + j0 + 1) * w - a2, minlength=m)
            ns += np.bincount(j1, weights=b2 - (lo + (base + j1) * w), minlength=m)
            # Whole bins strictly between: a difference array, summed once.
            diff = np.bincount(j0 + 1, minlength=m + 1).astype(np.float64)
            diff -= np.bincount(j1, minlength=m + 1)
            ns += np.cumsum(diff)[:m] * w

    def centres_ns(self) -> np.ndarray:
        return self.start_ns + (np.arange(self.n) + 0.5) * self.width_ns
