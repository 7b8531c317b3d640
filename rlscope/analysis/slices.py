"""Timeline slices per track (thread operations, phases, native calls, CUDA API, GPU
streams) for timeline exports. On every track, slices nest: none partly overlaps another.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from rlscope.analysis.scopes import pair_scopes
from rlscope.analysis.summary import process_span
from rlscope.trace import format as fmt
from rlscope.trace.data import Events, ProcessTrace
from rlscope.trace.gpu import GPU_KIND_NAMES


@dataclass
class Track:
    key: str  # unique within the process, e.g. "t0.ops"
    name: str  # shown in the viewer
    sort: int  # display order
    start_ns: np.ndarray
    end_ns: np.ndarray
    names: list[str]
    category: str
    clipped: int = 0  # slices cut short so they nest in their enclosing slice


def nest(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Order slices by (start, longest first) and clip any slice that would cross the end
    of its enclosing slice. Returns (order, start, end, number clipped)."""
    end = np.maximum(end, start)
    order = np.lexsort((-end, start))
    s, e = start[order], end[order].copy()
    if len(s) < 2 or np.all(e[:-1] <= s[1:]):  # disjoint already: nothing to clip
        return order, s, e, 0
    clipped = 0
    stack: list[int] = []
    el = e.tolist()
    sl = s.tolist()
    for i in range(len(sl)):
        while stack and el[stack[-1]] <= sl[i]:
            stack.pop()
        if stack and el[i] > el[stack[-1]]:
            el[i] = el[stack[-1]]
            clipped += 1
        stack.append(i)
    return order, s, np.array(el, np.int64), clipped


def _scope_track(ev: Events, p: ProcessTrace, kinds: list[int], end_ns: int, key: str,
                 name: str, sort: int, category: str) -> Track | None:
    starts, ends, names = [], [], []
    for k in kinds:
        iv = pair_scopes(ev, k, end_ns)
        starts.append(iv.start_ns)
        ends.append(iv.end_ns)
        names += [p.name_of(int(n)) for n in iv.name]
    s, e = np.concatenate(starts), np.concatenate(ends)
    if not len(s):
        return None
    order, s, e, clipped = nest(s, e)
    return Track(key, name, sort, s, e, [names[i] for i in order], category, clipped)


def process_tracks(p: ProcessTrace) -> Iterator[Track]:
    span = process_span(p)
    ev = p.events
    by_tid = {t.tid: t for t in p.threads.values()}
    threads = sorted(set(np.unique(ev.thread).tolist()) if len(ev) else set())
    api_tids = np.unique(p.api_calls.tid).tolist() if len(p.api_calls) else []
    for rank, t in enumerate(threads):
        info = p.threads.get(t)
        tname = info.name if info else f"thread {t}"
        sub = ev.take(np.flatnonzero(ev.thread == t))
        base = rank * 4
        specs = (([fmt.PHASE_BEGIN], "phases", "phases", "phase"),
                 ([fmt.OPERATION_BEGIN], "ops", "operations", "operation"),
                 ([fmt.BACKEND_CALL_BEGIN, fmt.SIMULATOR_CALL_BEGIN], "calls",
                  "native calls", "call"))
        for i, (kinds, key, label, cat) in enumerate(specs):
            tr = _scope_track(sub, p, kinds, span.end_ns, f"t{t}.{key}", f"{tname}: {label}",
                              base + i, cat)
            if tr is not None:
                yield tr
    api = p.api_calls
    for j, tid in enumerate(api_tids):
        sel = np.flatnonzero(api.tid == tid)
        info = by_tid.get(tid)
        tname = info.name if info else f"tid {tid}"
        order, s, e, clipped = nest(api.start_ns[sel], api.end_ns[sel])
        names = [api.strings[int(n)] if n < len(api.strings) else "?"
                 for n in api.name[sel][order]]
        yield Track(f"api.{tid}", f"{tname}: CUDA API", 4 * len(threads) + j, s, e, names,
                    "cuda_api", clipped)
    g = p.gpu
    if len(g):
        for dev, stream in sorted({(int(d), int(s)) for d, s in zip(g.device, g.stream,
                                                                      strict=True)}):
            sel = np.flatnonzero((g.device == dev) & (g.stream == stream))
            order, s, e, clipped = nest(g.start_ns[sel], g.end_ns[sel])
            rows = sel[order]
            names = [(g.strings[int(g.name[r])] if g.name[r] and g.name[r] < len(g.strings)
                      else GPU_KIND_NAMES.get(int(g.kind[r]), "gpu")) for r in rows]
            yield Track(f"gpu.{dev}.{stream}", f"GPU {dev} stream {stream}",
                        1_000_000 + dev * 10_000 + stream, s, e, names, "gpu", clipped)
