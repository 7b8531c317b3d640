"""Pair begin/end events into scope intervals (operations, phases), vectorised.

Within one thread, scopes nest: a begin at nesting level L is closed by the next end at
level L. Sorting events by (thread, level, position) therefore puts every begin right
before its end, and pairing is a comparison of neighbours.
"""

from __future__ import annotations

import itertools
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
    Memory: a few arrays the size of the selected events (a trace's events are usually in
    (thread, time) order already, which skips the sort).
    """
    end_kind = begin_kind + 1
    sel = np.flatnonzero((events.kind == begin_kind) | (events.kind == end_kind))
    trace_end = int(events.time_ns.max()) if end_ns is None and len(events) else (end_ns or 0)
    if len(sel) == 0:
        return _empty()
    thread = events.thread[sel]
    time = events.time_ns[sel]
    if not _thread_time_sorted(thread, time):
        # Order by thread, then time; equal times keep file order (lexsort is stable).
        order = np.lexsort((time, thread))
        sel, thread, time = sel[order], thread[order], time[order]
        del order
    is_begin = events.kind[sel] == begin_kind
    name = events.name[sel]
    del sel
    n = len(is_begin)

    depth_after = np.cumsum(np.where(is_begin, 1, -1), dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, thread[1:] != thread[:-1]])
    if len(starts) > 1:  # depth after each event, per thread
        step0 = np.where(is_begin[starts], 1, -1)
        depth_after -= np.repeat(depth_after[starts] - step0, np.diff(np.r_[starts, n]))
    level = depth_after + ~is_begin  # level of the scope each event touches
    del depth_after

    # A begin at level L is closed by the next end at level L on its thread: order by
    # (thread, level), stably, and pair neighbours.
    lo = int(level.min())
    span = int(level.max()) - lo + 1
    if len(starts) == 1 and span < 1 << 15:
        key = (level - lo).astype(np.int16)  # a radix sort
    else:
        rank = np.repeat(np.arange(len(starts), dtype=np.int64), np.diff(np.r_[starts, n]))
        key = rank * span + (level - lo)
        del rank
    o = np.argsort(key, kind="stable")
    b, e = o[:-1], o[1:]
    pair = is_begin[b] & ~is_begin[e] & (key[b] == key[e])
    del key
    begins_paired = b[pair]
    ends_paired = e[pair]
    del o, b, e, pair
    paired = np.zeros(n, bool)
    paired[begins_paired] = True
    paired[ends_paired] = True
    open_begins = np.flatnonzero(is_begin & ~paired)
    unmatched_ends = int(np.count_nonzero(~is_begin & ~paired))
    del paired
    mismatches = int(np.count_nonzero(name[begins_paired] != name[ends_paired]))

    # Per begin position: its end time and whether it closed; rows in (thread, start)
    # order are the begins in position order.
    end_at = np.full(n, max(trace_end, 0), np.int64)
    end_at[begins_paired] = time[ends_paired]
    closed_at = np.zeros(n, bool)
    closed_at[begins_paired] = True
    del ends_paired
    bi = np.sort(np.r_[begins_paired, open_begins])
    del begins_paired, open_begins
    start = time[bi]
    end_time = np.maximum(end_at[bi], start)
    closed = closed_at[bi]
    del end_at, closed_at
    lvl = level[bi]
    iv_thread = thread[bi]
    parent = _parents(iv_thread.astype(np.int64), lvl, bi)
    return Intervals(iv_thread.astype(np.uint32), name[bi], start, end_time,
                     (lvl - 1).astype(np.int32), parent, closed, unmatched_ends, mismatches)


def _thread_time_sorted(thread: np.ndarray, time: np.ndarray) -> bool:
    """Whether events are in (thread, time) order (a single thread in time order, the
    usual case, or threads one after the other)."""
    if len(thread) < 2:
        return True
    t0, t1 = thread[:-1], thread[1:]
    return bool(np.all((t1 > t0) | ((t1 == t0) & (time[1:] >= time[:-1]))))


def _parents(thread: np.ndarray, level: np.ndarray, position: np.ndarray) -> np.ndarray:
    """Row of the enclosing interval: same thread, level - 1, latest begin before. Rows
    are in (thread, position) order; one pass per nesting level."""
    n = len(position)
    parent = np.full(n, -1, np.int64)
    if n == 0:
        return parent
    lo, hi = int(level.min()), int(level.max())
    key = (level - lo).astype(np.int16) if hi - lo < 1 << 15 else level
    order = np.argsort(key, kind="stable")  # by level; row order within a level
    lv = level[order]
    cuts = np.flatnonzero(np.r_[True, lv[1:] != lv[:-1], True]).tolist()
    groups = {int(lv[a]): order[a:b] for a, b in itertools.pairwise(cuts)}
    for lvl, rows in groups.items():
        outer = groups.get(lvl - 1)
        if outer is None or lvl <= 1:
            continue
        idx = np.searchsorted(position[outer], position[rows]) - 1
        ok = idx >= 0
        cand = outer[np.maximum(idx, 0)]
        ok &= thread[cand] == thread[rows]
        parent[rows[ok]] = cand[ok]
    return parent


def _empty() -> Intervals:
    z = np.zeros(0, np.int64)
    return Intervals(z.astype(np.uint32), z.astype(np.uint32), z, z, z.astype(np.int32),
                     z, z.astype(bool))


def operation_intervals(events: Events, end_ns: int | None = None) -> Intervals:
    return pair_scopes(events, fmt.OPERATION_BEGIN, end_ns)


def phase_intervals(events: Events, end_ns: int | None = None) -> Intervals:
    return pair_scopes(events, fmt.PHASE_BEGIN, end_ns)
