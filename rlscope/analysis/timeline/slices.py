"""Timeline tracks of one process for timeline exports: slices per thread (phases,
operations, native calls, env steps), per thread that made CUDA calls (CUDA API), per GPU
stream; launch → GPU work flows; counter tracks (timesteps).

On every slice track, slices nest: none partly overlaps another. Slices carry an index
into their track's labels (never a string per slice), so a writer interns names once per
track. With a window, only what overlaps it is kept, cut at its edges.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from rlscope.analysis.engine.scopes import Intervals, pair_scopes
from rlscope.analysis.engine.summary import process_span
from rlscope.trace import format as fmt
from rlscope.trace.data import Events, ProcessTrace
from rlscope.trace.gpu import GPU_KIND_NAMES

# What a timeline can show; ``--tracks`` picks among these (docs/rls-analyze.md).
PHASES = "phases"
OPERATIONS = "operations"
BACKEND = "backend"
SIMULATOR = "simulator"
WAIT = "wait"
ENV = "env"
CUDA_API = "cuda-api"
GPU = "gpu"
COUNTERS = "counters"
PYTHON = "python"  # Python stack samples (analysis.timeline.pysamples)
TRACK_KINDS = (PHASES, OPERATIONS, BACKEND, SIMULATOR, WAIT, ENV, CUDA_API, GPU, COUNTERS,
               PYTHON)
CALL_KINDS = (BACKEND, SIMULATOR, WAIT)  # one "native calls" track per thread
_CALL_BEGIN = {BACKEND: fmt.BACKEND_CALL_BEGIN, SIMULATOR: fmt.SIMULATOR_CALL_BEGIN,
               WAIT: fmt.WAIT_CALL_BEGIN}
# Begin kinds counted for each kind of slice (estimates; see count_slices).
_BEGIN_KINDS = {PHASES: (fmt.PHASE_BEGIN,), OPERATIONS: (fmt.OPERATION_BEGIN,),
                BACKEND: (fmt.BACKEND_CALL_BEGIN,), SIMULATOR: (fmt.SIMULATOR_CALL_BEGIN,),
                WAIT: (fmt.WAIT_CALL_BEGIN,),
                ENV: (fmt.ENV_STEP_BEGIN, fmt.ENV_RESET_BEGIN)}
_PER_THREAD = 5  # display slots per thread: phases, operations, calls, env, Python samples
_FLOW_SHIFT = 32  # flow id = (process ordinal + 1) << 32 | CUPTI correlation id


@dataclass
class Track:
    """Slices of one track, in nesting order (by start, enclosing slice first)."""

    key: str  # unique within the process, e.g. "t0.ops"
    name: str  # shown in the viewer
    sort: int  # display order within the process
    category: str
    start_ns: np.ndarray  # int64
    end_ns: np.ndarray  # int64
    label: np.ndarray  # int32 index into ``labels``, per slice
    labels: list[str]
    clipped: int = 0  # slices cut short so they nest in their enclosing slice
    flow_out: np.ndarray | None = None  # uint64 per slice: flow starting here (0: none)
    flow_in: np.ndarray | None = None  # uint64 per slice: flow ending here (0: none)

    def __len__(self) -> int:
        return len(self.start_ns)

    @property
    def names(self) -> list[str]:
        return [self.labels[i] for i in self.label.tolist()]


@dataclass
class CounterTrack:
    """Values of one counter over time. A new source of counters (e.g. a GPU utilisation
    sampler) adds its tracks in ``counter_tracks``; the writers need nothing else."""

    key: str
    name: str
    sort: int
    time_ns: np.ndarray  # int64, non-decreasing
    values: np.ndarray  # int64 or float64
    unit: str = ""

    def __len__(self) -> int:
        return len(self.time_ns)


Window = tuple[int, int] | None  # [start, end] in CLOCK_MONOTONIC ns; None: everything


def nest(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Order slices by (start, longest first) and clip any slice that would cross the end
    of its enclosing slice. Returns (order, start, end, number clipped)."""
    end = np.maximum(end, start)
    order = np.lexsort((-end, start))
    s, e = start[order], end[order].copy()
    if len(s) < 2 or np.all(e[:-1] <= s[1:]):  # disjoint already: nothing to clip
        return order, s, e, 0
    # A slice can only cross the end of an enclosing slice if it ends after the latest
    # end among the slices before it that are still open; most never do.
    run_max = np.maximum.accumulate(e)
    prev_max = np.r_[np.iinfo(np.int64).min, run_max[:-1]]
    if not np.any((e > prev_max) & (s < prev_max)):
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


