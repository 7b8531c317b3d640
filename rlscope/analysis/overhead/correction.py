"""Overhead correction: remove each book-keeping event's cost where it was incurred.

Every event of a kind with a calibrated cost (docs/overhead-correction.md) delayed
everything its thread did afterwards. The cost of a begin/end pair is split into the
part *inside* the interval it times (half paid after the begin's clock read, half before
the end's) and the part *outside* (half before the begin's, half after the end's). So on
each thread the corrected time of event i is

    t'_i = t_i - (costs of every earlier event on the thread) - (pre-stamp part of i)

which shrinks each interval by exactly the overhead it absorbed, and removes the outside
part from the enclosing scope. The timeline is corrected before the overlap sweep, so
every downstream number (breakdown, plots, timeline, compare) is corrected.

Threads other than the main one start from the main thread's shift at their first event
(they were started by it). A process that waits on vector-env workers or on its pool
tasks' results is corrected again once the workers are: each wait loses what the workers'
book-keeping added to it (rlscope.analysis.overhead.worker_waits, .task_waits). GPU
activities move with the API call that launched them. The per-process cost lies before
recording starts and after it stops; it only enters the corrected total of the run.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rlscope.analysis.engine.summary import process_span
from rlscope.analysis.overhead import gil_stalls, passed_calls, task_waits, worker_waits
from rlscope.analysis.overhead.kinds import (
    CUDA_API,
    GPU_ACTIVITY,
    PAIR_KINDS,
    PASSED_CALL,
    POOL_CALL,
    POOL_TASK,
    PROCESS,
    PY_SAMPLE,
    RLSCOPE_IMPORT,
    count_process,
)
from rlscope.analysis.overhead.model import Calibration, KindCost
from rlscope.trace import format as fmt
from rlscope.trace.data import Aggregates, Events, ProcessTrace, Progress, Trace


@dataclass
class ProcessCorrection:
    pid: int
    removed_ns: dict[int, int]  # thread index -> overhead removed from its timeline
    main_removed_ns: int  # removed from the main thread (its span shrinks by this)
    fixed_ns: float  # per-process cost (outside the recorded span)
    threads_ns: float = 0.0  # CPU of rlscope's own threads (writer, sampler): off-timeline
    error_ns: float = 0.0  # the costs' error bars times this process's events
    # Removed from its waits on vector-env workers and pool tasks that book-keeping
    # slowed (rlscope.analysis.overhead.worker_waits, .task_waits), and its main thread's
    # GIL waits for the Python stack sampler (.gil_stalls): in removed_ns, off the CPU.
    waits_ns: float = 0.0
    # Its waits on Ray workers (ray.get / ray.wait) left as recorded: an actor's on other
    # actors, or a driver's whose workers recorded no calls (the report says so).
    ray_waits: int = 0
    # Pool tasks it ran for another process while no cost prices them (a calibration
    # made before the pool kinds): the waits for their results keep the integration's
    # work per task (the report says so).
    pool_tasks: int = 0
    import_ns: float = 0.0  # of fixed_ns: importing rlscope (kinds.RLSCOPE_IMPORT)


@dataclass
class CorrectionSummary:
    processes: list[ProcessCorrection] = field(default_factory=list)

    def root(self) -> ProcessCorrection | None:
        return self.processes[0] if self.processes else None

    def run_overhead_s(self) -> float:
        """Overhead on the critical path of the run: the first (root) process's main
        thread plus its fixed cost. Children's overhead delays the run only where the
        parent waits for them; it is not counted here."""
        r = self.root()
        return 0.0 if r is None else (r.main_removed_ns + r.fixed_ns) / 1e9

    def tree_overhead_s(self) -> float:
        """CPU time book-keeping took in the whole process tree: every thread of every
        process, and each process's fixed cost (what a process tree's CPU time holds)."""
        return sum(sum(p.removed_ns.values()) - p.waits_ns + p.fixed_ns + p.threads_ns
                   for p in self.processes) / 1e9

    def tree_import_s(self) -> float:
        """Of :meth:`tree_overhead_s`: importing rlscope, in the processes charged it."""
        return sum(p.import_ns for p in self.processes) / 1e9

    def root_import_s(self) -> float:
        """Of :meth:`tree_import_s`: the root process's."""
        r = self.root()
        return 0.0 if r is None else r.import_ns / 1e9

    def tree_error_s(self) -> float:
        """The error bar of :meth:`tree_overhead_s` from the costs' own (a sum: the
        processes' errors come from the same costs, so they do not average out)."""
        return sum(p.error_ns for p in self.processes) / 1e9

    def ray_waits(self) -> int:
        return sum(p.ray_waits for p in self.processes)

    def pool_tasks(self) -> int:
        return sum(p.pool_tasks for p in self.processes)


