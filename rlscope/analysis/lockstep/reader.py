"""Reading what the lock-step analysis needs: per process, its env events, the
operations it names (inference, optimizing) and the vector envs' wait calls, from a trace
already read or, a chunk at a time, from the trace files. The actor/learner iteration
analysis (rlscope.analysis.actors) reads the same input: with it, ``sync_weights``
operations, the ``sampling``/``training`` phases and the progress records' times."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlscope.analysis.intervals import Intervals
from rlscope.analysis.processes import roles
from rlscope.trace import format as fmt
from rlscope.trace.data import EnvEvents, Events, Header, Trace

OPTIMIZING_OPS = ("backprop",)  # the SB3 integration's train(); rlscope's usual name
INFERENCE_OPS = ("inference",)
SYNC_OPS = ("sync_weights",)  # the RLlib integration's weight sync (driver and runners)
ITERATION_PHASES = ("sampling", "training")  # the RLlib integration's driver phases
_WAIT_SUFFIXES = (".step_wait", ".reset_wait")


@dataclass
class ProcessEvents:
    """What the lock-step analysis needs of one process."""

    pid: int
    process: str
    strings: list[str]
    metadata: dict[str, Any]
    env: EnvEvents
    ops: Intervals  # outermost inference / optimizing operations
    waits: Intervals  # the vector envs' step_wait / reset_wait blocking calls
    phases: Intervals = field(default_factory=Intervals.empty)  # ITERATION_PHASES
    progress_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def ids(self, predicate: Any) -> np.ndarray:
        return np.array([i for i, s in enumerate(self.strings) if predicate(s)], np.int64)


def _wanted_op(s: str) -> bool:
    return s in OPTIMIZING_OPS or s in INFERENCE_OPS or s in SYNC_OPS or s in ITERATION_PHASES


def _wanted_wait(s: str) -> bool:
    return s.endswith(_WAIT_SUFFIXES)


def _pairs(time: np.ndarray, thread: np.ndarray, kind: np.ndarray, name: np.ndarray,
           begin: int, end: int, outermost: bool) -> tuple[Intervals, np.ndarray]:
    """Intervals from begin/end events per (thread, name), in time order per thread, and
    the position of each interval's begin event in the input.

    ``outermost``: nested pairs of the same name merge into the outer one (operations);
    otherwise each begin pairs with an end right after it, so a begin whose end was lost
    (a killed process) is skipped rather than swallowing what follows (env events).
    """
    sel = np.flatnonzero((kind == begin) | (kind == end))
    if not len(sel):
        return Intervals.empty(), np.zeros(0, np.int64)
    t, th, nm = time[sel], thread[sel].astype(np.int64), name[sel].astype(np.int64)
    o = np.lexsort((np.arange(len(sel)), t, nm, th))  # stable in time per (thread, name)
    sel, t, th, nm = sel[o], t[o], th[o], nm[o]
    is_b = kind[sel] == begin
    first = np.r_[True, (th[1:] != th[:-1]) | (nm[1:] != nm[:-1])]
    if outermost:
        group = np.cumsum(first)
        step = np.where(is_b, 1, -1)
        depth = np.empty(len(t), np.int64)
        starts = np.flatnonzero(first)
        for g0, g1 in zip(starts, np.r_[starts[1:], len(t)], strict=True):  # few groups
            dg = np.cumsum(step[g0:g1])
            depth[g0:g1] = dg - np.minimum(np.minimum.accumulate(dg), 0)  # stray ends
        prev = np.r_[0, depth[:-1]]
        prev[first] = 0
        b = np.flatnonzero(is_b & (prev == 0) & (depth == 1))
        e = np.flatnonzero(~is_b & (depth == 0) & (prev > 0))
        j = np.searchsorted(e, b)
        ok = j < len(e)
        b, j = b[ok], j[ok]
        ok = group[e[j]] == group[b]
        b, en = b[ok], e[j[ok]]
    else:
        b = np.flatnonzero(is_b & np.r_[~is_b[1:] & ~first[1:], False])
        en = b + 1
    return Intervals(t[b], t[en], th[b], nm[b]), sel[b]


def env_pairs(env: EnvEvents, reset: bool) -> tuple[Intervals, np.ndarray]:
    """(intervals, env index of each) of a process's env steps or resets."""
    kb, ke = ((fmt.ENV_RESET_BEGIN, fmt.ENV_RESET_END) if reset
              else (fmt.ENV_STEP_BEGIN, fmt.ENV_STEP_END))
    iv, pos = _pairs(env.time_ns, env.thread, env.kind, env.name, kb, ke, outermost=False)
    return iv, env.index[pos].astype(np.int64)


