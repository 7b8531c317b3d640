"""Python hotspots per operation: each Python stack sample (rlscope.inprocess.pysampler)
joined to the state of its thread at its time — innermost operation, phase, CPU category —
with the same per-thread state the overlap sweep uses (engine.threadstate), then counted
per operation: the functions by self samples (innermost frame) and by total samples (any
frame), as shares of the operation's *Python* samples (taken while the thread was in
none of the intercepted backend, simulator or wait calls). docs/attribution.md#python-hotspots.

The join runs on the recorded (uncorrected) event times, the clock the samples carry.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from rlscope.analysis.engine import categories as C
from rlscope.analysis.engine.paths import FIRST_OPERATION_ID, NameTable, PathTable
from rlscope.analysis.engine.process import process_info
from rlscope.analysis.engine.threadstate import thread_state
from rlscope.trace.data import ProcessTrace, Trace
from rlscope.trace.pystacks_reader import PyStacks

TOP = 10  # functions per operation and ranking in the report


@dataclass
class Samples:
    """Every joined sample of a run, one row each; functions and stacks run-wide."""

    functions: list[tuple[str, int, str]]  # (file, first line, qualified name)
    stacks: list[tuple[int, ...]]  # function ids, outermost first
    pid: np.ndarray
    tid: np.ndarray
    operation: np.ndarray  # index into ``operations`` (-1: outside every operation)
    phase: np.ndarray  # index into ``phases`` (0: none)
    category: np.ndarray  # engine.categories CPU category at the sample
    stack: np.ndarray
    operations: list[str]  # operation paths ("train > inference")
    phases: list[str]
    hz: dict[int, float] = field(default_factory=dict)  # pid -> requested rate
    unjoined: int = 0  # samples of a thread or time no process's trace covers

    def __len__(self) -> int:
        return len(self.stack)


class _Interner:
    def __init__(self) -> None:
        self.functions: dict[tuple[str, int, str], int] = {}
        self.stacks: dict[tuple[int, ...], int] = {}

    def add(self, st: PyStacks) -> np.ndarray:
        """Run-wide stack id of each of the file's stack ids."""
        fmap = [self.functions.setdefault(f, len(self.functions)) for f in st.functions]
        smap = np.zeros(len(st.stacks), np.int32)
        for i, s in enumerate(st.stacks):
            key = tuple(fmap[f] if f < len(fmap) else 0 for f in s)
            smap[i] = self.stacks.setdefault(key, len(self.stacks))
        return smap


def join(trace: Trace, stacks: list[PyStacks]) -> Samples:
    """Join the samples of every process to its trace (events as recorded, operations
    inferred as the analysis infers them)."""
    paths, phases = PathTable(), NameTable()
    interner = _Interner()
    by_pid: dict[tuple[str, int], list[ProcessTrace]] = {}
    for p in trace.processes:
        by_pid.setdefault((str(p.path.parent), p.pid), []).append(p)
    cols: list[list[np.ndarray]] = [[] for _ in range(6)]
    hz: dict[int, float] = {}
    unjoined = 0
    for st in stacks:
        if not len(st):
            continue
        hz[st.pid] = st.hz
        gstack = interner.add(st)[st.stack]
        taken = np.zeros(len(st), bool)
        for p in by_pid.get((str(st.path.parent), st.pid), []):
            for sel, path, phase, cat in _join_process(p, st, paths, phases):
                taken[sel] = True
                for c, v in zip(cols, (np.full(len(sel), st.pid), st.tid[sel], path, phase,
                                       cat, gstack[sel]), strict=True):
                    c.append(v)
        unjoined += int((~taken).sum())
    cat_ = [np.concatenate(c) if c else np.zeros(0, np.int64) for c in cols]
    # Path ids to operation indices: reserved ids (outside, start-up) are not operations.
    op_of = np.array([i - FIRST_OPERATION_ID if i >= FIRST_OPERATION_ID else -1
                      for i in range(len(paths))], np.int64)
    names = [paths.path(i) for i in range(FIRST_OPERATION_ID, len(paths))]
    functions = list(interner.functions)
    stack_list = list(interner.stacks)
    return Samples(functions, stack_list, cat_[0], cat_[1],
                   op_of[cat_[2]] if len(cat_[2]) else cat_[2], cat_[3], cat_[4], cat_[5],
                   names, list(phases.names), hz, unjoined)


