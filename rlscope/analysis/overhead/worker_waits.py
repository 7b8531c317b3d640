"""Waits on vector-env workers that rlscope slowed down.

A process that holds a vector env with workers (SB3 ``SubprocVecEnv``, gymnasium
``AsyncVectorEnv``, legacy gym's) blocks in ``step_wait`` (``reset_wait``) until its last
worker replies. Each worker's book-keeping during the step delays its reply. So the wait
holds overhead that none of the holder's own events accounts for. Per vector step:

- take every worker env step or reset that began inside it, and its end ``e_w``;
- ``d_w``: what the worker's book-keeping cost from its first event in the vector step
  (its wake-up: the end of its wait for the command) through that end event, both of
  their costs included. Costs paid before the command came were paid while the worker
  had nothing to do.

Without rlscope the last reply would have come at ``max_w (e_w - d_w)``, so the reply
came ``max_w e_w - max_w (e_w - d_w)`` later. The holder's own correction already moved
the wait's end earlier by ``h``, what the holder's book-keeping cost after the step began
(the commands go out then) through the wait's begin: paid while the workers stepped, it
did not delay the replies. So the wait shrinks by

    max_w e_w - max_w (e_w - d_w) - h

never below zero and never by more than the wait. The holder is corrected again with
that as the pre-stamp cost of the wait's end event: the wait, and everything after it on
that thread, move earlier by it (rlscope.analysis.overhead.correction). It is off-CPU
time: it shortens the holder's timeline, not any process's CPU time.

A worker is needed only as :class:`Replies`: its env steps and what its book-keeping had
cost by each of its events, so an analysis need not keep the workers' traces (the
fan-out's holder task reads its workers one at a time: rlscope.analysis.pipeline.fanout).

Waits for pool tasks' results: rlscope.analysis.overhead.task_waits. Not covered: Ray
``get``, where which worker's work ends a wait is not recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rlscope.analysis.lockstep.reader import env_pairs
from rlscope.trace import format as fmt
from rlscope.trace.data import ProcessTrace

_WAIT_SUFFIX = {False: ".step_wait", True: ".reset_wait"}


@dataclass(frozen=True)
class Replies:
    """What a holder's correction needs of one worker: which vector env it serves (its
    ``META_VECENV``: the holder's pid and the env's name), per thread its env steps and
    resets that ended ((begins, ends) by reset flag), and per such thread its events'
    times sorted with what its book-keeping had cost before each event's stamp and after
    it (ns: the event's shift, less its pre-stamp cost or plus its post-stamp cost)."""

    served: dict[str, Any]
    steps: dict[bool, dict[int, tuple[np.ndarray, np.ndarray]]]
    paid: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]


def holds_workers(p: ProcessTrace) -> bool:
    """Whether ``p`` announced a vector env with workers."""
    return bool(_announced(p))


def served(p: ProcessTrace) -> dict[str, Any] | None:
    """The vector env ``p`` is a worker of, as it announced it (``META_VECENV``)."""
    got = p.metadata.get(fmt.META_VECENV)
    return got if isinstance(got, dict) else None


def serves(worker: Replies, holder: ProcessTrace) -> bool:
    """Whether ``worker`` is a worker of a vector env ``holder`` announced."""
    return (worker.served.get("pid") == holder.pid
            and any(worker.served.get("name") == a.get("name") for a in _announced(holder)))


