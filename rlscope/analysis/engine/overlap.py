"""The overlap sweep: split each process's timeline into disjoint regions (CPU only, GPU
only, CPU + GPU) and charge every elementary interval to an operation, phase and category.

Per thread (see docs/analysis.md for the full definition):

- the thread's CPU timeline is cut at its own events and at the start/end of the GPU
  activities it launched; each elementary interval is in the state after the thread's
  last event at or before it (innermost operation, phase, CPU category);
- the main thread is active from recording start to stop (time outside operations is kept
  as "(unannotated)"); other threads are active inside an operation or an intercepted
  backend/simulator/CUDA API call (a wait call alone does not make a thread active);
- an active interval is CPU + GPU when GPU work launched by the thread runs at the same
  time, CPU only otherwise; while the thread is idle or off the CPU (a synchronising CUDA
  call, an intercepted wait call), running GPU work makes the interval GPU only, charged
  to the operation that launched it (by correlation id, else by time) with category
  kernel/memcpy/memset.

The process roll-up sums the threads (CPU time of parallel threads adds up), and a
separate process-wide partition gives the wall time in each region over all threads and
streams (every instant counted once).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rlscope.analysis.engine import categories as C
from rlscope.analysis.engine.aggregate import aggregate, aggregate_keys
from rlscope.analysis.engine.compiles import CompileJoin, compile_records
from rlscope.analysis.engine.firstcalls import FirstCalls
from rlscope.analysis.engine.gpuwork import GpuIndex, api_threads, gpu_launch_times, gpu_table
from rlscope.analysis.engine.paths import STARTUP_IMPORTS_ID, NameTable, PathTable
from rlscope.analysis.engine.process import (
    NamedCall,
    ProcessInfo,
    ProcessResult,
    ThreadInfoOut,
    process_info,
)
from rlscope.analysis.engine.regions import process_regions, runs, thread_regions
from rlscope.analysis.engine.startup import imports
from rlscope.analysis.engine.summary import ProcessSpan
from rlscope.analysis.engine.threadstate import (
    API_BEGIN,
    API_END,
    WAIT_BEGIN,
    WAIT_END,
    Startup,
    ThreadState,
    thread_state,
)
from rlscope.analysis.engine.timebins import TimeBins
from rlscope.analysis.engine.trendbins import TrendGrid, trend_grid
from rlscope.trace import format as fmt
from rlscope.trace.data import Aggregates, Events, ProcessTrace

DENSE_LIMIT = 1 << 22  # bincount over a dense key space up to this size, else np.unique
# An aggregate state's innermost call kind -> its CPU category.
_CALL_CATEGORY = {fmt.BACKEND_CALL_BEGIN: C.BACKEND, fmt.SIMULATOR_CALL_BEGIN: C.SIMULATOR,
                  fmt.WAIT_CALL_BEGIN: C.WAITING}


class _ThreadEvents:
    """A thread's events (and its CUDA API calls) in time order."""

    def __init__(self, time: np.ndarray, kind: np.ndarray, name: np.ndarray) -> None:
        self.time, self.kind, self.name = time, kind, name


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


_TREND_BLOCK = 1 << 16  # pieces per block of the trend sums (bounds their temporaries)


@dataclass
class _Carry:
    """A thread's state after the last event of the previous batch."""

    last_time: int
    ops: list[int]  # open operations, path ids outermost first (innermost last)
    phases: list[int]  # open phases (phase ids)
    calls: list[int]  # open backend/simulator/wait call kinds, in begin order
    call_names: list[int]  # string id each of ``calls`` re-opens with (0: unnamed)
    api: int
    wait: int


