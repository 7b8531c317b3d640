"""Operations inferred from what a training loop calls: ``inference`` and ``backprop``
where the program recorded none (docs/attribution.md#inferred-operations).

Recording places phase markers (MARK_CALL events, the outermost per thread: a model's
forward, ``zero_grad``, an optimizer step, a Keras call, a GradientTape) and records
backward passes as backend calls (``torch.autograd.backward``). The loop's env steps and
resets are ``simulation`` operations (the gymnasium / gym / SB3 integrations, or the
user's). Per thread, the simulations cut the timeline into *segments*; in each segment:

- if a backward pass happens, **backprop** runs from the first marker of the segment
  (the first forward of the update, or a ``zero_grad`` before it) to the end of the last
  backward / optimizer step / ``zero_grad`` (and any marker that began before that end):
  the loss forwards, the backward passes and the steps of every minibatch in between;
- the forwards after it (or all of them, when no backward happens) are **inference**:
  from the first one's start to the start of the env step that ends the segment (an
  actor and a critic called in turn, sampling from the distribution, turning the output
  into an action: one inference), or to the last one's end when no env step follows.
  Forwards before the thread's first env step or reset are not inference (a model
  being built, as Keras does, or warmed up).

A thread with no simulation at all (an env rlscope does not see) is cut at each optimizer
step's end instead (each backward's, when there is no optimizer step), and each forward
outside an update is its own inference.

User annotations win: an inferred operation is left out where it would overlap a
recorded operation named ``inference``, ``backprop`` or ``simulation`` (the user's or an
integration's), cross the boundary of any other recorded operation, or lie inside a
recorded operation that holds no env step (the user's own breakdown of an iteration:
``learn``, ``act``). Inside a loop-level operation (one holding env steps: ``training``,
``evaluation``) it nests.

Everything is computed from a small subset of a process's events (operations, markers,
backward calls: analysis.inferred_events.Collector), then merged into the event stream by
time (:class:`InferredOps`), so every consumer (the sweep, the timeline, the vector-env
tables) sees the same operations.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from rlscope.analysis.engine.scopes import pair_scopes
from rlscope.analysis.inferred_events import Collector
from rlscope.analysis.intervals import contains_any, inside_any, overlaps_any, union
from rlscope.trace import format as fmt
from rlscope.trace.data import Events, ProcessTrace

MODES = ("auto", "off", "only")  # only: drop recorded inference/backprop, infer them
FORWARD, START, BACKWARD, STEP = 0, 1, 2, 3  # marker roles
_OPS = (fmt.OPERATION_BEGIN, fmt.OPERATION_END)
_MARKS = (fmt.MARK_CALL_BEGIN, fmt.MARK_CALL_END)
_CALLS = (fmt.BACKEND_CALL_BEGIN, fmt.BACKEND_CALL_END)


def _roles(strings: Iterable[tuple[int, str]]) -> dict[int, int]:
    out = {}
    for sid, s in strings:
        if s in fmt.MARK_FORWARD:
            out[sid] = FORWARD
        elif s in fmt.MARK_UPDATE_START:
            out[sid] = START
        elif s in fmt.MARK_BACKWARD or s in fmt.BACKWARD_CALLS:
            out[sid] = BACKWARD
        elif s in fmt.MARK_STEP:
            out[sid] = STEP
    return out


@dataclass
class Inferred:
    """Inferred operation intervals of one process (one row each)."""

    thread: np.ndarray  # int64
    start_ns: np.ndarray
    end_ns: np.ndarray
    op: np.ndarray  # index into fmt.INFERRED_OPS
    no_env: bool = False  # a thread with an update and no env step seen

    def __len__(self) -> int:
        return len(self.start_ns)


NO_ENV_NOTE = (
    "no env step was recognised in {process}: inference and backprop are inferred without "
    "env steps to cut the loop (an update from its first zero_grad or backward to its "
    "optimizer step; each forward outside one is an inference of its own), so they are "
    "approximate. Annotate the env step, `with rlscope.operation(\"simulation\"): "
    "obs = env.step(action)`, or make the env with gymnasium.make / envpool.make so "
    "rlscope sees it (docs/attribution.md#inferred-operations)")


def _calls(time: np.ndarray, kind: np.ndarray, name: np.ndarray, begin: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, name) of one thread's calls of a category (outermost only, so they
    never nest): each begin paired with the end right after it."""
    sel = np.flatnonzero((kind == begin) | (kind == begin + 1))
    is_b = kind[sel] == begin
    b = np.flatnonzero(is_b[:-1] & ~is_b[1:])
    return time[sel[b]], time[sel[b + 1]], name[sel[b]]