def replies_of(raw: ProcessTrace, corrected: ProcessTrace, pre: np.ndarray,
               post: np.ndarray, extra: np.ndarray | None = None) -> Replies | None:
    """``raw``'s :class:`Replies` (``corrected``: its own correction, with the pre- and
    post-stamp costs by kind it used, and ``extra`` per event); None unless it serves a
    vector env."""
    what = served(raw)
    if what is None:
        return None
    steps: dict[bool, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
    for reset in (False, True):
        iv, idx = env_pairs(raw.env, reset)  # each env's own steps (resets), per thread
        steps[reset] = {}
        for t in np.unique(iv.thread[idx >= 0]).tolist():
            m = (idx >= 0) & (iv.thread == t)
            steps[reset][int(t)] = (iv.begin[m], iv.end[m])
    threads = {t for per in steps.values() for t in per}
    return Replies(dict(what), steps,
                   {t: thread_paid(raw, corrected, t, pre, post, extra)
                    for t in sorted(threads)})


def wait_costs(holder: ProcessTrace, corrected: ProcessTrace, pre: np.ndarray,
               post: np.ndarray, workers: list[Replies]) -> np.ndarray | None:
    """Extra pre-stamp cost (ns) of each of ``holder``'s events: at the end of each wait
    on its vector envs' workers, what the workers' overhead added to it (``corrected``:
    ``holder``'s own correction with the costs ``pre``/``post``; ``workers``: the replies
    of the processes that serve it). None when nothing is added."""
    extra = np.zeros(len(holder.events.time_ns))
    own = _Own(holder, corrected, pre, post)
    for a in _announced(holder):
        name = a["name"]
        mine = [w for w in workers if w.served.get("name") == name]
        if not mine or name not in holder.strings:
            continue
        sid = holder.strings.index(name)
        for reset in (False, True):
            vb, ve = _vector_steps(holder, reset, sid)
            if not len(vb):
                continue
            late, late_without = _replies(vb, ve, mine, reset)
            _add_wait_costs(extra, holder, f"{a.get('class', '')}{_WAIT_SUFFIX[reset]}",
                            vb, ve, late, late_without, own)
    return extra if extra.any() else None


def _announced(p: ProcessTrace) -> list[dict[str, Any]]:
    """The vector envs with workers ``p`` announced (rlscope.integrations.vecenv)."""
    got = p.metadata.get(fmt.META_VECENVS)
    if not isinstance(got, list):
        return []
    return [a for a in got if isinstance(a, dict) and isinstance(a.get("name"), str)
            and a.get("workers", True) and not isinstance(a.get("key"), dict)]


def wait_pairs(p: ProcessTrace, name_ids: list[int]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``p``'s waits (WAIT_CALL pairs) with one of the names ``name_ids``: their begins,
    ends, the index of each end event and each one's thread, by thread then time."""
    ev = p.events
    sel = np.flatnonzero(((ev.kind == fmt.WAIT_CALL_BEGIN) | (ev.kind == fmt.WAIT_CALL_END))
                         & np.isin(ev.name, name_ids))
    th = ev.thread[sel].astype(np.int64)
    o = np.lexsort((ev.time_ns[sel], th))
    sel, th = sel[o], th[o]
    is_b = ev.kind[sel] == fmt.WAIT_CALL_BEGIN
    b = np.flatnonzero(is_b[:-1] & ~is_b[1:] & (th[:-1] == th[1:]))
    return ev.time_ns[sel[b]], ev.time_ns[sel[b + 1]], sel[b + 1], th[b]


def _vector_steps(holder: ProcessTrace, reset: bool, name_id: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(begins, ends) of one vector env's whole steps (resets), sorted by begin."""
    iv, idx = env_pairs(holder.env, reset)
    m = (iv.name == name_id) & (idx == fmt.VECTOR_ENV_INDEX)
    o = np.argsort(iv.begin[m], kind="stable")
    return iv.begin[m][o], iv.end[m][o]


def thread_paid(p: ProcessTrace, q: ProcessTrace, thread: int, pre: np.ndarray,
                post: np.ndarray, extra: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One thread of a worker (``p`` raw, ``q`` corrected): its events' times, sorted, and
    what its book-keeping had cost before and after each event's stamp (a shift is the
    costs of the earlier events plus the event's own pre-stamp part: by kind, and
    ``extra``, per event of ``p``, where the correction added one at an event itself,
    as a pool task's cost at its operation's begin)."""
    m = p.events.thread == thread
    raw = p.events.time_ns[m]
    kind = p.events.kind[m].astype(np.int64)
    o = np.argsort(raw, kind="stable")
    raw, kind = raw[o], kind[o]
    shift = (raw - q.events.time_ns[m][o]).astype(np.float64)
    own = pre[kind] if extra is None else pre[kind] + extra[m][o]
    return raw, shift - own, shift + post[kind]


def paid_between(paid: tuple[np.ndarray, np.ndarray, np.ndarray], since: np.ndarray,
                 until: np.ndarray) -> np.ndarray:
    """What one thread (``paid``: :func:`thread_paid`) paid for book-keeping from its first
    event at or after each time of ``since`` through its last event at or before the
    matching time of ``until``, both events' costs included."""
    raw, before, after = paid
    if not len(raw):
        return np.zeros(len(since))
    first = np.minimum(np.searchsorted(raw, since, side="left"), len(raw) - 1)
    last = np.maximum(np.searchsorted(raw, until, side="right") - 1, 0)
    return np.where(last >= first, after[last] - before[first], 0.0)


def _replies(vb: np.ndarray, ve: np.ndarray, workers: list[Replies], reset: bool
             ) -> tuple[np.ndarray, np.ndarray]:
    """Per vector step (or reset): the latest end of a worker env event that began inside
    it, and the latest end each would have had without the worker's overhead (-1: none)."""
    late = np.full(len(vb), -1, np.int64)
    late_without = np.full(len(vb), -1, np.int64)
    for w in workers:
        for t, (eb, ee) in w.steps[reset].items():
            j = np.searchsorted(vb, eb, side="right") - 1
            ok = (j >= 0) & (eb <= ve[np.maximum(j, 0)])
            j, eb, ee = j[ok], eb[ok], ee[ok]
            if not len(j):
                continue
            paid = np.rint(np.maximum(paid_between(w.paid[t], vb[j], ee), 0))
            np.maximum.at(late, j, ee)
            np.maximum.at(late_without, j, ee - paid.astype(np.int64))
    return late, late_without


class _Own:
    """The holder's book-keeping per thread (thread_paid), each thread's read once."""

    def __init__(self, raw: ProcessTrace, corrected: ProcessTrace, pre: np.ndarray,
                 post: np.ndarray) -> None:
        self.raw, self.corrected, self.pre, self.post = raw, corrected, pre, post
        self.paid: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def between(self, thread: int, since: np.ndarray, until: np.ndarray) -> np.ndarray:
        if thread not in self.paid:
            self.paid[thread] = thread_paid(self.raw, self.corrected, thread, self.pre,
                                            self.post)
        return paid_between(self.paid[thread], since, until)


def _add_wait_costs(extra: np.ndarray, holder: ProcessTrace, wait_name: str, vb: np.ndarray,
                    ve: np.ndarray, late: np.ndarray, late_without: np.ndarray, own: _Own
                    ) -> None:
    """Adds to ``extra``, at the end event of each ``wait_name`` wait that began inside a
    vector step, how much earlier the step's last reply would have come, less what the
    holder's own correction moved it already (its costs after the step's begin event
    through the wait's begin)."""
    if wait_name not in holder.strings:
        return
    wb, we, end_at, th = wait_pairs(holder, [holder.strings.index(wait_name)])
    j = np.searchsorted(vb, wb, side="right") - 1
    ok = (j >= 0) & (wb <= ve[np.maximum(j, 0)])
    j, wb, we, end_at, th = j[ok], wb[ok], we[ok], end_at[ok], th[ok]
    has = late[j] >= 0
    gain = np.where(has, late[j] - late_without[j], 0).astype(np.float64)
    for t in np.unique(th[has]).tolist():
        m = has & (th == t)
        gain[m] -= own.between(t, vb[j[m]] + 1, wb[m])  # after the step's begin event
    gain = np.clip(gain, 0, we - wb)
    np.add.at(extra, end_at, gain)
