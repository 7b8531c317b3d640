"""Pairing begin/end events into intervals, on hand-built and random event sequences."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rlscope.analysis.engine.scopes import operation_intervals
from rlscope.trace import format as fmt
from rlscope.trace.data import Events

B, E = fmt.OPERATION_BEGIN, fmt.OPERATION_END


def events(rows: list[tuple[int, int, int, int]]) -> Events:
    """rows: (time, thread, kind, name)."""
    a = np.array(rows, dtype=np.int64).reshape(-1, 4)
    return Events(a[:, 0], a[:, 1].astype(np.uint32), a[:, 2].astype(np.uint8),
                  a[:, 3].astype(np.uint32))


def test_nested_with_exact_durations_and_self_time():
    ev = events([(0, 0, B, 1), (10, 0, B, 2), (30, 0, E, 2), (35, 0, B, 3), (40, 0, E, 3),
                 (100, 0, E, 1), (5, 1, B, 4), (50, 1, E, 4)])
    iv = operation_intervals(ev)
    got = sorted(zip(iv.thread.tolist(), iv.name.tolist(), iv.start_ns.tolist(),
                     iv.end_ns.tolist(), iv.depth.tolist(), iv.self_ns().tolist(),
                     strict=True))
    assert got == [(0, 1, 0, 100, 0, 75), (0, 2, 10, 30, 1, 20), (0, 3, 35, 40, 1, 5),
                   (1, 4, 5, 50, 0, 45)]


def test_threads_interleaved_in_file_order_and_zero_length():
    # Events of two threads interleaved as two chunks would leave them.
    ev = events([(0, 0, B, 1), (7, 1, B, 1), (7, 1, E, 1), (5, 0, E, 1), (9, 0, B, 1),
                 (9, 0, E, 1)])
    iv = operation_intervals(ev)
    assert sorted(zip(iv.thread.tolist(), iv.duration_ns.tolist(), strict=True)) == [
        (0, 0), (0, 5), (1, 0)]


def test_open_scope_after_crash_is_closed_at_trace_end():
    ev = events([(0, 0, B, 1), (10, 0, B, 2), (20, 0, E, 2), (25, 0, B, 2)])
    iv = operation_intervals(ev, end_ns=40)
    assert iv.closed.tolist() == [False, True, False]
    assert iv.end_ns.tolist() == [40, 20, 40]


def test_unmatched_end_is_counted_not_paired():
    ev = events([(0, 0, E, 1), (5, 0, B, 2), (9, 0, E, 2)])
    iv = operation_intervals(ev)
    assert len(iv) == 1 and iv.unmatched_ends == 1


def _oracle(seq):
    """Stack-based pairing of one thread's sequence of (is_begin, name)."""
    stack, out = [], []
    for t, (is_begin, name) in enumerate(seq):
        if is_begin:
            stack.append((t, name))
        elif stack:
            start, n = stack.pop()
            out.append((start, t, n, len(stack)))
    return sorted(out)


@st.composite
def balanced(draw):
    seq, depth = [], 0
    for _ in range(draw(st.integers(0, 60))):
        if depth and draw(st.booleans()):
            seq.append((False, 0))
            depth -= 1
        else:
            seq.append((True, draw(st.integers(1, 4))))
            depth += 1
    seq += [(False, 0)] * depth
    return seq


@settings(max_examples=200, deadline=None)
@given(st.lists(balanced(), min_size=1, max_size=3))
def test_pairing_matches_a_stack_oracle(threads):
    rows = []
    for th, seq in enumerate(threads):
        names: list[int] = []
        for t, (is_begin, name) in enumerate(seq):
            if is_begin:
                names.append(name)
            rows.append((t, th, B if is_begin else E, name if is_begin else names.pop()))
    iv = operation_intervals(events(rows) if rows else events([]))
    got = sorted((int(th), int(s), int(e), int(n), int(d)) for th, s, e, n, d in
                 zip(iv.thread, iv.start_ns, iv.end_ns, iv.name, iv.depth, strict=True))
    want = sorted((th, s, e, n, d) for th, seq in enumerate(threads)
                  for s, e, n, d in _oracle(seq))
    assert got == want
    # Self times of a thread's top-level scopes plus nested ones add up to the total.
    assert iv.self_ns().sum() == iv.duration_ns[iv.depth == 0].sum()