class ProcessAnalyzer:
    """The overlap sweep of one process, fed its events in batches.

    Any split works as long as each thread's events stay in time order from one batch to
    the next (the recorders flush each thread's buffer in order): every thread carries its
    open scopes and last time across batches, so memory is bounded by the batch size.
    CUDA API calls and GPU activities (separate, smaller tables) are held whole.
    """

    def __init__(self, p: ProcessTrace, info: ProcessInfo, paths: PathTable,
                 phases: NameTable, progress: Callable[[int], None] | None = None,
                 live: bool = False) -> None:
        self.p, self.info, self.paths, self.phases = p, info, paths, phases
        self.progress = progress
        # A run still recording (rlscope.analysis.live): fed as its files grow, read with
        # snapshot(); no span end, so no time bins, trends or process-wide partition.
        self.live = live
        span = info.span
        if span.main_thread < 0:
            t = np.r_[p.api_calls.start_ns, p.api_calls.end_ns, p.gpu.start_ns,
                      p.gpu.end_ns]
            if len(t):  # a CUDA-only process (e.g. a C++ program): no main thread
                span = info.span = ProcessSpan(int(t.min()), int(t.max()), -1)
        self.span, self.main = span, span.main_thread
        self.cpu_bins = TimeBins(span.start_ns, span.start_ns if live else span.end_ns)
        self.trend = (TrendGrid(np.zeros(0, np.int64)) if live
                      else trend_grid(p.progress, span.start_ns, span.end_ns))
        self._trend: list[np.ndarray] = []  # (bucket, phase, path, category, ns) per batch
        self._trend_calls: list[np.ndarray] = []  # (bucket, phase, path, n)
        # Bounded traces: each thread's gap edges, and the aggregate rows charged to the
        # totals as (thread, gap, phase, path, category | -1 for calls, ns, calls).
        self._gap_edges: dict[int, tuple[list[int], list[int]]] = {}
        self._trend_gaps: list[tuple[int, int, int, int, int, int, int, int]] = []
        self.api_thread, wait, self.extra = api_threads(p)
        api = p.api_calls
        self.api_events: dict[int, list] = {}
        for t in np.unique(self.api_thread).tolist():
            sel = np.flatnonzero(self.api_thread == t)
            w = wait[sel]
            times = np.r_[api.start_ns[sel], api.end_ns[sel]]
            kinds = np.r_[np.where(w, WAIT_BEGIN, API_BEGIN),
                          np.where(w, WAIT_END, API_END)].astype(np.uint8)
            o = np.argsort(times, kind="stable")
            self.api_events[t] = [times[o], kinds[o], 0]
        g = p.gpu
        self.g_thread, self.g_when = gpu_launch_times(p, self.api_thread, self.main)
        self.g_path = np.zeros(len(g), np.int32)
        self.g_phase = np.zeros(len(g), np.int32)
        self.g_cat = (np.array([C.GPU_KIND_CATEGORY.get(k, C.KERNEL) for k in range(256)],
                               np.int64)[g.kind] if len(g) else np.zeros(0, np.int64))
        self.g_launch: dict[int, list] = {}  # thread -> [acts by launch time, next]
        self.g_index: dict[int, GpuIndex] = {}
        for t in np.unique(self.g_thread).tolist():
            acts = np.flatnonzero(self.g_thread == t)
            self.g_launch[t] = [acts[np.argsort(self.g_when[acts], kind="stable")], 0]
            self.g_index[t] = GpuIndex(g, acts)
        self._setup_startup()
        self.compiles = CompileJoin(compile_records(p.metadata))
        self.first_calls = FirstCalls(paths)
        self.first_ns: dict[int, int] = {}
        self.phase_first_ns: dict[int, int] = {}
        self.carry: dict[int, _Carry] = {}
        self.events_seen: dict[int, int] = {}
        self._sid: dict[str, int] = {}
        self._rows: list[list[np.ndarray]] = []
        self._counts: list[np.ndarray] = []
        self._calls: dict[tuple[int, int, int, int], list] = {}
        self._activity: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._gaps: list[tuple[np.ndarray, np.ndarray]] = []  # the main thread's gaps

    def _setup_startup(self) -> None:
        """The main thread's start-up: recording start to the first user event."""
        span, first = self.span, self.info.first_user_ns
        self.startup: Startup | None = None
        self.startup_imports = imports({})
        if self.main < 0 or first is None or first <= span.start_ns:
            return
        session = self.p.metadata.get(fmt.META_SESSION)
        if isinstance(session, int) and session > 0:  # a later start(): not the process's
            return
        end = min(first, span.end_ns)
        self.startup_imports = imports(self.p.metadata).within(span.start_ns, end)
        ib, ie = self.startup_imports.union()
        self.startup = Startup(end, ib, ie)
        self._startup_cuts = np.sort(np.r_[end, ib, ie])

    # -- feeding -----------------------------------------------------------------------
    def feed(self, ev: Events) -> None:
        groups = _by_thread(ev)
        for t in sorted(groups, key=lambda t: (t != self.main, t)):
            tt, kk, nn = groups[t]
            self._window(t, tt, kk, nn, final=False)
            if self.progress:
                self.progress(len(tt))

    def finish(self) -> ProcessResult:
        self._aggregated()
        if len(self.startup_imports):  # calls of the imports row: the timed imports
            self._counts.append(np.array([[self.main, 0, STARTUP_IMPORTS_ID, -1,
                                           len(self.startup_imports)]], np.int64))
        z = np.zeros(0, np.int64)
        threads = set(self.carry) | set(self.api_events) | set(self.g_launch)
        for t in sorted(threads, key=lambda t: (t != self.main, t)):
            self._window(t, z, z.astype(np.uint8), z.astype(np.uint32), final=True)
        return self._result()

    def _string_id(self, s: str) -> int:
        sid = self._sid.get(s)
        if sid is None:
            self._sid = {v: i for i, v in enumerate(self.p.strings)}
            sid = self._sid[s]
        return sid

    def _synthetic(self, c: _Carry | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Events that re-open the carried scopes at the previous batch's last time."""
        if c is None:
            z = np.zeros(0, np.int64)
            return z, z.astype(np.uint8), z.astype(np.uint32)
        # A no-op first, so the batch starts where the previous one stopped.
        kinds = ([0] + [fmt.OPERATION_BEGIN] * len(c.ops) + [fmt.PHASE_BEGIN] * len(c.phases)
                 + c.calls + [API_BEGIN] * c.api + [WAIT_BEGIN] * c.wait)
        names = ([0] + [self._string_id(self.paths.name[x]) for x in c.ops]
                 + [self._string_id(self.phases.names[x]) for x in c.phases]
                 + c.call_names + [0] * (c.api + c.wait))
        n = len(kinds)
        return (np.full(n, c.last_time, np.int64), np.array(kinds, np.uint8),
                np.array(names, np.uint32))

    def _window(self, t: int, time: np.ndarray, kind: np.ndarray, name: np.ndarray,
                final: bool) -> None:
        if len(time) > 1 and np.any(time[1:] < time[:-1]):
            o = np.argsort(time, kind="stable")
            time, kind, name = time[o], kind[o], name[o]
        if self.trend.n and len(kind):
            self._gap_times(t, time, kind)
        c = self.carry.get(t)
        if c is not None and len(time) and time[0] < c.last_time:
            time = np.maximum(time, c.last_time)  # late event: no negative durations
        if not final and not len(time):
            return
        hi = int(time[-1]) if not final else None
        api = self.api_events.get(t)
        if api is not None:
            at, ak, ptr = api
            # Calls at exactly ``hi`` wait for the next batch, which may still bring
            # events of this thread at that time (they go first, as in one pass).
            j = len(at) if hi is None else int(np.searchsorted(at, hi, side="left"))
            api_t, api_k = at[ptr:j], ak[ptr:j]
            api[2] = j
        else:
            api_t = api_k = np.zeros(0, np.int64)
        syn_t, syn_k, syn_n = self._synthetic(c)
        te = _ThreadEvents(np.r_[syn_t, time, api_t], np.r_[syn_k, kind, api_k].astype(np.uint8),
                           np.r_[syn_n, name, np.zeros(len(api_t), np.uint32)].astype(np.uint32))
        if len(api_t) and len(te.time) > 1 and np.any(te.time[1:] < te.time[:-1]):
            o = np.argsort(te.time, kind="stable")
            te.time, te.kind, te.name = te.time[o], te.kind[o], te.name[o]
        if not len(te.time):
            if not final or (c is None and t not in self.g_index):
                return
            # Nothing left but GPU work running on: one no-op event to start from.
            t0 = c.last_time if c is not None else int(self.g_index[t].starts[0])
            te = _ThreadEvents(np.array([t0], np.int64), np.zeros(1, np.uint8),
                               np.zeros(1, np.uint32))
        own_phases = t in self.info.phase_threads or t == self.main
        inherited = None
        if not own_phases and len(self.info.main_phase_times):
            inherited = (self.info.main_phase_times, self.info.main_phase_ids)
            _insert_times(te, self.info.main_phase_times)
        end = self.span.end_ns
        if final and te.time[-1] < end:  # threads stop at the process end
            _insert_times(te, np.array([end]), append=True)
        else:
            _insert_times(te, np.array([end]))
        startup = self.startup if t == self.main else None
        if startup is not None and te.time[0] < startup.end_ns:
            _insert_times(te, self._startup_cuts)
        else:
            startup = None
        if self.trend.n:
            _insert_times(te, self.trend.edges)  # a CPU interval lies in one bucket
        info = self.p.threads.get(t)
        tid, tname = (info.tid, info.name) if info else self.extra.get(t, (0, f"thread {t}"))
        s = thread_state(t, tid, tname, t == self.main, te.time, te.kind, te.name,
                         self.p.strings, self.paths, self.phases,
                         (self.span.start_ns, end), inherited, n_synthetic=len(syn_t),
                         startup=startup)
        if t == self.main:
            self._main_gaps(te)
        del te
        self._firsts(s)
        if self.compiles:  # JIT compilations: the state when each began
            self.compiles.take(t, tid, s.time, s.phase, s.path, None if final else hi)
        self.first_calls.take(t, s.time, s.path, s.phase, len(syn_t))
        self.events_seen[t] = self.events_seen.get(t, 0) + len(time) + len(api_t)
        self._launches(t, s, None if final else hi)
        top = None if final else hi
        sizes = [len(self.phases.names), len(self.paths), C.N_CATEGORIES, C.N_REGIONS]
        # The first batch of a thread also takes GPU work that ran before its first event.
        bottom = int(s.time[0]) if c is not None else None
        acts = (self.g_index[t].window(bottom, top) if t in self.g_index
                else np.zeros(0, np.int64))
        key, dur, act, busy, b = thread_regions(s, self.p.gpu, acts, self.g_path,
                                                 self.g_phase, self.g_cat, sizes,
                                                 self.g_index.get(t), bottom, top)
        cols, sums = aggregate_keys(key, sizes, dur)
        if self.trend.n:
            self._trend_add(key, dur, b, s, sizes)
        del key
        if not self.live:
            self.cpu_bins.add(b, dur, busy)
        self._rows.append([np.full(len(sums), t, np.int64), *cols, sums])
        if len(b) and not self.live:
            self._activity.append((*runs(b, dur, act), *runs(b, dur, busy)))
        what = [(-1, s.op_begin_path, s.op_begin_phase)]
        what += [(k, s.call_path[k], s.call_phase[k]) for k in s.call_path]
        for w, pth, phs in what:
            if len(pth):
                (ph_k, pa_k), n = aggregate([phs.astype(np.int64), pth.astype(np.int64)],
                                             sizes[:2], np.ones(len(pth)))
                self._counts.append(np.stack([np.full(len(n), t), ph_k, pa_k,
                                              np.full(len(n), w), n.astype(np.int64)], 1))
        self._named_calls(s)
        self.carry[t] = _Carry(int(s.time[-1]), self.paths.ancestors(s.end_path)[::-1],
                               s.end_phases, s.end_calls, s.end_call_names, s.end_api,
                               s.end_wait)

    def _named_calls(self, s: ThreadState) -> None:
        """Accumulate the batch's named backend/simulator calls (aggregated in
        thread_state): (category, phase, path, string id) -> [calls, ns]."""
        _, pa_s, nm_s = s.call_sizes
        for cat, (keys, ns, n) in s.call_name.items():
            for k, d, c in zip(keys.tolist(), ns.tolist(), n.tolist(), strict=True):
                entry = self._calls.setdefault((cat, k // (pa_s * nm_s), k // nm_s % pa_s,
                                                k % nm_s), [0, 0.0])
                entry[0] += c
                entry[1] += d

    def _main_gaps(self, te: _ThreadEvents) -> None:
        """The main thread's aggregated stretches in this batch (it is busy through them:
        the process-wide partition counts them as CPU time)."""
        b = te.time[te.kind == fmt.AGGREGATED_BEGIN]
        e = te.time[te.kind == fmt.AGGREGATED_END]
        if len(b) > len(e):  # open at the batch's end: up to its last event
            e = np.r_[e, te.time[-1]]
        if len(b):
            self._gaps.append((b, e[:len(b)]))

    def _aggregated(self) -> None:
        """Rows and counts of a bounded trace's aggregates (docs/trace-format.md): each
        state's time and calls, charged as the sweep charges the same state."""
        agg = self.p.aggregates
        if not len(agg.thread):
            return
        strings = self.p.strings
        resolved: dict[int, tuple[int, int, int, int]] = {0: (0, 0, C.PYTHON, 0)}

        def state(s: int) -> tuple[int, int, int, int]:
            """(phase id, path id, category, innermost kind) of a state."""
            got = resolved.get(s)
            if got is not None:
                return got
            parent, kind, name = agg.states.get(s, (0, 0, 0))
            phase, path, cat, _ = state(parent) if parent != s else resolved[0]
            label = strings[name] if 0 <= name < len(strings) else f"<string {name}>"
            if kind == fmt.OPERATION_BEGIN:
                path = self.paths.intern(path, label)
            elif kind == fmt.PHASE_BEGIN:
                phase = self.phases.intern(label)
            elif kind in _CALL_CATEGORY:
                cat = _CALL_CATEGORY[kind]
            resolved[s] = (phase, path, cat, kind)
            return resolved[s]

        inherited = int(self.info.main_phase_ids[-1]) if len(self.info.main_phase_ids) else 0
        rows, counts = [], []
        # When each row was written (0: unknown, a file from before the field).
        until = (agg.until_ns.tolist() if len(agg.until_ns) == len(agg.thread)
                 else [0] * len(agg.thread))
        for t, g, s, ns, calls, n, u in zip(agg.thread.tolist(), agg.gap.tolist(),
                                            agg.state.tolist(), agg.ns.tolist(),
                                            agg.calls.tolist(), agg.events.tolist(), until,
                                            strict=True):
            phase, path, cat, kind = state(s)
            main = t == self.main
            if not phase and not main and t not in self.info.phase_threads:
                phase = inherited  # as the sweep: the main thread's phase (its last)
            if ns and (main or path > 0 or cat in (C.BACKEND, C.SIMULATOR)):
                rows.append((t, phase, path, cat, C.CPU_ONLY, ns))
                if self.trend.n:
                    self._trend_gaps.append((t, g, phase, path, cat, ns, 0, u))
            if calls and kind == fmt.OPERATION_BEGIN:
                counts.append((t, phase, path, -1, calls))
                if self.trend.n:
                    self._trend_gaps.append((t, g, phase, path, -1, 0, calls, u))
            elif calls and kind in _CALL_CATEGORY:
                counts.append((t, phase, path, cat, calls))
            self.events_seen[t] = self.events_seen.get(t, 0) + n
        if rows:
            r = np.array(rows, np.float64)
            self._rows.append([r[:, i].astype(np.int64) for i in range(5)] + [r[:, 5]])
        if counts:
            self._counts.append(np.array(counts, np.int64))

    def _trend_add(self, key: np.ndarray, dur: np.ndarray, b: np.ndarray, s: ThreadState,
                   sizes: list[int]) -> None:
        """This batch's pieces and operation begins per trend bucket (regions summed)."""
        nb = self.trend.n
        inner = sizes[0] * sizes[1] * sizes[2]
        for lo in range(0, len(b), _TREND_BLOCK):  # in blocks: the sweep is at its peak
            sl = slice(lo, lo + _TREND_BLOCK)
            bk = self.trend.bucket(b[sl])
            ok = bk >= 0
            if ok.any():
                k = bk[ok].astype(np.int64) * inner + key[sl][ok] // sizes[3]
                (tb, tph, tpa, tc), ns = aggregate_keys(k, [nb, *sizes[:3]], dur[sl][ok])
                self._trend.append(np.stack([tb, tph, tpa, tc, ns.astype(np.int64)], 1))
        if len(s.op_begin_time):
            cb = self.trend.bucket(s.op_begin_time)
            ok = cb >= 0
            if ok.any():
                (tb, tph, tpa), n = aggregate([cb[ok], s.op_begin_phase[ok].astype(np.int64),
                                               s.op_begin_path[ok].astype(np.int64)],
                                              [nb, *sizes[:2]], np.ones(int(ok.sum())))
                self._trend_calls.append(np.stack([tb, tph, tpa, n.astype(np.int64)], 1))

    def _gap_times(self, t: int, time: np.ndarray, kind: np.ndarray) -> None:
        """The thread's gap edges in this batch's own events (not the re-opening ones)."""
        b = time[kind == fmt.AGGREGATED_BEGIN]
        e = time[kind == fmt.AGGREGATED_END]
        if len(b) or len(e):
            begins, ends = self._gap_edges.setdefault(t, ([], []))
            begins += b.tolist()
            ends += e.tolist()

    def _trend_gap_rows(self) -> None:
        """Aggregated stretches in the trends. A row says how much, not exactly when: it
        was charged between the previous write of its gap's rows (or the gap's start) and
        its own ``until_ns`` (rows are written every 5 s and at the gap's end; the whole
        gap for files without the field), so it is spread over the intervals in
        proportion to their overlap with that stretch (calls rounded so that they still
        add up)."""
        if not self._trend_gaps:
            return
        r = np.array(self._trend_gaps, np.int64)
        lo, hi = np.zeros(len(r), np.int64), np.zeros(len(r), np.int64)
        writes: dict[tuple[int, int], list[int]] = {}
        for t, g, u in r[:, [0, 1, 7]].tolist():
            writes.setdefault((t, g), []).append(u)
        writes = {k: sorted(set(v)) for k, v in writes.items()}
        for i, (t, g, u) in enumerate(r[:, [0, 1, 7]].tolist()):
            begins, ends = self._gap_edges.get(t, ([], []))
            g0 = begins[g] if g < len(begins) else self.span.end_ns
            g1 = ends[g] if g < len(ends) else max(self.span.end_ns, g0)
            if u <= 0:  # no write time: the whole gap
                lo[i], hi[i] = g0, g1
                continue
            w = writes[(t, g)]
            k = w.index(u)
            hi[i] = min(max(u, g0), g1)
            lo[i] = min(max(w[k - 1] if k > 0 else g0, g0), hi[i])
        frac = self._gap_fractions(lo, hi)
        time = r[:, 4] >= 0
        ri, bi = np.nonzero(frac * time[:, None])
        if len(ri):
            ns = np.rint(r[ri, 5] * frac[ri, bi]).astype(np.int64)
            self._trend.append(np.stack([bi, r[ri, 2], r[ri, 3], r[ri, 4], ns], 1))
        calls = ~time
        if calls.any():
            cum = np.rint(np.cumsum(frac[calls] * r[calls, 6][:, None], axis=1))
            n = np.diff(np.c_[np.zeros(int(calls.sum())), cum], axis=1).astype(np.int64)
            ci, bi = np.nonzero(n)
            rows = r[calls]
            self._trend_calls.append(np.stack([bi, rows[ci, 2], rows[ci, 3], n[ci, bi]], 1))

    def _gap_fractions(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """[row, interval]: the share of a row charged over [lo, hi] that goes to each
        interval. The part outside the grid is left out by time; inside, a grid cut at
        progress reports shares it by the steps reported (in a gap too: one report per
        100 ms is kept), so its time per step is the stretch's average, not the rate's
        noise; a time grid shares it by time."""
        e = self.trend.edges
        a = np.maximum(lo[:, None], e[None, :-1])
        b = np.minimum(hi[:, None], e[None, 1:])
        over = np.clip(b - a, 0, None).astype(np.float64)
        frac = over / np.maximum(hi - lo, 1)[:, None]
        if not self.trend.by_progress:
            return frac
        st = self.trend.steps.astype(np.float64)
        steps = np.where(b > a, np.interp(b, e, st) - np.interp(a, e, st), 0.0)
        steps = np.clip(steps, 0, None)
        total = steps.sum(axis=1, keepdims=True)
        by_steps = np.divide(steps, total, out=np.zeros_like(steps), where=total > 0)
        return np.where(total > 0, by_steps * frac.sum(axis=1, keepdims=True), frac)

    def _trend_result(self) -> dict[str, np.ndarray]:
        """The trend fields of the result: rows summed over threads and batches."""
        self._trend_gap_rows()
        nb, sizes = max(self.trend.n, 1), [len(self.phases.names), len(self.paths)]
        out: dict[str, np.ndarray] = {"trend_edges": self.trend.edges,
                                      "trend_steps": self.trend.steps}
        if self._trend:
            r = np.concatenate(self._trend)
            cols, ns = aggregate([r[:, 0], r[:, 1], r[:, 2], r[:, 3]],
                                 [nb, *sizes, C.N_CATEGORIES], r[:, 4].astype(np.float64))
            out["trend_rows"], out["trend_ns"] = np.stack(cols, 1), ns
        if self._trend_calls:
            r = np.concatenate(self._trend_calls)
            cols, n = aggregate([r[:, 0], r[:, 1], r[:, 2]], [nb, *sizes],
                                r[:, 3].astype(np.float64))
            out["trend_call_rows"] = np.stack(cols, 1)
            out["trend_call_n"] = np.rint(n).astype(np.int64)
        return out

    def _firsts(self, s: ThreadState) -> None:
        """Keep the first begin of each operation path and phase (row order by time)."""
        for out, ids, times in ((self.first_ns, *s.first_begin),
                                (self.phase_first_ns, s.phase_ids, s.phase_times)):
            for i, t in zip(ids.tolist(), times.tolist(), strict=True):
                if t < out.get(i, t + 1):
                    out[i] = t

    def _launches(self, t: int, s: ThreadState, hi: int | None) -> None:
        """Operation and phase at launch of the GPU work this thread launched before hi."""
        entry = self.g_launch.get(t)
        if entry is None:
            return
        order, ptr = entry
        j = len(order) if hi is None else int(np.searchsorted(self.g_when[order], hi,
                                                              side="left"))
        sel = order[ptr:j]
        entry[1] = j
        if not len(sel):
            return
        i = s.state_at(self.g_when[sel])
        ok = i >= 0
        self.g_path[sel[ok]] = s.path[i[ok]]
        self.g_phase[sel[ok]] = s.phase[i[ok]]

    # -- results -----------------------------------------------------------------------
    def snapshot(self) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
        """Live mode: what the events fed so far give, each thread up to its last event:
        the breakdown's (thread, phase, path, category, region) columns and ns, and the
        counts' rows (thread, phase, path, what) and n. The batches' rows are compacted
        into one, so memory stays bounded by the distinct keys."""
        sizes = [max(self.carry, default=0) + 1 + len(self.extra), len(self.phases.names),
                 len(self.paths), C.N_CATEGORIES, C.N_REGIONS]
        if self._rows:
            cols = [np.concatenate([r[i] for r in self._rows]) for i in range(6)]
            keys, ns = aggregate(cols[:5], sizes, cols[5])
            self._rows = [[*keys, ns]]
        else:
            keys, ns = [np.zeros(0, np.int64)] * 5, np.zeros(0)
        if self._counts:
            cnt = np.concatenate(self._counts)
            (ct, cph, cpa, cw), cn = aggregate(
                [cnt[:, 0], cnt[:, 1], cnt[:, 2], cnt[:, 3] + 1],
                [int(cnt[:, 0].max()) + 1, *sizes[1:3], C.N_CATEGORIES + 1],
                cnt[:, 4].astype(np.float64))
            count_rows = np.stack([ct, cph, cpa, cw - 1], 1)
            count_n = np.rint(cn).astype(np.int64)
            self._counts = [np.concatenate([count_rows, count_n[:, None]], 1)]
        else:
            count_rows, count_n = np.zeros((0, 4), np.int64), np.zeros(0, np.int64)
        return list(keys), ns, count_rows, count_n

    def add_aggregates(self, agg: Aggregates) -> None:
        """Live mode: a bounded trace's aggregate rows as they arrive (``agg.states``:
        every state defined so far), charged as at the end of a whole analysis."""
        self.p.aggregates = agg
        self._aggregated()

    def _result(self) -> ProcessResult:
        p, g = self.p, self.p.gpu
        n_paths, n_phases = len(self.paths), len(self.phases.names)
        if self._rows:
            cols = [np.concatenate([r[i] for r in self._rows]) for i in range(6)]
            keys, ns = aggregate(cols[:5], [max(self.carry, default=0) + 1 + len(self.extra),
                                             n_phases, n_paths, C.N_CATEGORIES,
                                             C.N_REGIONS], cols[5])
        else:
            keys, ns = [np.zeros(0, np.int64)] * 5, np.zeros(0)
        if self._counts:
            cnt = np.concatenate(self._counts)
            size_t = int(cnt[:, 0].max()) + 1
            (ct, cph, cpa, cw), cn = aggregate(
                [cnt[:, 0], cnt[:, 1], cnt[:, 2], cnt[:, 3] + 1],
                [size_t, n_phases, n_paths, C.N_CATEGORIES + 1], cnt[:, 4].astype(np.float64))
            count_rows = np.stack([ct, cph, cpa, cw - 1], 1)
            count_n = np.rint(cn).astype(np.int64)
        else:
            count_rows, count_n = np.zeros((0, 4), np.int64), np.zeros(0, np.int64)
        z = np.zeros(0, np.int64)
        cols_runs = list(zip(*self._activity, strict=True)) if self._activity else [[z]] * 4
        act_s, act_e, busy_s, busy_e = (np.concatenate(r) for r in cols_runs)
        if self._gaps:  # the main thread's aggregated stretches: busy on the CPU
            gb, ge = (np.concatenate(x) for x in zip(*self._gaps, strict=True))
            act_s, act_e = np.r_[act_s, gb], np.r_[act_e, ge]
            busy_s, busy_e = np.r_[busy_s, gb], np.r_[busy_e, ge]
        regions, covered = process_regions(act_s, act_e, busy_s, busy_e, g)
        gpu_rows = gpu_table(g, self.g_thread, self.g_phase, self.g_path, self.g_cat)
        threads = []
        for t in sorted(self.carry, key=lambda t: (t != self.main, t)):
            info = p.threads.get(t)
            tid, tname = (info.tid, info.name) if info else self.extra.get(t, (0, f"thread {t}"))
            threads.append(ThreadInfoOut(t, tid, tname, t == self.main,
                                         self.events_seen.get(t, 0)))
        su, imp = self.startup, self.startup_imports
        return ProcessResult(
            p.pid, p.header.process_name, (self.span.start_ns, self.span.end_ns), threads,
            keys[0], keys[1], keys[2], keys[3], keys[4], ns, count_rows, count_n, gpu_rows,
            regions, covered, list(p.warnings), self.info.main_phase_times,
            self.info.main_phase_ids, self.cpu_bins.ns,
            startup_ns=su.end_ns - self.span.start_ns if su is not None else 0,
            imports_ns=int((su.import_end - su.import_begin).sum()) if su is not None else 0,
            imports=[(n, int(e - b)) for n, b, e in zip(imp.names, imp.begin.tolist(),
                                                         imp.end.tolist(), strict=True)],
            first_ns=self.first_ns, phase_first_ns=self.phase_first_ns,
            **self._trend_result(),
            compiles=self.compiles.finish(), first_calls=self.first_calls.result(),
            calls=[NamedCall(cat, ph, pa, p.strings[nm], int(n), ns)
                   for (cat, ph, pa, nm), (n, ns) in self._calls.items()])


def _by_thread(ev: Events) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each thread's events (a view when the batch has one thread)."""
    if not len(ev):
        return {}
    th = ev.thread
    lo, hi = int(th.min()), int(th.max())
    if lo == hi:
        return {lo: (ev.time_ns, ev.kind, ev.name)}
    key = th.astype(np.uint16) if hi < 1 << 16 else th
    order = np.argsort(key, kind="stable")
    bounds = np.searchsorted(th[order], np.arange(lo, hi + 2))
    out = {}
    for t in range(lo, hi + 1):
        a, b = bounds[t - lo], bounds[t - lo + 1]
        if b > a:
            idx = order[a:b]
            out[t] = (ev.time_ns[idx], ev.kind[idx], ev.name[idx])
    return out


def analyze_process(p: ProcessTrace, paths: PathTable, phases: NameTable,
                    progress: Callable[[int], None] | None = None,
                    batch_events: int | None = None) -> ProcessResult:
    """Analyse a process read whole; ``batch_events`` feeds it in batches of that many
    events (for tests of the streaming path)."""
    info = process_info(p.events, p.strings, phases)
    a = ProcessAnalyzer(p, info, paths, phases, progress)
    n = len(p.events)
    if not batch_events or batch_events >= n:
        a.feed(p.events)
    else:
        for lo in range(0, n, batch_events):
            sl = slice(lo, lo + batch_events)
            ev = p.events
            a.feed(Events(ev.time_ns[sl], ev.thread[sl], ev.kind[sl], ev.name[sl]))
    return a.finish()


