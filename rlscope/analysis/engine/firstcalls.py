"""The first calls of each operation, kept with their own durations, so that analysis can
set an operation's warm-up (first iterations slower than its steady state: allocator
growth, lazy initialisation, cache misses, compiling) apart (docs/analysis.md#warm-up).

Fed each batch's thread state by the sweep: a call begins where the innermost path gets
deeper and ends where it comes back above that depth; pairing at equal depth, in order,
is the scope pairing of engine.scopes on the path changes. Calls still open at the end
of a batch are carried, with their real begin times, into the next one (which re-opens
them with synthetic events at its start).
"""

from __future__ import annotations

import numpy as np

from rlscope.analysis.engine.paths import FIRST_OPERATION_ID, PathTable

KEEP = 16  # first calls kept per (thread, phase, operation path)


class FirstCalls:
    def __init__(self, paths: PathTable, keep: int = KEEP) -> None:
        self.paths, self.keep = paths, keep
        self._open: dict[int, dict[int, tuple[int, int]]] = {}  # thread -> depth -> (begin, phase)
        self._kept: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
        self._full: dict[int, set[tuple[int, int]]] = {}  # thread -> (phase, path) all kept

    def take(self, thread: int, time: np.ndarray, path: np.ndarray, phase: np.ndarray,
             n_synthetic: int) -> None:
        """One batch of a thread: ``path``/``phase`` after each event at ``time``; the
        first ``n_synthetic`` events re-open the calls carried from the previous batch."""
        if not len(path):
            return
        # Where the path changes, and what it was before (no batch-size temporaries: the
        # sweep is at its peak memory here).
        ch = np.flatnonzero(path[1:] != path[:-1]) + 1
        if path[0] != 0:
            ch = np.r_[0, ch]
        prev_ch = np.where(ch > 0, path[np.maximum(ch - 1, 0)], 0)
        carried = self._open.pop(thread, {})
        if not len(ch):
            if carried:
                self._open[thread] = carried
            return
        n_paths = len(self.paths)
        full = self._full.get(thread)
        if full is not None:  # every operation entered here has its first calls already?
            n_phases = int(phase[ch].max()) + 1
            table = np.zeros(n_phases * n_paths, bool)
            for ph, pa in full:
                if ph < n_phases:
                    table[ph * n_paths + pa] = True
            pc = path[ch]
            op = pc >= FIRST_OPERATION_ID
            if table[phase[ch][op].astype(np.int64) * n_paths + pc[op]].all():
                return  # (calls still open are of those: their begins are not needed)
        depth_of = np.asarray(self.paths.depth, np.int32)
        depth_of[:FIRST_OPERATION_ID] = -1  # the start-up is outside operations too
        new, old = depth_of[path[ch]], depth_of[prev_ch]
        begin = new > old
        level = np.where(begin, new, old)
        o = np.lexsort((ch, level))
        pos, lev, beg = ch[o], level[o], begin[o]
        pair = beg[:-1] & ~beg[1:] & (lev[:-1] == lev[1:])
        b_at, e_at = pos[:-1][pair], pos[1:][pair]
        paired = np.zeros(len(pos), bool)
        paired[:-1] |= pair
        paired[1:] |= pair
        opened = {}
        for i in pos[beg & ~paired].tolist():  # still open: carried on
            opened[int(depth_of[path[i]])] = self._real(carried, i, time, path, phase,
                                                        n_synthetic, depth_of)
        if opened:
            self._open[thread] = opened
        keep = path[b_at] >= FIRST_OPERATION_ID
        b_at, e_at = b_at[keep], e_at[keep]
        if not len(b_at):
            return
        bt, bp = time[b_at].astype(np.int64), phase[b_at].astype(np.int64)
        for x in np.flatnonzero(b_at < n_synthetic).tolist():  # carried: real begins
            bt[x], bp[x] = self._real(carried, int(b_at[x]), time, path, phase,
                                      n_synthetic, depth_of)
        # Only the first ``keep`` calls of each (phase, path) of the batch can be kept:
        # the Python loop below sees at most that many per operation, not every call.
        key = bp * n_paths + path[b_at]
        o = np.argsort(key, kind="stable")
        k = key[o]
        starts = np.r_[0, np.flatnonzero(k[1:] != k[:-1]) + 1]
        rank = np.arange(len(k)) - np.repeat(starts, np.diff(np.r_[starts, len(k)]))
        for x in np.sort(o[rank < self.keep]).tolist():
            lst = self._kept.setdefault((thread, int(bp[x]), int(path[b_at[x]])), [])
            if len(lst) < self.keep:
                lst.append((int(bt[x]), int(time[e_at[x]]) - int(bt[x])))
                if len(lst) == self.keep:
                    self._full.setdefault(thread, set()).add((int(bp[x]),
                                                              int(path[b_at[x]])))

    @staticmethod
    def _real(carried: dict[int, tuple[int, int]], i: int, time: np.ndarray,
              path: np.ndarray, phase: np.ndarray, n_synthetic: int,
              depth_of: np.ndarray) -> tuple[int, int]:
        if i < n_synthetic:  # a carried call: its begin in an earlier batch
            hit = carried.get(int(depth_of[path[i]]))
            if hit is not None:
                return hit
        return int(time[i]), int(phase[i])

    def result(self) -> np.ndarray:
        """int64 rows (thread, phase, path, begin_ns, duration_ns) in begin order."""
        rows = [(t, ph, pa, b, d) for (t, ph, pa), lst in self._kept.items()
                for b, d in lst]
        out = np.array(rows, np.int64).reshape(-1, 5)
        return out[np.argsort(out[:, 3], kind="stable")] if len(out) else out