def thread_intervals(m_start: np.ndarray, m_end: np.ndarray, role: np.ndarray,
                     anchor_start: np.ndarray, anchor_end: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inferred (start, end, op) of one thread from its markers (role per marker, sorted
    by start) and its simulations (disjoint, sorted). The rule is the module's doc."""
    empty = (np.zeros(0, np.int64),) * 3
    if not len(m_start):
        return empty
    bounded = len(anchor_start) > 0
    if bounded:
        j = np.searchsorted(anchor_start, m_start, side="right") - 1
        inside = (j >= 0) & (m_start < anchor_end[np.maximum(j, 0)])
        keep = ~inside  # a forward inside an env step is the env's (simulation)
        m_start, m_end, role, seg = m_start[keep], m_end[keep], role[keep], j[keep] + 1
    else:  # no simulation seen: cut at each optimizer step's end (or backward's)
        cut = role == (STEP if (role == STEP).any() else BACKWARD)
        seg = np.searchsorted(np.sort(m_end[cut]), m_start, side="left")
    if not len(m_start):
        return empty
    n = int(seg.max()) + 1
    has_b = np.bincount(seg, weights=(role == BACKWARD), minlength=n) > 0
    upd = role != FORWARD
    upd_end = np.full(n, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(upd_end, seg[upd], m_end[upd])
    # Where an update begins: at the segment's first marker when env steps bound the
    # segment; else at its first update marker (zero_grad, backward), as what precedes it
    # may hold env steps rlscope did not see.
    starts = seg if bounded else seg[upd]
    firsts, first_idx = np.unique(starts, return_index=True)
    bp_start = np.full(n, np.iinfo(np.int64).max, np.int64)
    bp_start[firsts] = (m_start if bounded else m_start[upd])[first_idx]
    # Markers that begin before the update's end belong to it (a forward between the
    # backward and the step, a backward inside a forward).
    within = has_b[seg] & (m_start >= bp_start[seg]) & (m_start < upd_end[seg])
    bp_end = np.full(n, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(bp_end, seg[within], m_end[within])
    bp_segs = np.flatnonzero(has_b)
    bp_s = bp_start[bp_segs]
    bp_e = bp_end[bp_segs]
    inf = (role == FORWARD) & ~within
    if bounded:  # the forwards of a segment after its update: one inference
        inf &= seg > 0  # before the first env step or reset: building, warming up
        segs, idx = np.unique(seg[inf], return_index=True)
        s_inf = m_start[inf][idx]
        e_inf = np.full(n, np.iinfo(np.int64).min, np.int64)
        np.maximum.at(e_inf, seg[inf], m_end[inf])
        e_inf = e_inf[segs]
        nxt = segs < len(anchor_start)  # action selection lasts until the env step
        e_inf[nxt] = anchor_start[segs[nxt]]
    else:
        s_inf, e_inf = m_start[inf], m_end[inf]
    start = np.r_[bp_s, s_inf].astype(np.int64)
    end = np.r_[bp_e, e_inf].astype(np.int64)
    op = np.r_[np.full(len(bp_s), 1), np.zeros(len(s_inf))].astype(np.int64)
    o = np.argsort(start, kind="stable")
    return start[o], end[o], op[o]


def _nests(start: np.ndarray, end: np.ndarray, r_start: np.ndarray, r_end: np.ndarray
           ) -> np.ndarray:
    """For each candidate interval (disjoint, sorted), whether it nests with every
    recorded interval (which nest among themselves): none begins inside it and ends
    outside, or the other way round."""
    if not len(r_start):
        return np.ones(len(start), bool)
    t = np.r_[r_start, r_end]
    step = np.r_[np.ones(len(r_start), np.int64), -np.ones(len(r_end), np.int64)]
    o = np.lexsort((-step, t))  # at equal times an end before a begin? begins first
    t, depth = t[o], np.cumsum(step[o])
    d_at_s = np.where((i := np.searchsorted(t, start, side="right") - 1) >= 0,
                      depth[np.maximum(i, 0)], 0)
    d_at_e = np.where((k := np.searchsorted(t, end, side="left") - 1) >= 0,
                      depth[np.maximum(k, 0)], 0)
    lo, hi = i + 1, k + 1  # boundaries strictly inside: [lo, hi)
    ok = d_at_s == d_at_e
    some = hi > lo
    if some.any():
        idx = np.r_[np.c_[lo[some], hi[some]].ravel()]
        padded = np.r_[depth, 0]
        mins = np.minimum.reduceat(padded, idx)[::2]
        ok[some] &= mins >= d_at_s[some]
    return ok





def infer(ev: Events, strings: list[str], mode: str = "auto") -> Inferred:
    """The inferred operations of a process from its collected events (any order)."""
    z = np.zeros(0, np.int64)
    if mode == "off" or not len(ev):
        return Inferred(z, z, z, z)
    role_of = np.full(len(strings) + 1, -1, np.int64)  # string id -> marker role
    for sid, r in _roles(enumerate(strings)).items():
        role_of[sid] = r
    blocking = [i for i, s in enumerate(strings)
                if s in (fmt.LOOP_OPS if mode == "auto" else ("simulation",))]
    ignored = [i for i, s in enumerate(strings) if mode == "only" and s in fmt.INFERRED_OPS]
    sim = [i for i, s in enumerate(strings) if s == "simulation"]
    op_ev = np.flatnonzero(np.isin(ev.kind, _OPS) & ~np.isin(ev.name, ignored))
    ops = pair_scopes(ev.take(op_ev), fmt.OPERATION_BEGIN)
    out: list[tuple[np.ndarray, ...]] = []
    no_env = False
    for t in np.unique(ev.thread).tolist():
        mine = np.flatnonzero(ev.thread == t)
        o = mine[np.argsort(ev.time_ns[mine], kind="stable")]
        time, kind, name = ev.time_ns[o], ev.kind[o], ev.name[o]
        ms, me, mn = _calls(time, kind, name, fmt.MARK_CALL_BEGIN)
        bs, be, bn = _calls(time, kind, name, fmt.BACKEND_CALL_BEGIN)
        s, e, n = np.r_[ms, bs], np.r_[me, be], np.r_[mn, bn]
        role = role_of[np.minimum(n.astype(np.int64), len(strings))]
        known = role >= 0
        s, e, role = s[known], e[known], role[known]
        if not len(s):
            continue
        so = np.argsort(s, kind="stable")
        s, e, role = s[so], e[so], role[so]
        r = ops.thread == t
        r_s, r_e, r_n = ops.start_ns[r], ops.end_ns[r], ops.name[r]
        a_s, a_e = union(r_s[np.isin(r_n, sim)], r_e[np.isin(r_n, sim)])
        i_s, i_e, i_op = thread_intervals(s, e, role, a_s, a_e)
        no_env |= not len(a_s) and bool((role == BACKWARD).any())
        if not len(i_s):
            continue
        blocked = np.isin(r_n, blocking)
        u_s, u_e = union(r_s[blocked], r_e[blocked])
        o_s, o_e = r_s[~blocked], r_e[~blocked]
        ok = ~overlaps_any(i_s, i_e, u_s, u_e) & _nests(i_s, i_e, o_s, o_e)
        leaf = ~contains_any(o_s, o_e, a_s, a_e)  # the user's own part of an iteration
        ok &= ~inside_any(i_s, i_e, *union(o_s[leaf], o_e[leaf]))
        ok &= i_e > i_s
        out.append((np.full(int(ok.sum()), t, np.int64), i_s[ok], i_e[ok], i_op[ok]))
    if not out:
        return Inferred(z, z, z, z, no_env)
    t, s, e, op = (np.concatenate([x[i] for x in out]) for i in range(4))
    return Inferred(t, s, e, op, no_env)


class InferredOps:
    """Inferred operations as events, merged into a process's event stream by time; in
    mode ``only`` the recorded ``inference``/``backprop`` operations are dropped from it.
    ``strings``: the process's strings plus the operation names they lacked."""

    def __init__(self, inferred: Inferred, strings: list[str], mode: str = "auto") -> None:
        self.strings = strings = list(strings)
        ids = []
        for op in fmt.INFERRED_OPS:
            if op not in strings:
                strings.append(op)
            ids.append(strings.index(op))
        n = len(inferred)
        time = np.r_[inferred.start_ns, inferred.end_ns].astype(np.int64)
        thread = np.r_[inferred.thread, inferred.thread].astype(np.uint32)
        kind = np.r_[np.full(n, fmt.OPERATION_BEGIN), np.full(n, fmt.OPERATION_END)]
        name = np.array(ids, np.uint32)[np.r_[inferred.op, inferred.op]] if n else \
            np.zeros(0, np.uint32)
        o = np.lexsort((time, thread))
        self.events = Events(time[o], thread[o], kind[o].astype(np.uint8),
                             name[o].astype(np.uint32))
        self.drop = np.array(ids if mode == "only" else [], np.uint32)
        self.no_env = inferred.no_env  # say so: see note()
        self._next: dict[int, int] = {}  # thread -> first event not merged yet
        self.count = n

    def note(self, process: str) -> list[str]:
        """The warning for the process's report: none, or that no env step was seen."""
        return [NO_ENV_NOTE.format(process=process)] if self.no_env else []

    def _dropped(self, ev: Events) -> Events:
        if not len(self.drop) or not len(ev):
            return ev
        bad = np.isin(ev.kind, _OPS) & np.isin(ev.name, self.drop)
        return ev.take(np.flatnonzero(~bad)) if bad.any() else ev

    def batch(self, ev: Events) -> Events:
        """A batch of the stream with the inferred events of its time range (per thread:
        up to its last event in the batch); feed :meth:`rest` after the last."""
        ev = self._dropped(ev)
        if not len(self.events) or not len(ev):
            return ev
        s = self.events
        take = []
        for t in np.unique(ev.thread).tolist():
            last = int(ev.time_ns[ev.thread == t].max())
            lo = self._next.get(t)
            if lo is None:
                lo = int(np.searchsorted(s.thread, t, side="left"))
            hi = int(np.searchsorted(s.thread, t, side="right"))
            stop = lo + int(np.searchsorted(s.time_ns[lo:hi], last, side="right"))
            if stop > lo:
                take.append(np.arange(lo, stop))
            self._next[t] = stop
        if not take:
            return ev
        return _merged(ev, s.take(np.concatenate(take)))

    def rest(self) -> Events:
        """The inferred events no batch took (after each thread's last event), in order."""
        s = self.events
        if not len(s):
            return s
        take = []
        for t in np.unique(s.thread).tolist():
            lo = self._next.get(t)
            if lo is None:
                lo = int(np.searchsorted(s.thread, t, side="left"))
            hi = int(np.searchsorted(s.thread, t, side="right"))
            if hi > lo:
                take.append(np.arange(lo, hi))
            self._next[t] = hi
        return s.take(np.concatenate(take)) if take else Events.empty()

    def whole(self, ev: Events) -> Events:
        """All of a process's events with the inferred ones, in time order (stable: at
        equal times recorded events first)."""
        ev = self._dropped(ev)
        if not len(self.events):
            return ev
        allev = _merged(ev, self.events)
        return allev.take(np.argsort(allev.time_ns, kind="stable"))


def _merged(ev: Events, inferred: Events) -> Events:
    """Recorded and inferred events in an order that a stable sort by time keeps right at
    equal times: an inferred end before the recorded events (an inference ends where the
    env step begins), an inferred begin after them."""
    end = inferred.kind == fmt.OPERATION_END
    return Events.concat([inferred.take(np.flatnonzero(end)), ev,
                          inferred.take(np.flatnonzero(~end))])


def infer_ops(c: Collector, strings: list[str], mode: str = "auto") -> InferredOps | None:
    """The plan from a process's collected events (None: nothing to infer or drop)."""
    check_mode(mode)
    if mode == "off" or not c.marks:
        return None
    return InferredOps(infer(c.events(), strings, mode), strings, mode)


def apply(p: ProcessTrace, mode: str = "auto") -> ProcessTrace:
    """``p`` with the inferred operations among its events (a copy; ``p`` is unchanged
    when there is nothing to infer)."""
    if mode == "off" or p.header.source != "python":
        return p
    c = Collector()
    c.add(p.events, dict(enumerate(p.strings)))
    pl = infer_ops(c, p.strings, mode)
    if pl is None:
        return p
    return replace(p, events=pl.whole(p.events), strings=pl.strings,
                   warnings=[*p.warnings, *pl.note(process_label(p.header.pid, p.path))])


def process_label(pid: int, path: Path) -> str:
    """How the notes name a process: its pid and trace file."""
    return f"process {pid} ({path.name})"


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown inference mode {mode!r}; choose from {', '.join(MODES)}")