def in_window(start: np.ndarray, end: np.ndarray, window: Window
              ) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """(rows kept or None for all, start, end cut at the window's edges)."""
    if window is None:
        return None, start, end
    w0, w1 = window
    keep = np.flatnonzero((start <= w1) & (end >= w0))
    return keep, np.clip(start[keep], w0, w1), np.clip(end[keep], w0, w1)


def _labels(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique codes, index of each code among them)."""
    if len(codes) and codes.min() >= 0 and codes.max() < 4 * len(codes) + 4096:
        present = np.bincount(codes) > 0  # small codes (string ids): no sort
        remap = np.cumsum(present) - 1
        return np.flatnonzero(present), remap[codes].astype(np.int32)
    uniq, inv = np.unique(codes, return_inverse=True)
    return uniq, inv.reshape(-1).astype(np.int32)


def _slice_track(key: str, name: str, sort: int, category: str, start: np.ndarray,
                 end: np.ndarray, codes: np.ndarray, label_of: Callable[[int], str],
                 window: Window) -> tuple[Track | None, np.ndarray]:
    """The track, and for each of its slices the row of the inputs it came from."""
    keep, s, e = in_window(start, end, window)
    rows = np.arange(len(start)) if keep is None else keep
    if not len(s):
        return None, rows
    order, s, e, clipped = nest(s, e)
    rows = rows[order]
    uniq, idx = _labels(codes[rows])
    return Track(key, name, sort, category, s, e, idx, [label_of(int(u)) for u in uniq],
                 clipped), rows


def _gather(parts: list[tuple[Intervals, tuple[int, int]]], name: str) -> np.ndarray:
    """One column of row ranges of intervals, concatenated (a view when only one)."""
    if len(parts) == 1:
        iv, (a, b) = parts[0]
        return getattr(iv, name)[a:b]
    return np.concatenate([getattr(iv, name)[a:b] for iv, (a, b) in parts])


def _by_thread(iv: Intervals) -> dict[int, tuple[int, int]]:
    """Row range of each thread in (thread, start)-ordered intervals."""
    if not len(iv):
        return {}
    th = iv.thread.astype(np.int64)
    cuts = np.flatnonzero(np.r_[True, th[1:] != th[:-1], True])
    return {int(th[a]): (int(a), int(b)) for a, b in itertools.pairwise(cuts.tolist())}


def _env_intervals(p: ProcessTrace, end_ns: int) -> tuple[list[Intervals], list[str]]:
    """Env steps and resets (vector envs) as intervals whose name is an index into the
    returned labels: "<vector env> step" for a vector step, "<env> step [env k]" per env."""
    env = p.env
    if not len(env):
        return [], []
    key = (env.name.astype(np.int64) << 32) | (env.index + 1).astype(np.int64) & 0xFFFFFFFF
    uniq, code = _labels(key)
    ev = Events(env.time_ns, env.thread, env.kind, code.astype(np.uint32))
    labels: list[str] = []
    out = []
    for begin, word in ((fmt.ENV_STEP_BEGIN, "step"), (fmt.ENV_RESET_BEGIN, "reset")):
        iv = pair_scopes(ev, begin, end_ns)
        iv.name = iv.name.astype(np.uint32) + len(labels)
        out.append(iv)
        for u in uniq.tolist():
            index = (u & 0xFFFFFFFF) - 1
            env_name = p.name_of(u >> 32)
            labels.append(f"{env_name} {word}" if index < 0
                          else f"{env_name} {word} [env {index}]")
    return out, labels


def process_tracks(p: ProcessTrace, kinds: frozenset[str] | set[str] = frozenset(TRACK_KINDS),
                   window: Window = None, ordinal: int = 0) -> Iterator[Track]:
    """The slice tracks of one process: per kind of slice (phases, operations, native
    calls, env steps) one track per thread, then CUDA API per thread, then GPU streams.
    One kind's intervals are held at a time. ``ordinal`` (the process's place in the
    trace) keeps flow ids unique."""
    span = process_span(p)
    ev = p.events
    if len(ev):
        threads = sorted(np.unique(ev.thread).tolist())
        hist = np.bincount(ev.kind, minlength=256)
    else:
        threads, hist = [], np.zeros(256, np.int64)
    rank = {t: r for r, t in enumerate(threads)}

    def scopes(begins: list[int]) -> list[Intervals]:
        return [pair_scopes(ev, b, span.end_ns) for b in begins if hist[b] or hist[b + 1]]

    specs: list[tuple[str, str, str, Callable[[], tuple[list[Intervals], list[str] | None]]]]
    specs = []
    if PHASES in kinds:
        specs.append(("phases", "phases", "phase", lambda: (scopes([fmt.PHASE_BEGIN]), None)))
    if OPERATIONS in kinds:
        specs.append(("ops", "operations", "operation",
                      lambda: (scopes([fmt.OPERATION_BEGIN]), None)))
    calls = [_CALL_BEGIN[k] for k in CALL_KINDS if k in kinds]
    if calls:
        specs.append(("calls", "native calls", "call", lambda: (scopes(calls), None)))
    if ENV in kinds:
        specs.append(("env", "env steps", "env", lambda: _env_intervals(p, span.end_ns)))
    for i, (key, label, cat, make) in enumerate(specs):
        ivs, labels = make()
        ranges = [_by_thread(iv) for iv in ivs]
        label_of = p.name_of if labels is None else labels.__getitem__
        for t in threads:
            parts = [(iv, r[t]) for iv, r in zip(ivs, ranges, strict=True) if t in r]
            if not parts:
                continue
            info = p.threads.get(t)
            tname = info.name if info else f"thread {t}"
            start, end, codes = (_gather(parts, f) for f in ("start_ns", "end_ns", "name"))
            tr, _ = _slice_track(f"t{t}.{key}", f"{tname}: {label}",
                                 rank[t] * _PER_THREAD + i, cat, start, end, codes,
                                 label_of, window)
            if tr is not None:
                yield tr
        del ivs, ranges
    yield from _cuda_tracks(p, kinds, window, ordinal, len(threads) * _PER_THREAD)


def _first_of_each(ids: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Of ``rows`` (in preference order), the first row of each id in ``ids[rows]``."""
    _, first = np.unique(ids[rows], return_index=True)
    return rows[first]


