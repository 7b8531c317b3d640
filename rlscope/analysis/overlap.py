"""The overlap sweep: split each process's timeline into disjoint regions (CPU only, GPU
only, CPU + GPU) and charge every elementary interval to an operation, phase and category.

Per thread (see docs/analysis.md for the full definition):

- the thread's CPU timeline is cut at its own events and at the start/end of the GPU
  activities it launched; each elementary interval is in the state after the thread's
  last event at or before it (innermost operation, phase, CPU category);
- the main thread is active from recording start to stop (time outside operations is kept
  as "(unannotated)"); other threads are active inside an operation or an intercepted
  call;
- an active interval is CPU + GPU when GPU work launched by the thread runs at the same
  time, CPU only otherwise; while the thread is idle or blocked in a synchronising CUDA
  call, running GPU work makes the interval GPU only, charged to the operation that
  launched it (by correlation id, else by time) with category kernel/memcpy/memset.

The process roll-up sums the threads (CPU time of parallel threads adds up), and a
separate process-wide partition gives the wall time in each region over all threads and
streams (every instant counted once).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rlscope.analysis import categories as C
from rlscope.analysis.paths import NameTable, PathTable
from rlscope.analysis.summary import ProcessSpan, process_span
from rlscope.analysis.threadstate import (
    API_BEGIN,
    API_END,
    WAIT_BEGIN,
    WAIT_END,
    ThreadState,
    thread_state,
)
from rlscope.trace import format as fmt
from rlscope.trace.gpu import GpuActivities
from rlscope.trace.reader import ProcessTrace

_DENSE_LIMIT = 1 << 22  # bincount over a dense key space up to this size, else np.unique


@dataclass
class ThreadInfoOut:
    index: int
    tid: int
    name: str
    main: bool
    events: int


@dataclass
class ProcessResult:
    """Aggregated results of one process; the data API turns these into DataFrames."""

    pid: int
    process: str
    span: tuple[int, int]
    threads: list[ThreadInfoOut]
    # Breakdown rows: thread, phase, path, category, region -> ns (float64 sums).
    thread: np.ndarray
    phase: np.ndarray
    path: np.ndarray
    category: np.ndarray
    region: np.ndarray
    ns: np.ndarray
    # Counts: (thread, phase, path, what) -> n; what = -1 for operation calls, else a
    # category (transitions into the backend, simulator, CUDA API).
    count_rows: np.ndarray  # int64 [k, 4]
    count_n: np.ndarray
    # GPU activity per launching operation: thread, phase, path, category, stream, n, ns.
    gpu_rows: np.ndarray  # int64 [k, 7]
    regions_ns: np.ndarray  # int64 [N_REGIONS]: process-wide partition, instants once
    covered_ns: int
    warnings: list[str] = field(default_factory=list)


def _runs(start: np.ndarray, dur: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray,
                                                                          np.ndarray]:
    """Maximal runs of consecutive elementary intervals where ``mask`` holds."""
    if not len(mask) or not mask.any():
        z = np.zeros(0, np.int64)
        return z, z
    m = mask.astype(np.int8)
    edges = np.diff(np.r_[np.int8(0), m, np.int8(0)])
    first = np.flatnonzero(edges == 1)
    last = np.flatnonzero(edges == -1) - 1
    return start[first], start[last] + dur[last]


def _count_active(starts: np.ndarray, ends: np.ndarray, at: np.ndarray) -> np.ndarray:
    """How many of the [start, end) intervals contain each point (inputs unsorted)."""
    return (np.searchsorted(np.sort(starts), at, side="right")
            - np.searchsorted(np.sort(ends), at, side="right"))


def _encode(columns: list[np.ndarray], sizes: list[int]) -> np.ndarray:
    """One int64 key per row from integer columns, each in [0, size)."""
    key = columns[0].astype(np.int64)
    for col, size in zip(columns[1:], sizes[1:], strict=True):
        key *= size
        key += col
    return key


def _aggregate_keys(key: np.ndarray, sizes: list[int], weights: np.ndarray
                    ) -> tuple[list[np.ndarray], np.ndarray]:
    """Sum ``weights`` per key; decode the non-zero groups back into columns."""
    total = int(np.prod(np.array(sizes, dtype=np.float64)))
    if total <= _DENSE_LIMIT:
        sums = np.bincount(key, weights=weights, minlength=total)
        uniq = np.flatnonzero(sums)
        sums = sums[uniq]
    else:
        uniq, inverse = np.unique(key, return_inverse=True)
        sums = np.bincount(inverse, weights=weights)
        nz = sums != 0
        uniq, sums = uniq[nz], sums[nz]
    out = []
    for size in reversed(sizes):
        out.append(uniq % size)
        uniq = uniq // size
    return out[::-1], sums


def _aggregate(columns: list[np.ndarray], sizes: list[int], weights: np.ndarray
               ) -> tuple[list[np.ndarray], np.ndarray]:
    """Group rows by integer columns (each in [0, size)) and sum ``weights``."""
    return _aggregate_keys(_encode(columns, sizes), sizes, weights)


class _ThreadEvents:
    """A thread's events (and its CUDA API calls) in time order."""

    def __init__(self, time: np.ndarray, kind: np.ndarray, name: np.ndarray) -> None:
        self.time, self.kind, self.name = time, kind, name