def _process(pid: int, process: str, strings: list[str], metadata: dict[str, Any],
             env: EnvEvents, time: np.ndarray, thread: np.ndarray, kind: np.ndarray,
             name: np.ndarray, progress_ns: np.ndarray | None = None) -> ProcessEvents:
    ops, _ = _pairs(time, thread, kind, name, fmt.OPERATION_BEGIN, fmt.OPERATION_END, True)
    waits, _ = _pairs(time, thread, kind, name, fmt.WAIT_CALL_BEGIN, fmt.WAIT_CALL_END,
                      False)
    phases, _ = _pairs(time, thread, kind, name, fmt.PHASE_BEGIN, fmt.PHASE_END, True)
    pr = np.sort(np.asarray(progress_ns if progress_ns is not None else [], np.int64))
    return ProcessEvents(pid, process, strings, metadata, env, ops, waits, phases, pr)


def _label(header: Header, metadata: dict[str, Any]) -> str:
    """The process's name, as the process tree gives it (a Ray worker's by what it runs,
    a script by its command line)."""
    return roles.display_name(header.argv, metadata, fallback=header.process_name)


def from_trace(trace: Trace, infer: str = "auto") -> list[ProcessEvents]:
    """The processes of a trace already read (rlscope.trace.reader.read_trace), with the
    operations inferred where none is recorded (rlscope.analysis.inferred)."""
    from rlscope.analysis import inferred

    out = []
    for p in trace.processes:
        p = inferred.apply(p, infer)
        ev = p.events
        op_ids = [i for i, s in enumerate(p.strings) if _wanted_op(s) or _wanted_wait(s)]
        keep = np.isin(ev.name, op_ids) & np.isin(ev.kind, Collector._KINDS)
        out.append(_process(p.pid, _label(p.header, p.metadata), p.strings, p.metadata, p.env,
                            ev.time_ns[keep], ev.thread[keep], ev.kind[keep],
                            ev.name[keep], p.progress.time_ns))
    return out


class Collector:
    """Keeps, chunk by chunk, what the lock-step analysis needs of one process besides its
    env events: the outermost inference / optimizing operations and the vector envs' wait
    calls. Fed by the pipeline's first pass over each trace file (no second read)."""

    _KINDS = np.array([fmt.OPERATION_BEGIN, fmt.OPERATION_END, fmt.WAIT_CALL_BEGIN,
                       fmt.WAIT_CALL_END, fmt.PHASE_BEGIN, fmt.PHASE_END])

    def __init__(self) -> None:
        self._wanted: list[int] = []
        self._kept: list[Events] = []

    def add(self, ev: Events, new_strings: Mapping[int, str]) -> None:
        self._wanted += [i for i, s in new_strings.items() if _wanted_op(s) or _wanted_wait(s)]
        if self._wanted and len(ev):
            m = np.isin(ev.kind, self._KINDS) & np.isin(ev.name, self._wanted)
            if m.any():
                self._kept.append(ev.take(np.flatnonzero(m)))

    def finish(self, header: Header, strings: list[str], metadata: dict[str, Any],
               env: EnvEvents, plan: Any = None,
               progress_ns: np.ndarray | None = None) -> ProcessEvents:
        """The process's events; ``plan``: its inferred operations (inferred.InferredOps), whose
        strings ``strings`` already are; ``progress_ns``: its progress records' times."""
        ev = Events.concat(self._kept)
        if plan is not None:  # the inferred operations (all named inference or backprop)
            ev = plan.whole(ev)
        return _process(header.pid, _label(header, metadata), strings, metadata, env,
                        ev.time_ns, ev.thread, ev.kind, ev.name, progress_ns)