def _join_process(p: ProcessTrace, st: PyStacks, paths: PathTable, phases: NameTable
                  ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """(sample positions, path id, phase id, category) per thread of ``p``."""
    ev = p.events
    if not len(ev):
        return
    info = process_info(ev, p.strings, phases)
    span = info.span
    inside = (st.time_ns >= span.start_ns) & (st.time_ns <= span.end_ns)
    order = np.argsort(ev.thread, kind="stable")
    th = ev.thread[order]
    for t, ti in p.threads.items():
        sel = np.flatnonzero(inside & (st.tid == ti.tid))
        if not len(sel):
            continue
        lo, hi = np.searchsorted(th, [t, t + 1])
        idx = order[lo:hi]
        if not len(idx):
            continue
        idx = idx[np.argsort(ev.time_ns[idx], kind="stable")]
        own = t in info.phase_threads or t == span.main_thread
        inherited = (None if own or not len(info.main_phase_times)
                     else (info.main_phase_times, info.main_phase_ids))
        s = thread_state(t, ti.tid, ti.name, t == span.main_thread, ev.time_ns[idx],
                         ev.kind[idx], ev.name[idx], p.strings, paths, phases,
                         (span.start_ns, span.end_ns), inherited)
        i = s.state_at(st.time_ns[sel])
        ok = i >= 0
        sel, i = sel[ok], i[ok]
        yield sel, s.path[i].astype(np.int64), s.phase[i].astype(np.int64), \
            s.category[i].astype(np.int64)


# -- per operation ---------------------------------------------------------------------
@dataclass
class FunctionRow:
    name: str
    file: str
    line: int
    samples: int
    share: float  # of the operation's Python samples


@dataclass
class OperationHotspots:
    operation: str
    samples: int  # every sample of a thread inside the operation
    python_samples: int  # ... while in Python (no intercepted call open)
    by_self: list[FunctionRow]
    by_total: list[FunctionRow]
    by_category: dict[str, int]
    by_process: dict[int, int] = field(default_factory=dict)  # pid -> samples
    by_phase: dict[str, int] = field(default_factory=dict)  # phase ("" none) -> samples


def per_operation(s: Samples, top: int = TOP) -> list[OperationHotspots]:
    """Operations with samples, most sampled first."""
    out = []
    ops, n_ops = s.operation, len(s.operations)
    counts = np.bincount(ops[ops >= 0], minlength=n_ops) if len(ops) else np.zeros(n_ops)
    for o in np.argsort(-counts, kind="stable").tolist():
        if counts[o] == 0:
            continue
        in_op = np.flatnonzero(ops == o)
        py = in_op[s.category[in_op] == C.PYTHON]
        cats = np.bincount(s.category[in_op], minlength=C.N_CATEGORIES)
        by_self, by_total = _rank(s, s.stack[py], top)
        pids, npid = np.unique(s.pid[in_op], return_counts=True)
        phs, nph = np.unique(s.phase[in_op], return_counts=True)
        out.append(OperationHotspots(
            s.operations[o], len(in_op), len(py), by_self, by_total,
            {C.CATEGORY_NAMES[c]: int(n) for c, n in enumerate(cats.tolist()) if n},
            dict(zip(pids.tolist(), npid.tolist(), strict=True)),
            {s.phases[p] if 0 <= p < len(s.phases) else "": n
             for p, n in zip(phs.tolist(), nph.tolist(), strict=True)}))
    return out


def _rank(s: Samples, stacks: np.ndarray, top: int
          ) -> tuple[list[FunctionRow], list[FunctionRow]]:
    n = len(stacks)
    if not n:
        return [], []
    ids, k = np.unique(stacks, return_counts=True)
    self_n: dict[int, int] = {}
    total_n: dict[int, int] = {}
    depth: dict[int, int] = {}  # deepest position seen (ties: the innermost first)
    for sid, c in zip(ids.tolist(), k.tolist(), strict=True):
        st = s.stacks[sid]
        if not st:
            continue
        self_n[st[-1]] = self_n.get(st[-1], 0) + c
        for d, f in enumerate(st):
            depth[f] = max(depth.get(f, 0), d)
        for f in set(st):  # a recursive function counts once per sample
            total_n[f] = total_n.get(f, 0) + c

    def rows(counts: dict[int, int]) -> list[FunctionRow]:
        best = sorted(counts.items(), key=lambda kv: (-kv[1], -depth[kv[0]], kv[0]))[:top]
        return [FunctionRow(s.functions[f][2], s.functions[f][0], s.functions[f][1], c, c / n)
                for f, c in best]

    return rows(self_n), rows(total_n)


def flame_stacks(s: Samples, operation: int) -> dict[tuple[int, ...], int]:
    """The operation's samples as (stack, count); a sample taken inside an intercepted call
    gets the call's category as a last frame (function id -1 - category)."""
    sel = np.flatnonzero(s.operation == operation)
    out: dict[tuple[int, ...], int] = {}
    if not len(sel):
        return out
    key = s.stack[sel].astype(np.int64) * 16 + s.category[sel]
    ids, k = np.unique(key, return_counts=True)
    for v, c in zip(ids.tolist(), k.tolist(), strict=True):
        sid, cat = divmod(v, 16)
        st = s.stacks[sid] + ((-1 - cat,) if cat != C.PYTHON else ())
        out[st] = out.get(st, 0) + c
    return out