def _reference_pair_scopes(events: Events, begin_kind: int, end_ns: int) -> dict:
    """The first implementation of pair_scopes (two lexsorts, int64 everywhere): the
    leaner one must give the same intervals."""
    end_kind = begin_kind + 1
    sel = np.flatnonzero((events.kind == begin_kind) | (events.kind == end_kind))
    if len(sel) == 0:
        return {}
    thread = events.thread[sel].astype(np.int64)
    time = events.time_ns[sel]
    is_begin = events.kind[sel] == begin_kind
    name = events.name[sel]
    order = np.lexsort((np.arange(len(sel)), time, thread))
    thread, time, is_begin, name = thread[order], time[order], is_begin[order], name[order]
    step = np.where(is_begin, 1, -1)
    depth_after = np.cumsum(step)
    starts = np.flatnonzero(np.r_[True, thread[1:] != thread[:-1]])
    offset = np.repeat(depth_after[starts] - step[starts], np.diff(np.r_[starts, len(step)]))
    depth_after = depth_after - offset
    level = np.where(is_begin, depth_after, depth_after + 1)
    o = np.lexsort((np.arange(len(level)), level, thread))
    b, e = o[:-1], o[1:]
    pair = (is_begin[b] & ~is_begin[e] & (thread[b] == thread[e]) & (level[b] == level[e]))
    begins_paired, ends_paired = b[pair], e[pair]
    paired = np.zeros(len(level), bool)
    paired[begins_paired] = True
    paired[ends_paired] = True
    open_begins = np.flatnonzero(is_begin & ~paired)
    bi = np.r_[begins_paired, open_begins]
    ei = np.r_[ends_paired, np.full(len(open_begins), -1)]
    closed = np.r_[np.ones(len(begins_paired), bool), np.zeros(len(open_begins), bool)]
    end_time = np.where(closed, time[np.maximum(ei, 0)], end_ns)
    end_time = np.maximum(end_time, time[bi])
    rows = np.lexsort((bi, thread[bi]))
    bi, end_time, closed = bi[rows], end_time[rows], closed[rows]
    th, lv = thread[bi], level[bi]  # parents: one sort by a composite key
    key = (th * 1024 + lv) * (1 << 36) + bi
    order = np.argsort(key, kind="stable")
    idx = np.searchsorted(key[order], (th * 1024 + lv - 1) * (1 << 36) + bi) - 1
    cand = order[np.maximum(idx, 0)]
    ok = (idx >= 0) & (lv > 1) & (th[cand] == th) & (lv[cand] == lv - 1)
    return {"thread": thread[bi].tolist(), "name": name[bi].tolist(),
            "parent": np.where(ok, cand, -1).tolist(),
            "start": time[bi].tolist(), "end": end_time.tolist(),
            "depth": (level[bi] - 1).tolist(), "closed": closed.tolist(),
            "unmatched_ends": int(np.count_nonzero(~is_begin & ~paired)),
            "mismatches": int(np.count_nonzero(name[begins_paired] != name[ends_paired]))}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 2), st.booleans(),
                          st.integers(1, 3)), max_size=80), st.booleans())
def test_pairing_equals_the_reference_on_any_sequence(rows, time_sorted):
    """Unbalanced, interleaved threads, out-of-order and equal times."""
    if time_sorted:
        rows = sorted(rows, key=lambda r: (r[1], r[0]))
    ev = events([(t, th, B if b else E, n) for t, th, b, n in rows])
    iv = operation_intervals(ev, end_ns=100)
    want = _reference_pair_scopes(ev, B, 100)
    if not want:
        assert len(iv) == 0
        return
    assert {"thread": iv.thread.tolist(), "name": iv.name.tolist(),
            "parent": iv.parent.tolist(), "start": iv.start_ns.tolist(), "end": iv.end_ns.tolist(),
            "depth": iv.depth.tolist(), "closed": iv.closed.tolist(),
            "unmatched_ends": iv.unmatched_ends, "mismatches": iv.name_mismatches} == want
