"""Waits for pool and executor results that rlscope slowed down.

A process that hands tasks to worker processes (``multiprocessing.Pool``,
``ProcessPoolExecutor``: rlscope.integrations.pooltasks, which records each task's begin
and end in its worker, who submitted it and when) blocks for the results in a threading wait:
``Pool.map``/``apply_async().get()`` in ``Event.wait``, ``imap`` and ``Future.result`` in
``Condition.wait``. Each worker's book-keeping during its tasks delays the results, so
the wait holds overhead that none of the submitter's own events accounts for. Per such
wait ``[b, e]`` of the submitter:

- per worker thread, the tasks the submitter handed out that ended inside the wait: the
  last one's end ``e_w``, and ``d_w``, what the worker's book-keeping cost from the
  submission ``s_w`` of the first of them (its first event after it: the wake-up, or the
  rest of earlier work that held the tasks up) through ``e_w``, both events' costs
  included;
- counted from the submission, the results came ``max_w e_w - max_w (e_w - d_w)`` later
  than they would have without rlscope;
- the submitter's own correction already moved the wait's end earlier by ``h``, what its
  own book-keeping cost from ``s = min(min_w s_w, b)`` to ``b`` (earlier waits'
  shortening included), so the wait needs only the rest.

The wait's end event then carries ``clip(gain - h, 0, e - b)`` as an extra pre-stamp cost
(rlscope.analysis.overhead.correction): the wait, and everything after it on that thread,
move earlier by it. It is off-CPU time, like rlscope.analysis.overhead.worker_waits.

It assumes each worker runs its tasks back to back from the submission on (a mapping
call's tasks are queued at once).

Ray: a job's workers record each task and synchronous actor method call they run
(format.META_RAY_CALL_PREFIX, rlscope.integrations.ray_workers), and the driver's
``ray.get``/``ray.wait`` are its result waits. Ray does not tell a worker who called it,
so every call of the job is taken as the driver's (a call that an actor awaited and that
ended inside one of the driver's waits counts there too), and a call's submission is
taken as its begin (the worker's wake-up before it is not counted). Not covered: thread
pools (their workers are the submitter's own threads), async and generator actor
methods, and waits of actors on other actors (the report counts those).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from rlscope.analysis.overhead.kinds import tasks_for_others
from rlscope.analysis.overhead.worker_waits import paid_between, thread_paid, wait_pairs
from rlscope.trace import format as fmt
from rlscope.trace.data import ProcessTrace

# The waits a submitter blocks in for results (rlscope.intercept.waits' names).
RESULT_WAITS = ("threading.Event.wait", "threading.Condition.wait",
                "threading.Condition.wait_for", "ray.get", "ray.wait")


@dataclass(frozen=True)
class TaskReplies:
    """What a submitter's correction needs of one worker process: the submitter's pid
    (``by``) and host (the worker's: a pool's workers run beside it), per thread of the
    worker the tasks it ran for it ((submissions, ends), by end), and per such thread its
    events' times with what its book-keeping had cost before and after each event's
    stamp (worker_waits.thread_paid)."""

    by: int
    host: str
    tasks: dict[int, tuple[np.ndarray, np.ndarray]]
    paid: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]
    job: str | None = None  # a Ray worker's: its calls are its job's driver's (by: -1)


def submitted_by(w: TaskReplies, p: ProcessTrace) -> bool:
    """Whether ``w`` holds tasks ``p`` submitted (pids repeat across hosts)."""
    if w.host != p.header.host:
        return False
    return w.by == p.pid if w.job is None else w.job == ray_driver_job(p)


def submits_tasks(p: ProcessTrace) -> bool:
    """Whether ``p`` handed tasks to a pool or executor, or drove a Ray job, while it
    recorded."""
    return fmt.META_POOL_TASKS in p.metadata or ray_driver_job(p) is not None


def runs_tasks(p: ProcessTrace) -> bool:
    """Whether ``p`` ran tasks some other process submitted (records that say by whom),
    or Ray tasks and actor methods of a job."""
    return bool(tasks_for_others(p)) or (_ray_job(p) is not None and bool(_ray_calls(p)))


def ray_driver_job(p: ProcessTrace) -> str | None:
    """The job ``p`` drove, if it is a Ray driver (format.META_RAY)."""
    ray = p.metadata.get(fmt.META_RAY)
    return _ray_job(p) if isinstance(ray, dict) and ray.get("kind") == "driver" else None


def _ray_job(p: ProcessTrace) -> str | None:
    ray = p.metadata.get(fmt.META_RAY)
    job = ray.get("job_id") if isinstance(ray, dict) else None
    return job if isinstance(job, str) and job else None


def replies_of(raw: ProcessTrace, corrected: ProcessTrace, pre: np.ndarray,
               post: np.ndarray, extra: np.ndarray | None = None) -> list[TaskReplies]:
    """``raw``'s :class:`TaskReplies`, one per process it ran tasks for (``corrected``: its
    own correction, with the pre- and post-stamp costs by kind it used, and ``extra`` per
    event: its tasks' own costs, :func:`task_costs`)."""
    index = {t.tid: t.index for t in raw.threads.values()}
    by: dict[int, dict[int, list[tuple[int, int]]]] = {}
    for submitter, tid, submitted, _begin, end in tasks_for_others(raw):
        t = index.get(tid)
        if t is not None:
            by.setdefault(submitter, {}).setdefault(t, []).append((submitted, end))
    job = _ray_job(raw)
    if job is not None:  # a Ray job's calls: by its driver, told apart by the job (-1)
        for tid, begin, end in _ray_calls(raw):
            t = index.get(tid)
            if t is not None:
                by.setdefault(-1, {}).setdefault(t, []).append((begin, end))
    out = []
    paid: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for submitter, threads in sorted(by.items()):
        tasks = {}
        for t, spans in sorted(threads.items()):
            a = np.array(sorted(spans, key=lambda s: s[1]), np.int64)
            tasks[t] = (a[:, 0], a[:, 1])
            if t not in paid:
                paid[t] = thread_paid(raw, corrected, t, pre, post, extra)
        out.append(TaskReplies(submitter, raw.header.host, tasks,
                               {t: paid[t] for t in tasks}, job if submitter == -1 else None))
    return out


