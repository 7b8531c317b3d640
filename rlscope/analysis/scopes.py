"""Pair begin/end events into scope intervals (operations, phases), vectorised.

Within one thread, scopes nest: a begin at nesting level L is closed by the next end at
level L. Sorting events by (thread, level, position) therefore puts every begin right
before its end, and pairing is a comparison of neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlscope.trace import format as fmt
from rlscope.trace.data import Events


@dataclass
class Intervals:
    """One row per scope instance, sorted by (thread, start)."""

    thread: np.ndarray  # uint32
    name: np.ndarray  # uint32 string id
    start_ns: np.ndarray  # int64
    end_ns: np.ndarray  # int64
    depth: np.ndarray  # int32, 0 = outermost on its thread
    parent: np.ndarray  # int64 row of the enclosing interval, -1 if none
    closed: np.ndarray  # bool, False when the end is missing (crash): end = trace end
    unmatched_ends: int = 0  # ends with no begin (e.g. events dropped)
    name_mismatches: int = 0  # pairs whose begin and end names differ

    def __len__(self) -> int:
        return len(self.start_ns)

    @property
    def duration_ns(self) -> np.ndarray:
        return self.end_ns - self.start_ns

    def self_ns(self) -> np.ndarray:
        """Duration minus the durations of direct children (exclusive time)."""
        dur = self.duration_ns
        has_parent = self.parent >= 0
        child = np.bincount(self.parent[has_parent], weights=dur[has_parent],
                            minlength=len(dur))
        return dur - child.astype(np.int64)

    def path_ids(self) -> list[tuple[int, ...]]:
        """For each interval, the name ids from the outermost enclosing scope down."""
        paths: list[tuple[int, ...]] = []
        parent = self.parent.tolist()
        names = self.name.tolist()
        for i in range(len(names)):  # parents precede children in (thread, start) order
            p = parent[i]
            paths.append((*paths[p], names[i]) if p >= 0 else (names[i],))
        return paths


def pair_scopes(events: Events, begin_kind: int, end_ns: int | None = None) -> Intervals:
    """Intervals of the scopes whose events are ``begin_kind`` / ``begin_kind + 1``.

    ``end_ns`` closes scopes left open (a crash); defaults to the last event's time.
    """
    end_kind = begin_kind + 1
    sel = np.flatnonzero((events.kind == begin_kind) | (events.kind == end_kind))
    trace_end = int(events.time_ns.max()) if end_ns is None and len(events) else (end_ns or 0)
    if len(sel) == 0:
        return _empty()
    thread = events.thread[sel].astype(np.int64)
    time = events.time_ns[sel]
    is_begin = events.kind[sel] == begin_kind
    name = events.name[sel]
    # Order by thread, then time; keep file order for equal times (stable).
    order = np.lexsort((np.arange(len(sel)), time, thread))
    thread, time, is_begin, name = thread[order], time[order], is_begin[order], name[order]

    step = np.where(is_begin, 1, -1)
    depth_after = np.cumsum(step)
    starts = np.flatnonzero(np.r_[True, thread[1:] != thread[:-1]])
    offset = np.repeat(depth_after[starts] - step[starts], np.diff(np.r_[starts, len(step)]))
    depth_after = depth_after - offset  # depth after each event, per thread
    level = np.where(is_begin, depth_after, depth_after + 1)  # level of the scope touched

    pos = np.arange(len(level))
    o = np.lexsort((pos, level, thread))
    b, e = o[:-1], o[1:]
    pair = (is_begin[b] & ~is_begin[e] & (thread[b] == thread[e]) & (level[b] == level[e]))
    begins_paired = b[pair]
    ends_paired = e[pair]
    paired = np.zeros(len(level), bool)
    paired[begins_paired] = True
    paired[ends_paired] = True
    open_begins = np.flatnonzero(is_begin & ~paired)
    unmatched_ends = int(np.count_nonzero(~is_begin & ~paired))

    bi = np.r_[begins_paired, open_begins]
    ei = np.r_[ends_paired, np.full(len(open_begins), -1)]
    closed = np.r_[np.ones(len(begins_paired), bool), np.zeros(len(open_begins), bool)]
    end_time = np.where(closed, time[np.maximum(ei, 0)], max(trace_end, 0))
    end_time = np.maximum(end_time, time[bi])
    mismatches = int(np.count_nonzero(name[begins_paired] != name[ends_paired]))

    rows = np.lexsort((bi, thread[bi]))  # (thread, position) = (thread, start) order
    bi, end_time, closed = bi[rows], end_time[rows], closed[rows]
    lvl = level[bi]
    iv_thread = thread[bi]
    parent = _parents(iv_thread, lvl, bi)
    return Intervals(iv_thread.astype(np.uint32), name[bi], time[bi], end_time.astype(np.int64),
                     (lvl - 1).astype(np.int32), parent, closed, unmatched_ends, mismatches)


def _parents(thread: np.ndarray, level: np.ndarray, position: np.ndarray) -> np.ndarray:
    """Row of the enclosing interval: same thread, level - 1, latest begin before."""
    n = len(position)
    parent = np.full(n, -1, np.int64)
    if n == 0:
        return parent
    key = (thread * 1024 + level) * (1 << 36) + position  # sortable composite key
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    want = (thread * 1024 + level - 1) * (1 << 36) + position
    idx = np.searchsorted(sorted_key, want, side="left") - 1
    ok = (idx >= 0) & (level > 1)
    cand = order[np.maximum(idx, 0)]
    ok &= (thread[cand] == thread) & (level[cand] == level - 1)
    parent[ok] = cand[ok]
    return parent


def _empty() -> Intervals:
    z = np.zeros(0, np.int64)
    return Intervals(z.astype(np.uint32), z.astype(np.uint32), z, z, z.astype(np.int32),
                     z, z.astype(bool))


def operation_intervals(events: Events, end_ns: int | None = None) -> Intervals:
    return pair_scopes(events, fmt.OPERATION_BEGIN, end_ns)


def phase_intervals(events: Events, end_ns: int | None = None) -> Intervals:
    return pair_scopes(events, fmt.PHASE_BEGIN, end_ns)