def _cuda_tracks(p: ProcessTrace, kinds: frozenset[str] | set[str], window: Window,
                 ordinal: int, base_sort: int) -> Iterator[Track]:
    api, g = p.api_calls, p.gpu
    want_api, want_gpu = CUDA_API in kinds and len(api), GPU in kinds and len(g)
    api_rows = in_window(api.start_ns, api.end_ns, window)[0] if want_api else None
    gpu_rows = in_window(g.start_ns, g.end_ns, window)[0] if want_gpu else None
    # Flows: each launch (first API call of a correlation id) to its GPU work (first
    # activity of it), where both ends are in the timeline.
    flow_api = np.zeros(len(api), np.uint64)
    flow_gpu = np.zeros(len(g), np.uint64)
    if want_api and want_gpu:
        ar = np.arange(len(api)) if api_rows is None else api_rows
        gr = np.arange(len(g)) if gpu_rows is None else gpu_rows
        ar = ar[api.correlation_id[ar] != 0]
        gr = gr[g.correlation_id[gr] != 0]
        ar = _first_of_each(api.correlation_id, ar[np.argsort(api.start_ns[ar], kind="stable")])
        gr = _first_of_each(g.correlation_id, gr[np.argsort(g.start_ns[gr], kind="stable")])
        common = np.intersect1d(api.correlation_id[ar], g.correlation_id[gr])
        base = np.uint64((ordinal + 1) << _FLOW_SHIFT)
        ar = ar[np.isin(api.correlation_id[ar], common)]
        gr = gr[np.isin(g.correlation_id[gr], common)]
        flow_api[ar] = base + (api.correlation_id[ar] & np.uint64(0xFFFFFFFF))
        flow_gpu[gr] = base + (g.correlation_id[gr] & np.uint64(0xFFFFFFFF))
    if want_api:
        by_tid = {t.tid: t for t in p.threads.values()}
        nstr = len(api.strings)
        for j, tid in enumerate(np.unique(api.tid).tolist()):
            sel = np.flatnonzero(api.tid == tid)
            info = by_tid.get(tid)
            tname = info.name if info else f"tid {tid}"
            codes = np.where(api.name[sel] < nstr, api.name[sel], 0).astype(np.int64)
            tr, rows = _slice_track(f"api.{tid}", f"{tname}: CUDA API", base_sort + j,
                                    "cuda_api", api.start_ns[sel], api.end_ns[sel], codes,
                                    lambda c: api.strings[c] if c else "?", window)
            if tr is not None:
                f = flow_api[sel[rows]]
                tr.flow_out = f if np.any(f) else None
                yield tr
    if want_gpu:
        nstr = len(g.strings)
        named = (g.name > 0) & (g.name < nstr)
        codes_all = np.where(named, g.name.astype(np.int64), -g.kind.astype(np.int64))

        def gpu_label(c: int) -> str:
            return g.strings[c] if c > 0 else GPU_KIND_NAMES.get(-c, "gpu")

        streams = np.unique(np.stack([g.device.astype(np.int64), g.stream.astype(np.int64)],
                                     axis=1), axis=0)
        for dev, stream in streams.tolist():
            sel = np.flatnonzero((g.device == dev) & (g.stream == stream))
            tr, rows = _slice_track(f"gpu.{dev}.{stream}", f"GPU {dev} stream {stream}",
                                    1_000_000 + dev * 10_000 + stream, "gpu", g.start_ns[sel],
                                    g.end_ns[sel], codes_all[sel], gpu_label, window)
            if tr is not None:
                f = flow_gpu[sel[rows]]
                tr.flow_in = f if np.any(f) else None
                yield tr