def task_costs(p: ProcessTrace, cost_ns: float) -> np.ndarray | None:
    """Extra pre-stamp cost (ns) of each of ``p``'s events: ``cost_ns`` (kinds.POOL_TASK)
    at the begin of the operation of each task ``p`` ran for another process (receiving
    the task lies before it, its record after its end: neither inside the operation).
    None when it ran none, or they are not priced."""
    if not cost_ns > 0:
        return None
    records = tasks_for_others(p)
    if not records:
        return None
    ev = p.events
    ids = [i for i, s in enumerate(p.strings) if s.startswith("task:")]
    index = {t.tid: t.index for t in p.threads.values()}
    extra = np.zeros(len(ev.time_ns))
    begins = np.flatnonzero((ev.kind == fmt.OPERATION_BEGIN) & np.isin(ev.name, ids))
    for t in np.unique(ev.thread[begins]).tolist():
        at = begins[ev.thread[begins] == t]
        times = ev.time_ns[at]  # in time order (a thread's events are)
        mine = [(b, e) for _by, tid, _s, b, e in records if index.get(tid) == t]
        if not mine:
            continue
        b = np.array([x[0] for x in mine], np.int64)
        e = np.array([x[1] for x in mine], np.int64)
        # The operation's begin is stamped just after the record's begin (the event
        # clock's mapping can put it a few ns before: a microsecond is allowed).
        k = np.searchsorted(times, b - _SLACK_NS, side="left")
        ok = k < len(times)
        ok[ok] &= times[k[ok]] <= e[ok]
        np.add.at(extra, at[k[ok]], cost_ns)
    return extra if extra.any() else None


_SLACK_NS = 1000


def call_costs(p: ProcessTrace, workers: list[TaskReplies], cost_ns: float
               ) -> np.ndarray | None:
    """Extra pre-stamp cost (ns) of each of ``p``'s events: ``cost_ns`` (kinds.POOL_CALL)
    at its first event at or after each submission its workers' tasks name (the Task is
    made and handed to the pool between the two; none when no event follows)."""
    mine = [w for w in workers if submitted_by(w, p) and w.job is None]
    if not cost_ns > 0 or not mine or not len(p.events):
        return None
    subs = np.unique(np.concatenate([s for w in mine for s, _e in w.tasks.values()]))
    ev = p.events
    o = np.argsort(ev.time_ns, kind="stable")
    k = np.searchsorted(ev.time_ns[o], subs, side="left")
    k = k[k < len(o)]
    if not len(k):
        return None
    extra = np.zeros(len(ev.time_ns))
    np.add.at(extra, o[k], cost_ns)
    return extra