def _split_threads(p: ProcessTrace, api_thread: np.ndarray, wait: np.ndarray
                   ) -> dict[int, _ThreadEvents]:
    ev = p.events
    out: dict[int, _ThreadEvents] = {}
    if len(ev):
        th = ev.thread
        lo, hi = int(th.min()), int(th.max())
        if lo == hi:
            groups = {lo: None}
            order = None
        else:
            key = th.astype(np.uint16) if hi < 1 << 16 else th
            order = np.argsort(key, kind="stable")
            bounds = np.searchsorted(th[order], np.arange(lo, hi + 2))
            groups = {t: slice(bounds[t - lo], bounds[t - lo + 1])
                      for t in range(lo, hi + 1) if bounds[t - lo + 1] > bounds[t - lo]}
        for t, sl in groups.items():
            if order is None:
                tt, kk, nn = ev.time_ns, ev.kind, ev.name
            else:
                idx = order[sl]
                tt, kk, nn = ev.time_ns[idx], ev.kind[idx], ev.name[idx]
            out[t] = _ThreadEvents(tt, kk, nn)
    api = p.api_calls
    for t in np.unique(api_thread).tolist():
        sel = np.flatnonzero(api_thread == t)
        w = wait[sel]
        times = np.r_[api.start_ns[sel], api.end_ns[sel]]
        kinds = np.r_[np.where(w, WAIT_BEGIN, API_BEGIN), np.where(w, WAIT_END, API_END)]
        base = out.get(t)
        if base is None:
            base = out[t] = _ThreadEvents(np.zeros(0, np.int64), np.zeros(0, np.uint8),
                                          np.zeros(0, np.uint32))
        base.time = np.r_[base.time, times]
        base.kind = np.r_[base.kind, kinds.astype(np.uint8)]
        base.name = np.r_[base.name, np.zeros(len(times), np.uint32)]
    for te in out.values():  # out-of-order input (and merged API calls): stable sort
        if len(te.time) > 1 and np.any(te.time[1:] < te.time[:-1]):
            o = np.argsort(te.time, kind="stable")
            te.time, te.kind, te.name = te.time[o], te.kind[o], te.name[o]
    return out


def _add_boundaries(te: _ThreadEvents, times: np.ndarray) -> None:
    """Insert no-op events (kind 0) so the thread's timeline is also cut at ``times``
    (where the main thread's phase changes, for threads that inherit it)."""
    if not len(te.time) or np.any((te.kind == fmt.PHASE_BEGIN) | (te.kind == fmt.PHASE_END)):
        return
    _insert_times(te, times)


def _insert_times(te: _ThreadEvents, times: np.ndarray, append: bool = False) -> None:
    """Insert no-op events at ``times`` inside the thread's time range (or after it,
    with ``append``)."""
    inside = times[(times > te.time[0]) & ((times < te.time[-1]) | append)]
    if not len(inside):
        return
    pos = np.searchsorted(te.time, inside, side="right")
    te.time = np.insert(te.time, pos, inside)
    te.kind = np.insert(te.kind, pos, np.uint8(0))
    te.name = np.insert(te.name, pos, np.uint32(0))