def _pre_post(costs: dict[str, KindCost]) -> tuple[np.ndarray, np.ndarray]:
    """Pre-stamp and post-stamp cost (ns) of a Python event, by kind (lookup tables)."""
    pre_lut = np.zeros(256, np.float64)
    post_lut = np.zeros(256, np.float64)
    for k, (begins, ends) in PAIR_KINDS.items():
        c = costs.get(k)
        if c is None:
            continue
        for b in begins:
            pre_lut[b], post_lut[b] = c.outside_ns / 2, c.inside_ns / 2
        for e in ends:
            pre_lut[e], post_lut[e] = c.inside_ns / 2, c.outside_ns / 2
    return pre_lut, post_lut


def _diffuse(costs: dict[str, KindCost]) -> np.ndarray:
    """Spread-over-time part (ns) of a Python event's cost, by kind (a lookup table)."""
    lut = np.zeros(256, np.float64)
    for k, (begins, ends) in PAIR_KINDS.items():
        c = costs.get(k)
        if c is not None and c.diffuse_ns:
            for b in begins:
                lut[b] = c.diffuse_ns / 2
            for e in ends:
                lut[e] = c.diffuse_ns / 2
    return lut


_ENV_KINDS = (fmt.ENV_STEP_BEGIN, fmt.ENV_STEP_END, fmt.ENV_RESET_BEGIN, fmt.ENV_RESET_END)
_BLOCK = 1 << 22  # events shifted at a time: bounds the memory a long thread needs


def _shift(times: np.ndarray, costs_of: Callable[[int, int], tuple[np.ndarray, np.ndarray]],
           base: float, diffuse: float = 0.0, out: np.ndarray | None = None
           ) -> tuple[np.ndarray, float]:
    """Corrected times of one thread's anchors (sorted stably by time) and its total.
    ``costs_of(a, b)``: the pre-stamp and post-stamp costs of anchors a:b. ``diffuse`` ns
    are removed evenly over the thread's span (a uniform stretch). Worked out a block of
    anchors at a time (a thread can hold tens of millions of events), the running sums
    carried across blocks in the same order of additions as one pass would make."""
    n = len(times)
    new = np.empty(n, np.int64) if out is None else out
    if not (diffuse and n > 1 and times[-1] > times[0]):
        diffuse = 0.0
    carry = 0.0  # costs of the earlier anchors
    latest: int | None = None  # the latest corrected time so far
    for a in range(0, n, _BLOCK):
        b = min(n, a + _BLOCK)
        pre, post = costs_of(a, b)
        acc = np.empty(b - a + 1)
        acc[0] = carry
        np.add(pre, post, out=acc[1:])
        np.cumsum(acc, out=acc)
        carry = float(acc[-1])
        shift = acc[1:]
        shift += base
        shift -= post  # earlier events' costs + own pre-stamp part
        if diffuse:
            stretch = diffuse * (times[a:b] - times[0])
            stretch /= float(times[-1] - times[0])
            shift += stretch
            del stretch
        block = np.rint(shift, out=shift).astype(np.int64)
        del acc, shift
        np.subtract(times[a:b], block, out=block)
        np.maximum.accumulate(block, out=block)  # over-estimated costs must not reorder
        if latest is not None:
            np.maximum(block, latest, out=block)
        latest = int(block[-1])
        new[a:b] = block
    return new, carry + diffuse


