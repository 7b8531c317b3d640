"""Python stack samples (rlscope.inprocess.pysampler) as timeline tracks: per sampled
thread, a flame chart over time. Each sample stands for its thread from its time to the
next sample (at most one sampling period); its stack is one slice per frame, outermost
on top, and consecutive samples that share a frame at the same depth, with the same
frames above it, share one slice there. The slices nest, so a writer needs nothing new.

Samples carry the recorded clock: with an overhead correction applied, the events they
sit beside moved earlier by rlscope's own cost up to then (under 1% of the run).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlscope.analysis.timeline.slices import Track, Window
from rlscope.trace.data import ProcessTrace
from rlscope.trace.pystacks_reader import PyStacks

MAX_DEPTH = 64  # frames shown per sample, outermost first (deeper ones are cut)
SLOT, PER_THREAD = 4, 5  # a thread's samples: its 5th display slot (slices.process_tracks)
_UNKNOWN_SORT = 900_000  # threads with no events: after the threads, before the GPU


def for_process(st: PyStacks, p: ProcessTrace, window: Window = None) -> PyStacks:
    """The samples of ``st`` that fall in the process's recorded time (a pid that recorded
    several sessions has one stack file for all of them), within ``window``."""
    ev = p.events.time_ns
    if not len(ev) or not len(st):
        return _take(st, np.zeros(0, np.int64))
    lo, hi = int(ev.min()), int(ev.max())
    if window is not None:
        lo, hi = max(lo, window[0]), min(hi, window[1])
    return _take(st, np.flatnonzero((st.time_ns >= lo) & (st.time_ns <= hi)))


def shifted(st: PyStacks, shift_ns: int) -> PyStacks:
    """The samples moved onto the run's clock (a host other than the reference)."""
    if not shift_ns:
        return st
    return PyStacks(st.path, st.pid, st.hz, st.functions, st.stacks, st.time_ns + shift_ns,
                    st.tid, st.stack, st.warnings)


def _take(st: PyStacks, rows: np.ndarray) -> PyStacks:
    return PyStacks(st.path, st.pid, st.hz, st.functions, st.stacks, st.time_ns[rows],
                    st.tid[rows], st.stack[rows], st.warnings)


def sample_tracks(p: ProcessTrace, st: PyStacks, window: Window = None) -> list[Track]:
    """One flame-chart track per thread of ``p`` that was sampled (``st``: its samples in
    the process's time, on the trace's clock)."""
    if not len(st):
        return []
    threads = sorted(np.unique(p.events.thread).tolist()) if len(p.events) else []
    rank = {t: r for r, t in enumerate(threads)}
    by_tid = {info.tid: (index, info.name) for index, info in p.threads.items()}
    period = int(1e9 / st.hz) if st.hz > 0 else 20_000_000
    labels = [f"{name} ({Path(file).name}:{line})" for file, line, name in st.functions]
    out = []
    for k, tid in enumerate(np.unique(st.tid).tolist()):
        sel = np.flatnonzero(st.tid == tid)
        sel = sel[np.argsort(st.time_ns[sel], kind="stable")]
        t = st.time_ns[sel]
        end = np.minimum(np.r_[t[1:], t[-1] + period], t + period)
        if window is not None:
            end = np.minimum(end, window[1])
        index, name = by_tid.get(tid, (None, f"tid {tid}"))
        sort = rank[index] * PER_THREAD + SLOT if index in rank else _UNKNOWN_SORT + k
        tr = _flame(f"py.{tid}", f"{name}: Python samples", sort, t, end,
                    [st.stacks[s] if 0 <= s < len(st.stacks) else () for s in
                     st.stack[sel].tolist()], labels)
        if tr is not None:
            out.append(tr)
    return out


def _flame(key: str, name: str, sort: int, t: np.ndarray, end: np.ndarray,
           stacks: list[tuple[int, ...]], labels: list[str]) -> Track | None:
    """Slices for samples at ``t`` (each to ``end``) with these stacks: at each depth,
    a run of consecutive samples with the same frames down to that depth is one slice."""
    starts: list[int] = []
    ends: list[int] = []
    codes: list[int] = []
    depths: list[int] = []
    # The open slices, outermost first: (frame, start). Frames match down to a depth
    # exactly when the frames above it did too, so comparing frames depth by depth from
    # the top compares the prefixes.
    open_: list[tuple[int, int]] = []
    prev_end = 0
    tl, el = t.tolist(), end.tolist()

    def close(depth: int, at: int) -> None:
        while len(open_) > depth:
            frame, s = open_.pop()
            depths.append(len(open_))
            starts.append(s)
            ends.append(at)
            codes.append(frame)

    for i, stack in enumerate(stacks):
        stack = stack[:MAX_DEPTH]
        keep = 0
        if not (i and tl[i] > prev_end):  # else the thread was not sampled in between
            n = min(len(open_), len(stack))
            while keep < n and open_[keep][0] == stack[keep]:
                keep += 1
        close(keep, prev_end)
        open_ += [(f, tl[i]) for f in stack[keep:]]
        prev_end = el[i]
    close(0, prev_end)
    if not starts:
        return None
    s, e = np.array(starts, np.int64), np.array(ends, np.int64)
    # By start, the enclosing slice first (the longer one; the outer one of equal spans).
    order = np.lexsort((np.array(depths), -e, s))
    c = np.array(codes, np.int64)[order]
    uniq, idx = np.unique(c, return_inverse=True)
    return Track(key, name, sort, "python", s[order], e[order], idx.astype(np.int32),
                 [labels[u] if 0 <= u < len(labels) else "?" for u in uniq.tolist()])