def _api_threads(p: ProcessTrace) -> tuple[np.ndarray, np.ndarray, dict[int, tuple[int, str]]]:
    """Thread index of each CUDA API call (by OS tid), whether it waits, and pseudo
    threads for tids that recorded no Python events."""
    api = p.api_calls
    by_tid = {t.tid: t.index for t in p.threads.values()}
    extra: dict[int, tuple[int, str]] = {}
    next_index = max([*p.threads.keys(), int(p.events.thread.max()) if len(p.events) else -1,
                      -1]) + 1
    out = np.zeros(len(api), np.int64)
    for tid in np.unique(api.tid).tolist():
        idx = by_tid.get(tid)
        if idx is None:
            idx = by_tid[tid] = next_index
            extra[idx] = (tid, f"tid {tid}")
            next_index += 1
        out[api.tid == tid] = idx
    waiting_ids = [i for i, s in enumerate(api.strings) if s in C.WAITING_CUDA_CALLS]
    wait = np.isin(api.name, waiting_ids) if len(api) else np.zeros(0, bool)
    return out, wait, extra


def _gpu_launches(p: ProcessTrace, api_thread: np.ndarray, states: dict[int, ThreadState],
                  main: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Launching thread, path and phase of every GPU activity: by correlation id with the
    CUDA API call that launched it; failing that, the latest API call started before it;
    failing that (no API calls), the main thread at the activity's start."""
    g, api = p.gpu, p.api_calls
    n = len(g)
    thread = np.full(n, main, np.int64)
    when = g.start_ns.copy()
    if len(api):
        order = np.argsort(api.correlation_id, kind="stable")
        corr = api.correlation_id[order]
        j = np.searchsorted(corr, g.correlation_id)
        jc = np.minimum(j, len(corr) - 1)
        hit = (j < len(corr)) & (corr[jc] == g.correlation_id) & (g.correlation_id != 0)
        row = order[jc]
        by_start = np.argsort(api.start_ns, kind="stable")
        k = np.searchsorted(api.start_ns[by_start], g.start_ns, side="right") - 1
        row = np.where(hit, row, by_start[np.maximum(k, 0)])
        use = hit | (k >= 0)
        thread = np.where(use, api_thread[row], main)
        when = np.where(use, api.start_ns[row], g.start_ns)
    path = np.zeros(n, np.int32)
    phase = np.zeros(n, np.int32)
    for t in np.unique(thread).tolist():
        s = states.get(t)
        sel = np.flatnonzero(thread == t)
        if s is None or not len(s.time):
            continue
        i = s.state_at(when[sel])
        ok = i >= 0
        path[sel[ok]] = s.path[i[ok]]
        phase[sel[ok]] = s.phase[i[ok]]
    return thread, path, phase


def _gpu_only_choice(g: GpuActivities, acts: np.ndarray, at: np.ndarray) -> np.ndarray:
    """For each time in ``at``, one GPU activity (row of ``g``) among ``acts`` running
    then: per stream the one with the latest end among those started; kernels before
    copies, then the lowest stream."""
    best = np.full(len(at), -1, np.int64)
    best_score = np.full(len(at), -1, np.int64)
    prio = np.zeros(256, np.int64)
    for k, v in C.GPU_KIND_PRIORITY.items():
        prio[k] = v
    for stream in np.unique(g.stream[acts]).tolist():
        a = acts[g.stream[acts] == stream]
        a = a[np.argsort(g.start_ns[a], kind="stable")]
        ends = g.end_ns[a]
        cummax = np.maximum.accumulate(ends)
        arg = np.maximum.accumulate(np.where(ends == cummax, np.arange(len(a)), 0))
        i = np.searchsorted(g.start_ns[a], at, side="right") - 1
        ok = (i >= 0) & (cummax[np.maximum(i, 0)] > at)
        cand = a[arg[np.maximum(i, 0)]]
        score = np.where(ok, prio[g.kind[cand]], -1)
        better = score > best_score
        best[better] = cand[better]
        best_score[better] = score[better]
    return best


def analyze_process(p: ProcessTrace, paths: PathTable, phases: NameTable,
                    progress: Callable[[int], None] | None = None) -> ProcessResult:
    span = process_span(p)
    if not len(p.events):  # a CUDA-only process (e.g. a C++ program): no main thread
        t = np.r_[p.api_calls.start_ns, p.api_calls.end_ns, p.gpu.start_ns, p.gpu.end_ns]
        span = ProcessSpan(int(t.min()), int(t.max()), -1) if len(t) else span
    api_thread, wait, extra = _api_threads(p)
    per_thread = _split_threads(p, api_thread, wait)
    main = span.main_thread
    # The main thread first: threads without phases inherit its phase.
    order = sorted(per_thread, key=lambda t: (t != main, t))
    states: dict[int, ThreadState] = {}
    inherited = None
    for t in order:
        te = per_thread[t]
        if t != main and inherited is not None and len(inherited[0]):
            _add_boundaries(te, inherited[0])
        # Threads stop at the process end: open scopes run to it, later calls are cut.
        if len(te.time) and te.time[-1] != span.end_ns:
            _insert_times(te, np.array([span.end_ns]), append=True)
        info = p.threads.get(t)
        tid, name = (info.tid, info.name) if info else extra.get(t, (0, f"thread {t}"))
        s = thread_state(t, tid, name, t == main, te.time, te.kind, te.name, p.strings,
                         paths, phases, (span.start_ns, span.end_ns), inherited)
        states[t] = s
        if t == main:
            inherited = (s.phase_times, s.phase_ids)
        del per_thread[t]
        if progress:
            progress(len(te.time) // 2)

    g = p.gpu
    g_thread, g_path, g_phase = _gpu_launches(p, api_thread, states, main)
    g_cat = np.array([C.GPU_KIND_CATEGORY.get(k, C.KERNEL) for k in range(256)],
                     np.int64)[g.kind] if len(g) else np.zeros(0, np.int64)

    n_paths, n_phases = len(paths), len(phases.names)
    rows: list[tuple[list[np.ndarray], np.ndarray]] = []
    counts: list[np.ndarray] = []
    count_n: list[np.ndarray] = []
    act_s, act_e, busy_s, busy_e = [], [], [], []
    for t, s in states.items():
        acts = np.flatnonzero(g_thread == t)
        sizes = [n_phases, n_paths, C.N_CATEGORIES, C.N_REGIONS]
        key, dur, act, busy, b = _thread_regions(s, g, acts, g_path, g_phase, g_cat, sizes)
        keys, sums = _aggregate_keys(key, sizes, dur)
        del key
        rows.append(([np.full(len(sums), t, np.int64), *keys], sums))
        for lst_s, lst_e, mask in ((act_s, act_e, act), (busy_s, busy_e, busy)):
            rs, re_ = _runs(b, dur, mask)
            lst_s.append(rs)
            lst_e.append(re_)
        # Calls and transitions.
        what = [(-1, s.op_begin_path, s.op_begin_phase)]
        what += [(c, s.call_path[c], s.call_phase[c]) for c in s.call_path]
        for w, pth, phs in what:
            if not len(pth):
                continue
            (ph_k, pa_k), n = _aggregate([phs.astype(np.int64), pth.astype(np.int64)],
                                         [n_phases, n_paths], np.ones(len(pth)))
            counts.append(np.stack([np.full(len(n), t), ph_k, pa_k, np.full(len(n), w)], 1))
            count_n.append(n.astype(np.int64))
        if progress:
            progress(len(s.time) - len(s.time) // 2)

    regions, covered = _process_regions(np.concatenate(act_s or [np.zeros(0, np.int64)]),
                                        np.concatenate(act_e or [np.zeros(0, np.int64)]),
                                        np.concatenate(busy_s or [np.zeros(0, np.int64)]),
                                        np.concatenate(busy_e or [np.zeros(0, np.int64)]), g)
    cat = [np.concatenate([r[0][i] for r in rows]) if rows else np.zeros(0, np.int64)
           for i in range(5)]
    ns = np.concatenate([r[1] for r in rows]) if rows else np.zeros(0)
    gpu_rows = _gpu_table(g, g_thread, g_phase, g_path, g_cat)
    threads = [ThreadInfoOut(s.index, s.tid, s.name, s.main, len(s.time))
               for s in states.values()]
    return ProcessResult(
        p.pid, p.header.process_name, (span.start_ns, span.end_ns), threads,
        cat[0], cat[1], cat[2], cat[3], cat[4], ns,
        np.concatenate(counts) if counts else np.zeros((0, 4), np.int64),
        np.concatenate(count_n) if count_n else np.zeros(0, np.int64),
        gpu_rows, regions, covered, list(p.warnings))


def _thread_regions(s: ThreadState, g: GpuActivities, acts: np.ndarray, g_path: np.ndarray,
                    g_phase: np.ndarray, g_cat: np.ndarray, sizes: list[int]):
    """Elementary intervals of one thread: (group key, durations with 0 outside the
    thread's covered time, active mask, busy mask, interval starts)."""
    if not len(acts):  # no GPU work: the thread's own events cut its timeline
        b = s.time
        if len(b) < 2:
            z = np.zeros(0, np.int64)
            return z, np.zeros(0), np.zeros(0, bool), np.zeros(0, bool), z
        dur = np.diff(b)
        act = s.active[:-1]
        busy = act & ~s.waiting[:-1] if s.waiting.any() else act
        dur[~act] = 0
        key = _encode([s.phase[:-1], s.path[:-1], s.category[:-1]], sizes[:3])
        key *= sizes[3]  # region: CPU only
        return key, dur, act, busy, b[:-1]
    gs, ge = g.start_ns[acts], np.maximum(g.end_ns[acts], g.start_ns[acts])
    b = np.concatenate([s.time, gs, ge])
    b.sort()
    start, dur = b[:-1], np.diff(b)
    si = s.state_at(start)
    ok = si >= 0
    np.maximum(si, 0, out=si)
    act = ok & s.active[si]
    del ok
    busy = act & ~s.waiting[si]
    gpu_on = _count_active(gs, ge, start) > 0
    region = np.where(gpu_on, np.where(busy, np.int8(C.CPU_GPU), np.int8(C.GPU_ONLY)),
                      np.int8(C.CPU_ONLY))
    phase, path, cat = s.phase[si], s.path[si], s.category[si]
    del si
    gonly = np.flatnonzero(gpu_on & ~busy & (dur > 0))
    if len(gonly):
        choice = _gpu_only_choice(g, acts, start[gonly])
        found = choice >= 0
        c = choice[found]
        at = gonly[found]
        phase[at], path[at], cat[at] = g_phase[c], g_path[c], g_cat[c]
    dur[~(act | gpu_on)] = 0
    return _encode([phase, path, cat, region], sizes), dur, act, busy, start


def _process_regions(act_s, act_e, busy_s, busy_e, g: GpuActivities
                     ) -> tuple[np.ndarray, int]:
    """Process-wide partition: every instant where any thread is active or any GPU work
    runs falls in exactly one region."""
    gs, ge = g.start_ns, np.maximum(g.end_ns, g.start_ns)
    b = np.sort(np.r_[act_s, act_e, busy_s, busy_e, gs, ge])  # repeats: zero-length pieces
    out = np.zeros(C.N_REGIONS, np.int64)
    if len(b) < 2:
        return out, 0
    start, dur = b[:-1], np.diff(b)
    covered = _count_active(act_s, act_e, start) > 0
    if len(gs):
        ng = _count_active(gs, ge, start)
        covered |= ng > 0
        nb = _count_active(busy_s, busy_e, start)
        region = np.where(ng > 0, np.where(nb > 0, C.CPU_GPU, C.GPU_ONLY), C.CPU_ONLY)
    else:
        region = np.zeros(len(start), np.int64)
    out += np.bincount(region[covered], weights=dur[covered],
                       minlength=C.N_REGIONS).astype(np.int64)
    return out, int(out.sum())


def _gpu_table(g: GpuActivities, thread, phase, path, cat) -> np.ndarray:
    if not len(g):
        return np.zeros((0, 7), np.int64)
    import pandas as pd

    df = pd.DataFrame({"thread": thread, "phase": phase, "path": path, "category": cat,
                       "stream": g.stream.astype(np.int64),
                       "ns": np.maximum(g.end_ns - g.start_ns, 0)})
    agg = df.groupby(["thread", "phase", "path", "category", "stream"]).agg(
        n=("ns", "size"), ns=("ns", "sum")).reset_index()
    return agg.to_numpy(np.int64)
