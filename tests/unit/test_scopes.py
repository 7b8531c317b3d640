"""Pairing begin/end events into intervals, on hand-built and random event sequences."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rlscope.analysis.scopes import operation_intervals
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