def _looked_up(kind: np.ndarray, pre_lut: np.ndarray, post_lut: np.ndarray
               ) -> Callable[[int, int], tuple[np.ndarray, np.ndarray]]:
    return lambda a, b: (pre_lut[kind[a:b]], post_lut[kind[a:b]])


def _sliced(pre: np.ndarray, post: np.ndarray
            ) -> Callable[[int, int], tuple[np.ndarray, np.ndarray]]:
    return lambda a, b: (pre[a:b], post[a:b])


def _shift_at(times: np.ndarray, shifts: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The shift in force at each time of ``at`` on a thread (0 before its first event)."""
    if not len(times):
        return np.zeros(len(at))
    k = np.searchsorted(times, at, side="right") - 1
    return np.where(k >= 0, shifts[np.maximum(k, 0)], 0)


def _gap_cost_table(agg: Aggregates, lut: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(thread, gap) keys and the cost (ns) of the events aggregated in each gap."""
    key = agg.count_thread.astype(np.int64) << 32 | agg.count_gap.astype(np.int64)
    cost = agg.count_n * lut[agg.count_kind.astype(np.int64)]
    keys, inv = np.unique(key, return_inverse=True)
    return keys, np.bincount(inv.ravel(), weights=cost, minlength=len(keys))


def _gap_costs(agg: Aggregates, t: int, kind: np.ndarray, lut: np.ndarray
               ) -> np.ndarray | None:
    """Extra pre-stamp cost of each event of thread ``t``: the costs of the events its
    k-th gap aggregated, at its k-th AGGREGATED_END (None: the thread has no gap)."""
    if not len(agg.count_thread) or not np.any(agg.count_thread == t):
        return None
    keys, cost = _gap_cost_table(agg, lut)
    ends = np.flatnonzero(kind == fmt.AGGREGATED_END)
    out = np.zeros(len(kind))
    want = np.int64(t) << 32 | np.arange(len(ends), dtype=np.int64)
    j = np.minimum(np.searchsorted(keys, want), max(len(keys) - 1, 0))
    hit = keys[j] == want
    out[ends[hit]] = cost[j[hit]]
    return out


def _aggregated_spread(agg: Aggregates, t: int, spread_lut: np.ndarray) -> float:
    sel = agg.count_thread == t
    return float((agg.count_n[sel] * spread_lut[agg.count_kind[sel].astype(np.int64)]).sum())


def _corrected_aggregates(agg: Aggregates, lut: np.ndarray) -> Aggregates:
    """Each gap's event costs taken out of its rows, in proportion to their events (the
    events after which the thread was in the row's state)."""
    if not len(agg.thread) or not len(agg.count_thread):
        return agg
    keys, cost = _gap_cost_table(agg, lut)
    row_key = agg.thread.astype(np.int64) << 32 | agg.gap.astype(np.int64)
    j = np.minimum(np.searchsorted(keys, row_key), len(keys) - 1)
    gap_cost = np.where(keys[j] == row_key, cost[j], 0.0)
    rk, rinv = np.unique(row_key, return_inverse=True)
    rinv = rinv.ravel()
    events = agg.events.astype(np.float64)
    per_gap = np.bincount(rinv, weights=events, minlength=len(rk))[rinv]
    share = np.divide(events, per_gap, out=np.zeros(len(events)), where=per_gap > 0)
    ns = np.maximum(agg.ns - np.rint(gap_cost * share).astype(np.int64), 0)
    return dataclasses.replace(agg, ns=ns)


def _launch_rows(p: ProcessTrace) -> tuple[np.ndarray, np.ndarray]:
    """Row of the API call that launched each GPU activity, and whether one did."""
    api, gpu = p.api_calls, p.gpu
    if not len(api) or not len(gpu):
        return np.zeros(len(gpu), np.int64), np.zeros(len(gpu), bool)
    o = np.argsort(api.correlation_id, kind="stable")
    j = np.searchsorted(api.correlation_id[o], gpu.correlation_id)
    jc = np.minimum(j, len(api) - 1)
    hit = (j < len(api)) & (api.correlation_id[o][jc] == gpu.correlation_id)
    hit &= gpu.correlation_id != 0
    return o[jc], hit


def _kind_ns(costs: dict[str, KindCost], kind: str) -> float:
    c = costs.get(kind)
    return 0.0 if c is None or not math.isfinite(c.per_event_ns) else c.per_event_ns


def _inside_ns(costs: dict[str, KindCost], kind: str) -> float:
    """The inside part of a kind's cost, within its whole (0 when unknown)."""
    c = costs.get(kind)
    if c is None or not math.isfinite(c.inside_ns) or not c.inside_ns > 0:
        return 0.0
    return min(c.inside_ns, _kind_ns(costs, kind))


def own_extra(p: ProcessTrace, costs: dict[str, KindCost]) -> np.ndarray | None:
    """Extra pre-stamp cost (ns) per event of ``p`` that its own trace locates: the pool
    tasks it ran for other processes (task_waits.task_costs) and the calls its operation
    wrappers passed on (passed_calls.costs)."""
    tasks = task_waits.task_costs(p, _kind_ns(costs, POOL_TASK))
    passed = passed_calls.costs(p, _kind_ns(costs, PASSED_CALL))
    if tasks is None or passed is None:
        return tasks if passed is None else passed
    return tasks + passed


def correct_process(p: ProcessTrace, costs: dict[str, KindCost],
                    waits: np.ndarray | None = None, cpu: np.ndarray | None = None
                    ) -> tuple[ProcessTrace, ProcessCorrection]:
    """Extra pre-stamp costs (ns) per event of ``p``: ``waits``, off the CPU (the ends of
    its waits on workers that book-keeping slowed: rlscope.analysis.overhead.worker_waits,
    .task_waits), and ``cpu``, its own book-keeping that only other processes' traces
    locate (its pool submissions: task_waits.call_costs), beside what its own trace
    locates (:func:`own_extra`)."""
    stalled = gil_stalls.stalls(p, _kind_ns(costs, PY_SAMPLE))  # off the CPU too
    if stalled is not None:
        waits = stalled if waits is None else waits + stalled
    waits_ns = 0.0 if waits is None else float(waits.sum())
    for more in (cpu, own_extra(p, costs)):
        if more is not None:
            waits = more if waits is None else waits + more
    ev = p.events
    pre_lut, post_lut = _pre_post(costs)
    spread_lut = _diffuse(costs)
    api, gpu = p.api_calls, p.gpu
    tid_to_index = {t.tid: t.index for t in p.threads.values()}
    api_thread = np.array([tid_to_index.get(int(t), -1 - int(t)) for t in api.tid], np.int64)
    api_c, act_c = costs.get(CUDA_API), costs.get(GPU_ACTIVITY)
    n_acts = np.zeros(len(api))
    launch, hit = _launch_rows(p)
    if act_c is not None:
        np.add.at(n_acts, launch[hit], 1)
    a_in = api_c.inside_ns / 2 if api_c else 0.0
    a_out = api_c.outside_ns / 2 if api_c else 0.0
    g_in = n_acts * (act_c.inside_ns if act_c else 0.0)
    g_out = n_acts * (act_c.outside_ns if act_c else 0.0)

    new_ev_time: np.ndarray | None = None  # (made after the first thread's spread sum)
    new_api_start, new_api_end = api.start_ns.copy(), api.end_ns.copy()
    threads = sorted(set(np.unique(ev.thread).tolist()) | set(np.unique(api_thread).tolist()))
    main = process_span(p).main_thread
    threads.sort(key=lambda t: (t != main, t))
    removed: dict[int, int] = {}
    main_times = main_shifts = np.zeros(0)
    imp_keys, imp_b, imp_e = _import_anchors(p.metadata)
    new_imports: np.ndarray | None = None
    for t in threads:
        mask = ev.thread == t
        # Every event on one thread (the usual case): views, not copies.
        ei: slice | np.ndarray = slice(None) if mask.all() else np.flatnonzero(mask)
        del mask
        kind = ev.kind[ei]
        ne = len(kind)
        ai = np.flatnonzero(api_thread == t)
        na = len(ai)
        spread = float(spread_lut[kind].sum())
        gap_pre = _gap_costs(p.aggregates, t, kind, pre_lut + post_lut)
        if gap_pre is not None:  # a bounded trace: each gap's events, at its end
            spread += _aggregated_spread(p.aggregates, t, spread_lut)
        if waits is not None and waits[ei].any():  # slowed workers, at its waits' ends
            gap_pre = waits[ei] if gap_pre is None else gap_pre + waits[ei]
        if new_ev_time is None:
            new_ev_time = ev.time_ns.copy()
        # The recording thread's timed imports (the start-up row's) move as the events
        # around them do, at no cost of their own: no event changes rows (issue 22).
        ni = len(imp_keys) if t == main else 0
        times = np.r_[ev.time_ns[ei], api.start_ns[ai], api.end_ns[ai], imp_b[:ni],
                      imp_e[:ni]] if na or ni else ev.time_ns[ei]
        # The order the overlap sweep uses: by time, stably (usually the order already).
        o = None if len(times) < 2 or bool(np.all(times[1:] >= times[:-1])) \
            else np.argsort(times, kind="stable")
        base = 0.0
        if t != main and len(times):
            base = float(_shift_at(main_times, main_shifts, times[o][:1] if o is not None
                                   else times[:1])[0])
        if na == 0 and ni == 0 and o is None and gap_pre is None:
            # The thread's own events, in order: costs looked up a block at a time, and
            # the corrected times written straight into place when the rows are a slice.
            direct = isinstance(ei, slice)
            new_sorted, total = _shift(times, _looked_up(kind, pre_lut, post_lut), base,
                                       spread, out=new_ev_time if direct else None)
            if not direct:
                new_ev_time[ei] = new_sorted
        else:
            own_pre = pre_lut[kind] if gap_pre is None else pre_lut[kind] + gap_pre
            tpre = np.r_[own_pre, np.full(na, a_out), a_in + g_in[ai], np.zeros(2 * ni)]
            tpost = np.r_[post_lut[kind], np.full(na, a_in), a_out + g_out[ai],
                          np.zeros(2 * ni)]
            if o is not None:
                times, tpre, tpost = times[o], tpre[o], tpost[o]
            new_sorted, total = _shift(times, _sliced(tpre, tpost), base, spread)
            del tpre, tpost
            if o is None:
                new = new_sorted
            else:
                new = np.empty_like(new_sorted)
                new[o] = new_sorted
            new_ev_time[ei] = new[:ne]
            new_api_start[ai] = new[ne:ne + na]
            new_api_end[ai] = new[ne + na:ne + 2 * na]
            if ni:
                new_imports = new[ne + 2 * na:].copy()
            del new
        del kind
        removed[t] = round(total)
        if t == main and (len(threads) > 1 or len(gpu)):  # what the others start from
            main_times = times.copy() if times.base is not None else times
            main_shifts = main_times - new_sorted
        del times, new_sorted
    if new_ev_time is None:
        new_ev_time = ev.time_ns.copy()
    new_gpu = gpu
    if len(gpu):
        # Each activity moves with its launching call (by correlation id), else with the
        # main thread at its start.
        launch_shift = (api.end_ns - new_api_end)[launch] if len(api) else 0
        main_shift = _shift_at(main_times, main_shifts, gpu.start_ns)
        s = np.where(hit, launch_shift, main_shift).astype(np.int64)
        new_gpu = dataclasses.replace(gpu, start_ns=gpu.start_ns - s, end_ns=gpu.end_ns - s)
    new_events = Events(new_ev_time, ev.thread, ev.kind, ev.name)
    prog_idx = np.flatnonzero(ev.kind == fmt.PROGRESS)  #: re-read its corrected times
    progress = p.progress
    if len(prog_idx) == len(progress.time_ns):
        progress = Progress(new_ev_time[prog_idx], progress.thread, progress.timesteps,
                            progress.total_timesteps)
    env = p.env
    env_idx = np.flatnonzero(np.isin(ev.kind, _ENV_KINDS))  # the env table's rows, in order
    if len(env) and len(env_idx) == len(env):
        env = dataclasses.replace(env, time_ns=new_ev_time[env_idx])
    new_api = dataclasses.replace(api, start_ns=new_api_start, end_ns=new_api_end)
    metadata = p.metadata
    if new_imports is not None:
        n = len(imp_keys)
        metadata = dict(metadata, **{k: [int(b), int(e)] for k, b, e in
                                     zip(imp_keys, new_imports[:n], new_imports[n:],
                                         strict=True)})
    out = dataclasses.replace(p, events=new_events, progress=progress, api_calls=new_api,
                              gpu=new_gpu, env=env, metadata=metadata,
                              aggregates=_corrected_aggregates(p.aggregates, pre_lut + post_lut))
    # Charged once per process that started one (count_process: not a forked child), the
    # import of rlscope where the script does not import it too.
    counted = count_process(p)
    fixed_ns = install_ns(p)
    import_ns = 0.0
    for fixed_kind in (PROCESS, RLSCOPE_IMPORT):
        kc = costs.get(fixed_kind)
        if kc is not None and counted[fixed_kind] and not math.isnan(kc.per_event_ns):
            fixed_ns += kc.per_event_ns
            if fixed_kind == RLSCOPE_IMPORT:
                import_ns = kc.per_event_ns
    return out, ProcessCorrection(p.pid, removed, removed.get(main, 0), fixed_ns,
                                  own_threads_ns(p), _error_ns(p, costs),
                                  waits_ns,
                                  _count_waits(p, RAY_WAITS),
                                  0 if POOL_TASK in costs else counted[POOL_TASK],
                                  import_ns)


RAY_WAITS = ("ray.get", "ray.wait")  # rlscope.integrations.ray_workers' wait names


def _count_waits(p: ProcessTrace, names: tuple[str, ...]) -> int:
    """How many waits ``p`` recorded under these names (their begin events)."""
    ids = [i for i, s in enumerate(p.strings) if s in names]
    if not ids:
        return 0
    ev = p.events
    return int(((ev.kind == fmt.WAIT_CALL_BEGIN) & np.isin(ev.name, ids)).sum())


Replies = worker_waits.Replies | task_waits.TaskReplies  # what a worker tells its holder


def waits_on_workers(p: ProcessTrace) -> bool:
    """Whether ``p`` may wait on other processes whose book-keeping slowed them: it holds
    a vector env with workers, or it handed tasks to a pool (:func:`correct_holder`)."""
    return worker_waits.holds_workers(p) or task_waits.submits_tasks(p)


def serves_others(p: ProcessTrace) -> bool:
    """Whether ``p`` is a vector env's worker or ran another process's pool tasks."""
    return worker_waits.served(p) is not None or task_waits.runs_tasks(p)


def correct_holder(p: ProcessTrace, workers: list[Replies], costs: dict[str, KindCost]
                   ) -> tuple[ProcessTrace, ProcessCorrection]:
    """``p`` corrected, with its waits on its vector envs' workers and on its pool tasks'
    results shortened by what the workers' book-keeping added (``workers``: replies of
    processes of the run, see :func:`worker_replies`; those not serving ``p`` are left
    out)."""
    vec = [w for w in workers
           if isinstance(w, worker_waits.Replies) and worker_waits.serves(w, p)]
    tasks = [w for w in workers
             if isinstance(w, task_waits.TaskReplies) and task_waits.submitted_by(w, p)]
    # Each shortening needs p's correction so far (what its own costs moved already); a
    # correction stands when there is nothing more to shorten. Its submissions' costs
    # come first: they delayed the tasks as well as what p did next.
    pre, post = _pre_post(costs)
    # A submission's cost: the caller's part before its next event, the part the pool's
    # task thread paid (its inside part) in the waits for the results.
    dispatch = _inside_ns(costs, POOL_CALL)
    calls = task_waits.call_costs(p, tasks, _kind_ns(costs, POOL_CALL) - dispatch) \
        if tasks else None
    done = correct_process(p, costs, cpu=calls)
    extra = worker_waits.wait_costs(p, done[0], pre, post, vec) if vec else None
    if extra is not None:
        done = correct_process(p, costs, extra, calls)
    more = task_waits.wait_costs(p, done[0], pre, post, tasks, dispatch) if tasks else None
    if more is not None:
        done = correct_process(p, costs, more if extra is None else extra + more, calls)
    if any(w.job is not None for w in tasks):  # a Ray driver whose workers' calls are known
        done = (done[0], dataclasses.replace(done[1], ray_waits=0))
    return done


def worker_replies(raw: ProcessTrace, corrected: ProcessTrace, costs: dict[str, KindCost]
                   ) -> list[Replies]:
    """What holders' corrections need of ``raw`` (``corrected``: by
    :func:`correct_process` with ``costs``): its replies as a vector env's worker and as
    a pool's worker (empty if it is neither)."""
    pre, post = _pre_post(costs)
    own = own_extra(raw, costs)
    out: list[Replies] = list(task_waits.replies_of(raw, corrected, pre, post, own))
    vec = worker_waits.replies_of(raw, corrected, pre, post, own)
    return out if vec is None else [vec, *out]


def _error_ns(p: ProcessTrace, costs: dict[str, KindCost]) -> float:
    """The costs' error bars (where they have one) times this process's events."""
    return float(sum(n * costs[k].error_ns for k, n in count_process(p).items()
                     if k in costs and n and math.isfinite(costs[k].error_ns)))


def _import_anchors(metadata: dict) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The timed imports' metadata keys, begins and ends (rlscope.inprocess.import_timer)."""
    rows = [(k, v[0], v[1]) for k, v in metadata.items()
            if k.startswith(fmt.META_IMPORT_PREFIX) and isinstance(v, list) and len(v) == 2
            and all(isinstance(x, int) for x in v)]
    return ([r[0] for r in rows], np.array([r[1] for r in rows], np.int64),
            np.array([r[2] for r in rows], np.int64))


def _metadata_ns(p: ProcessTrace, prefix: str) -> float:
    total = 0.0
    for key, value in p.metadata.items():
        if key.startswith(prefix):
            try:
                total += float(value)
            except (TypeError, ValueError):
                continue
    return total


def install_ns(p: ProcessTrace) -> float:
    """CPU ns this process spent setting up interception (recorded by rlscope.intercept
    as metadata, one entry per library): a fixed cost of the process, like start-up."""
    return _metadata_ns(p, fmt.META_INSTALL_PREFIX)


def own_threads_ns(p: ProcessTrace) -> float:
    """CPU ns of rlscope's own threads in this process (recorded at stop by
    rlscope.annotate): in the process tree's CPU time, not on any operation's timeline."""
    return _metadata_ns(p, fmt.META_THREAD_CPU_PREFIX)


def correct_trace(trace: Trace, calibration: Calibration | dict[str, KindCost]
                  ) -> tuple[Trace, CorrectionSummary]:
    """A corrected copy of ``trace`` (the input is not modified) and what was removed."""
    costs = calibration.costs if isinstance(calibration, Calibration) else calibration
    procs = trace.processes
    holders = {i for i, p in enumerate(procs) if waits_on_workers(p)}
    done = {i: correct_process(p, costs) for i, p in enumerate(procs) if i not in holders}
    # Then the processes waiting on workers, from the workers' corrections. A worker's
    # own correction (not its waits on workers of its own, as the fan-out).
    replies: list[Replies] = []
    for i, p in enumerate(procs):
        if serves_others(p):
            own = done[i][0] if i in done else correct_process(p, costs)[0]
            replies += worker_replies(p, own, costs)
    for i in sorted(holders):
        done[i] = correct_holder(procs[i], replies, costs)
    out = [done[i] for i in range(len(procs))]
    summary = CorrectionSummary([c for _, c in out])
    return dataclasses.replace(trace, processes=[q for q, _ in out]), summary