def wait_costs(raw: ProcessTrace, corrected: ProcessTrace, pre: np.ndarray,
               post: np.ndarray, workers: list[TaskReplies], dispatch_ns: float = 0.0
               ) -> np.ndarray | None:
    """Extra pre-stamp cost (ns) of each of ``raw``'s events: at the end of each wait for
    results, what the workers' overhead added to it (``corrected``: ``raw``'s own
    correction with the costs ``pre``/``post``; ``workers``: the replies of the processes
    that ran its tasks), and ``dispatch_ns`` (the inside part of kinds.POOL_CALL: what
    the pool's task thread in ``raw`` paid to send a call's tasks, which delayed each
    worker's first task of the wait; not for Ray). None when nothing is added."""
    mine = [w for w in workers if submitted_by(w, raw)]
    ev = raw.events
    ids = [raw.strings.index(n) for n in RESULT_WAITS if n in raw.strings]
    if not mine or not ids:
        return None
    wb, we, end_at, th = wait_pairs(raw, ids)
    late, late_without, since = _replies(wb, we, mine, dispatch_ns)
    extra = np.zeros(len(ev.time_ns))
    for t in np.unique(th).tolist():
        ks = np.flatnonzero((th == t) & (late >= 0))  # in time order
        s = np.minimum(since[ks], wb[ks])
        own = paid_between(thread_paid(raw, corrected, t, pre, post), s, wb[ks])
        at: list[int] = []  # ends of this thread's shortened waits, and the running sum
        total = [0.0]  # of their shortening
        for k, s_k, h in zip(ks.tolist(), s.tolist(), own.tolist(), strict=True):
            h += total[bisect.bisect_right(at, int(wb[k]))] - total[bisect.bisect_left(at, s_k)]
            x = min(max(float(late[k] - late_without[k]) - h, 0.0), float(we[k] - wb[k]))
            if x > 0:
                extra[end_at[k]] += x
                at.append(int(we[k]))
                total.append(total[-1] + x)
    return extra if extra.any() else None


def _ray_calls(p: ProcessTrace) -> list[tuple[int, int, int]]:
    """(OS thread id, begin_ns, end_ns) of each Ray task or actor method call ``p`` ran."""
    out = []
    for key, v in p.metadata.items():
        if not key.startswith(fmt.META_RAY_CALL_PREFIX) or not isinstance(v, list) \
                or len(v) < 4:
            continue
        _name, begin, end, tid = v[:4]
        if all(isinstance(x, int) for x in (begin, end, tid)) and begin <= end:
            out.append((tid, begin, end))
    return out


def _replies(wb: np.ndarray, we: np.ndarray, workers: list[TaskReplies],
             dispatch_ns: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per wait: the latest end of a task that ended inside it, the latest end each would
    have had without rlscope's overhead (its worker's, and ``dispatch_ns`` before a pool
    worker's first task there; -1: none), and the earliest submission among the first
    such task of each worker thread."""
    late = np.full(len(wb), -1, np.int64)
    late_without = np.full(len(wb), -1, np.int64)
    since = np.full(len(wb), np.iinfo(np.int64).max, np.int64)
    for w in workers:
        sent = 0.0 if w.job is not None else dispatch_ns  # a Ray job has no task thread
        for t, (tb, te) in w.tasks.items():
            lo = np.searchsorted(te, wb, side="left")
            hi = np.searchsorted(te, we, side="right") - 1
            k = np.flatnonzero(hi >= lo)
            if not len(k):
                continue
            s, e = tb[lo[k]], te[hi[k]]
            d = np.rint(np.maximum(paid_between(w.paid[t], s, e), 0) + sent).astype(np.int64)
            np.maximum.at(late, k, e)
            np.maximum.at(late_without, k, e - d)
            np.minimum.at(since, k, s)
    return late, late_without, since
