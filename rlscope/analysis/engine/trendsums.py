"""The sweep's sums per trend bucket (engine.trendbins): each batch's pieces and operation
begins, and a bounded trace's aggregated stretches shared out over the buckets they
cover; summed over threads and batches into the result's trend fields."""

from __future__ import annotations

import numpy as np

from rlscope.analysis.engine import categories as C
from rlscope.analysis.engine.aggregate import aggregate, aggregate_keys
from rlscope.analysis.engine.threadstate import ThreadState
from rlscope.analysis.engine.trendbins import TrendGrid
from rlscope.trace import format as fmt

_BLOCK = 1 << 16  # pieces per block of the sums (bounds their temporaries)
_ROWS = 1 << 12  # aggregate rows shared out at a time (bounds the [row, interval] shares)


class TrendSums:
    def __init__(self, grid: TrendGrid, span_end_ns: int) -> None:
        self.grid, self.span_end_ns = grid, span_end_ns
        self._ns: list[np.ndarray] = []  # (bucket, phase, path, category, ns) per batch
        self._calls: list[np.ndarray] = []  # (bucket, phase, path, n)
        # Bounded traces: each thread's gap edges, and the aggregate rows charged to the
        # totals as (thread, gap, phase, path, category | -1 for calls, ns, calls, until).
        self._gap_edges: dict[int, tuple[list[int], list[int]]] = {}
        self._gap_rows: list[tuple[int, int, int, int, int, int, int, int]] = []

    @property
    def n(self) -> int:
        return self.grid.n

    def add(self, key: np.ndarray, dur: np.ndarray, b: np.ndarray, s: ThreadState,
            sizes: list[int]) -> None:
        """A batch's pieces (the sweep's keys, ns and start times) and operation begins
        per bucket (regions summed)."""
        nb = self.grid.n
        inner = sizes[0] * sizes[1] * sizes[2]
        for lo in range(0, len(b), _BLOCK):  # in blocks: the sweep is at its peak
            sl = slice(lo, lo + _BLOCK)
            bk = self.grid.bucket(b[sl])
            ok = bk >= 0
            if ok.any():
                k = bk[ok].astype(np.int64) * inner + key[sl][ok] // sizes[3]
                (tb, tph, tpa, tc), ns = aggregate_keys(k, [nb, *sizes[:3]], dur[sl][ok])
                self._ns.append(np.stack([tb, tph, tpa, tc, ns.astype(np.int64)], 1))
        if len(s.op_begin_time):
            cb = self.grid.bucket(s.op_begin_time)
            ok = cb >= 0
            if ok.any():
                (tb, tph, tpa), n = aggregate([cb[ok], s.op_begin_phase[ok].astype(np.int64),
                                               s.op_begin_path[ok].astype(np.int64)],
                                              [nb, *sizes[:2]], np.ones(int(ok.sum())))
                self._calls.append(np.stack([tb, tph, tpa, n.astype(np.int64)], 1))

    def gap_times(self, t: int, time: np.ndarray, kind: np.ndarray) -> None:
        """The thread's gap edges in a batch's own events (not the re-opening ones)."""
        b = time[kind == fmt.AGGREGATED_BEGIN]
        e = time[kind == fmt.AGGREGATED_END]
        if len(b) or len(e):
            begins, ends = self._gap_edges.setdefault(t, ([], []))
            begins += b.tolist()
            ends += e.tolist()

    def gap_row(self, t: int, gap: int, phase: int, path: int, category: int, ns: int,
                calls: int, until_ns: int) -> None:
        """An aggregate row as charged to the totals (category -1: operation calls)."""
        self._gap_rows.append((t, gap, phase, path, category, ns, calls, until_ns))

    def _share_gaps(self) -> None:
        """Aggregated stretches in the trends. A row says how much, not exactly when: it
        was charged between the previous write of its gap's rows (or the gap's start) and
        its own ``until_ns`` (rows are written every 5 s and at the gap's end; the whole
        gap for files without the field), so it is spread over the intervals in
        proportion to their overlap with that stretch (calls rounded so that they still
        add up)."""
        if not self._gap_rows:
            return
        r = np.array(self._gap_rows, np.int64)
        lo, hi = np.zeros(len(r), np.int64), np.zeros(len(r), np.int64)
        writes: dict[tuple[int, int], list[int]] = {}
        for t, g, u in r[:, [0, 1, 7]].tolist():
            writes.setdefault((t, g), []).append(u)
        writes = {k: sorted(set(v)) for k, v in writes.items()}
        at = {k: {u: i for i, u in enumerate(v)} for k, v in writes.items()}  # u's index
        end = self.span_end_ns
        for i, (t, g, u) in enumerate(r[:, [0, 1, 7]].tolist()):
            begins, ends = self._gap_edges.get(t, ([], []))
            g0 = begins[g] if g < len(begins) else end
            g1 = ends[g] if g < len(ends) else max(end, g0)
            if u <= 0:  # no write time: the whole gap
                lo[i], hi[i] = g0, g1
                continue
            w = writes[(t, g)]
            k = at[(t, g)][u]
            hi[i] = min(max(u, g0), g1)
            lo[i] = min(max(w[k - 1] if k > 0 else g0, g0), hi[i])
        # In blocks of rows: the shares are a [row, interval] matrix (a day's 190k rows
        # x 100 intervals took 1.5 GB whole).
        for i0 in range(0, len(r), _ROWS):
            self._share_block(r[i0:i0 + _ROWS], lo[i0:i0 + _ROWS], hi[i0:i0 + _ROWS])

    def _share_block(self, r: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        frac = self._fractions(lo, hi)
        time = r[:, 4] >= 0
        ri, bi = np.nonzero(frac * time[:, None])
        if len(ri):
            ns = np.rint(r[ri, 5] * frac[ri, bi]).astype(np.int64)
            self._ns.append(np.stack([bi, r[ri, 2], r[ri, 3], r[ri, 4], ns], 1))
        calls = ~time
        if calls.any():
            cum = np.rint(np.cumsum(frac[calls] * r[calls, 6][:, None], axis=1))
            n = np.diff(np.c_[np.zeros(int(calls.sum())), cum], axis=1).astype(np.int64)
            ci, bi = np.nonzero(n)
            rows = r[calls]
            self._calls.append(np.stack([bi, rows[ci, 2], rows[ci, 3], n[ci, bi]], 1))

    def _fractions(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """[row, interval]: the share of a row charged over [lo, hi] that goes to each
        interval. The part outside the grid is left out by time; inside, a grid cut at
        progress reports shares it by the steps reported (in a gap too: one report per
        100 ms is kept), so its time per step is the stretch's average, not the rate's
        noise; a time grid shares it by time."""
        e = self.grid.edges
        a = np.maximum(lo[:, None], e[None, :-1])
        b = np.minimum(hi[:, None], e[None, 1:])
        over = np.clip(b - a, 0, None).astype(np.float64)
        frac = over / np.maximum(hi - lo, 1)[:, None]
        if not self.grid.by_progress:
            return frac
        st = self.grid.steps.astype(np.float64)
        steps = np.where(b > a, np.interp(b, e, st) - np.interp(a, e, st), 0.0)
        steps = np.clip(steps, 0, None)
        total = steps.sum(axis=1, keepdims=True)
        by_steps = np.divide(steps, total, out=np.zeros_like(steps), where=total > 0)
        return np.where(total > 0, by_steps * frac.sum(axis=1, keepdims=True), frac)

    def result(self, n_phases: int, n_paths: int) -> dict[str, np.ndarray]:
        """The trend fields of the result: rows summed over threads and batches."""
        self._share_gaps()
        nb, sizes = max(self.grid.n, 1), [n_phases, n_paths]
        out: dict[str, np.ndarray] = {"trend_edges": self.grid.edges,
                                      "trend_steps": self.grid.steps}
        if self._ns:
            r = np.concatenate(self._ns)
            cols, ns = aggregate([r[:, 0], r[:, 1], r[:, 2], r[:, 3]],
                                 [nb, *sizes, C.N_CATEGORIES], r[:, 4].astype(np.float64))
            out["trend_rows"], out["trend_ns"] = np.stack(cols, 1), ns
        if self._calls:
            r = np.concatenate(self._calls)
            cols, n = aggregate([r[:, 0], r[:, 1], r[:, 2]], [nb, *sizes],
                                r[:, 3].astype(np.float64))
            out["trend_call_rows"] = np.stack(cols, 1)
            out["trend_call_n"] = np.rint(n).astype(np.int64)
        return out
