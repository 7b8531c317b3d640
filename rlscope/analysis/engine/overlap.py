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

import numpy as np

from rlscope.analysis.engine import categories as C
from rlscope.analysis.engine.aggregate import aggregate, aggregate_keys
from rlscope.analysis.engine.aggregated import aggregated_rows
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
from rlscope.analysis.engine.threadevents import (
    Carry,
    ThreadEvents,
    api_events,
    by_thread,
    insert_times,
    reopening_events,
)
from rlscope.analysis.engine.threadstate import (
    Startup,
    ThreadState,
    thread_state,
)
from rlscope.analysis.engine.timebins import TimeBins
from rlscope.analysis.engine.trendbins import TrendGrid, trend_grid
from rlscope.analysis.engine.trendsums import TrendSums
from rlscope.trace import format as fmt
from rlscope.trace.data import Aggregates, Events, ProcessTrace


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
        self.trend = TrendSums(TrendGrid(np.zeros(0, np.int64)) if live
                               else trend_grid(p.progress, span.start_ns, span.end_ns),
                               span.end_ns)
        self.api_thread, wait, self.extra = api_threads(p)
        self.api_events = api_events(p.api_calls, self.api_thread, wait)
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
        self.carry: dict[int, Carry] = {}
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
        groups = by_thread(ev)
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

    def _window(self, t: int, time: np.ndarray, kind: np.ndarray, name: np.ndarray,
                final: bool) -> None:
        if len(time) > 1 and np.any(time[1:] < time[:-1]):
            o = np.argsort(time, kind="stable")
            time, kind, name = time[o], kind[o], name[o]
        if self.trend.n and len(kind):
            self.trend.gap_times(t, time, kind)
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
        syn_t, syn_k, syn_n = reopening_events(c, self._string_id, self.paths, self.phases)
        te = ThreadEvents(np.r_[syn_t, time, api_t], np.r_[syn_k, kind, api_k].astype(np.uint8),
                           np.r_[syn_n, name, np.zeros(len(api_t), np.uint32)].astype(np.uint32))
        if len(api_t) and len(te.time) > 1 and np.any(te.time[1:] < te.time[:-1]):
            o = np.argsort(te.time, kind="stable")
            te.time, te.kind, te.name = te.time[o], te.kind[o], te.name[o]
        if not len(te.time):
            if not final or (c is None and t not in self.g_index):
                return
            # Nothing left but GPU work running on: one no-op event to start from.
            t0 = c.last_time if c is not None else int(self.g_index[t].starts[0])
            te = ThreadEvents(np.array([t0], np.int64), np.zeros(1, np.uint8),
                               np.zeros(1, np.uint32))
        own_phases = t in self.info.phase_threads or t == self.main
        inherited = None
        if not own_phases and len(self.info.main_phase_times):
            inherited = (self.info.main_phase_times, self.info.main_phase_ids)
            insert_times(te, self.info.main_phase_times)
        end = self.span.end_ns
        if final and te.time[-1] < end:  # threads stop at the process end
            insert_times(te, np.array([end]), append=True)
        else:
            insert_times(te, np.array([end]))
        startup = self.startup if t == self.main else None
        if startup is not None and te.time[0] < startup.end_ns:
            insert_times(te, self._startup_cuts)
        else:
            startup = None
        if self.trend.n:
            insert_times(te, self.trend.grid.edges)  # a CPU interval lies in one bucket
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
            self.trend.add(key, dur, b, s, sizes)
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
        self.carry[t] = Carry(int(s.time[-1]), self.paths.ancestors(s.end_path)[::-1],
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

    def _main_gaps(self, te: ThreadEvents) -> None:
        """The main thread's aggregated stretches in this batch (it is busy through them:
        the process-wide partition counts them as CPU time)."""
        b = te.time[te.kind == fmt.AGGREGATED_BEGIN]
        e = te.time[te.kind == fmt.AGGREGATED_END]
        if len(b) > len(e):  # open at the batch's end: up to its last event
            e = np.r_[e, te.time[-1]]
        if len(b):
            self._gaps.append((b, e[:len(b)]))

    def _aggregated(self) -> None:
        """Rows and counts of a bounded trace's aggregates (engine.aggregated)."""
        ids = self.info.main_phase_ids
        got = aggregated_rows(self.p.aggregates, self.p.strings, self.paths, self.phases,
                              self.main, self.info.phase_threads,
                              int(ids[-1]) if len(ids) else 0,
                              self.trend if self.trend.n else None)
        if got.rows is not None:
            self._rows.append(got.rows)
        if got.counts is not None:
            self._counts.append(got.counts)
        for t, n in got.events.items():
            self.events_seen[t] = self.events_seen.get(t, 0) + n

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
        keys, ns, count_rows, count_n = self._summed()
        if self._rows:
            self._rows = [[*keys, ns]]
        if self._counts:
            self._counts = [np.concatenate([count_rows, count_n[:, None]], 1)]
        return keys, ns, count_rows, count_n

    def _summed(self) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
        """The batches' rows and counts summed by key (snapshot's fields)."""
        n_phases, n_paths = len(self.phases.names), len(self.paths)
        if self._rows:
            cols = [np.concatenate([r[i] for r in self._rows]) for i in range(6)]
            keys, ns = aggregate(cols[:5], [max(self.carry, default=0) + 1 + len(self.extra),
                                             n_phases, n_paths, C.N_CATEGORIES,
                                             C.N_REGIONS], cols[5])
        else:
            keys, ns = [np.zeros(0, np.int64)] * 5, np.zeros(0)
        if self._counts:
            cnt = np.concatenate(self._counts)
            (ct, cph, cpa, cw), cn = aggregate(
                [cnt[:, 0], cnt[:, 1], cnt[:, 2], cnt[:, 3] + 1],
                [int(cnt[:, 0].max()) + 1, n_phases, n_paths, C.N_CATEGORIES + 1],
                cnt[:, 4].astype(np.float64))
            return list(keys), ns, np.stack([ct, cph, cpa, cw - 1], 1), \
                np.rint(cn).astype(np.int64)
        return list(keys), ns, np.zeros((0, 4), np.int64), np.zeros(0, np.int64)

    def add_aggregates(self, agg: Aggregates) -> None:
        """Live mode: a bounded trace's aggregate rows as they arrive (``agg.states``:
        every state defined so far), charged as at the end of a whole analysis."""
        self.p.aggregates = agg
        self._aggregated()

    def _result(self) -> ProcessResult:
        p, g = self.p, self.p.gpu
        n_paths, n_phases = len(self.paths), len(self.phases.names)
        keys, ns, count_rows, count_n = self._summed()
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
            **self.trend.result(n_phases, n_paths),
            compiles=self.compiles.finish(), first_calls=self.first_calls.result(),
            calls=[NamedCall(cat, ph, pa, p.strings[nm], int(n), ns)
                   for (cat, ph, pa, nm), (n, ns) in self._calls.items()])


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