def counter_tracks(p: ProcessTrace, kinds: frozenset[str] | set[str] = frozenset(TRACK_KINDS),
                   window: Window = None) -> list[CounterTrack]:
    """The process's counters: timesteps, or the unit it reports progress in (from its
    progress records)."""
    if COUNTERS not in kinds:
        return []
    out = []
    pr = p.progress
    if len(pr.time_ns):
        order = np.argsort(pr.time_ns, kind="stable")
        t, v = window_samples(pr.time_ns[order], pr.timesteps[order].astype(np.int64), window)
        if len(t):
            unit = p.metadata.get(fmt.META_PROGRESS_UNIT) or fmt.PROGRESS_UNIT
            out.append(CounterTrack("timesteps", str(unit), 0, t, v, str(unit)))
    return out


def window_samples(t: np.ndarray, v: np.ndarray, window: Window
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Samples inside the window, led by the value holding at its start."""
    if window is None:
        return t, v
    w0, w1 = window
    a = int(np.searchsorted(t, w0, side="right"))
    b = int(np.searchsorted(t, w1, side="right"))
    if a > 0 and (a == len(t) or t[a] > w0):  # the value at the window's start
        return np.r_[w0, t[a:b]].astype(np.int64), np.r_[v[a - 1], v[a:b]]
    return t[a:b], v[a:b]


def count_slices(p: ProcessTrace, window: Window = None) -> dict[str, int]:
    """Slices (and counter values) each kind of track would hold: cheap counts of begin
    events (those starting in the window), for size estimates before writing."""
    ev = p.events
    if window is not None and len(ev):
        inside = (ev.time_ns >= window[0]) & (ev.time_ns <= window[1])
        kinds = ev.kind[inside]
    else:
        kinds = ev.kind
    hist = np.bincount(kinds, minlength=256) if len(kinds) else np.zeros(256, np.int64)
    out = {k: int(sum(hist[b] for b in begins)) for k, begins in _BEGIN_KINDS.items()}

    def n_in(start: np.ndarray, end: np.ndarray) -> int:
        rows = in_window(start, end, window)[0]
        return len(start) if rows is None else len(rows)

    out[CUDA_API] = n_in(p.api_calls.start_ns, p.api_calls.end_ns)
    out[GPU] = n_in(p.gpu.start_ns, p.gpu.end_ns)
    out[COUNTERS] = sum(len(c) for c in counter_tracks(p, {COUNTERS}, window))
    return out
