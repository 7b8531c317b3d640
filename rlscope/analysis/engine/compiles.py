"""JIT compilations (the compile records rlscope.intercept.compilers writes as metadata)
joined to the operation and phase open on the compiling thread when each began
(docs/attribution.md#compile-time)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rlscope.trace import format as fmt


@dataclass(frozen=True)
class Compile:
    """One compilation (or stage of one) and where it happened: ``thread`` is the
    compiling thread's index in the trace (-1: a thread that recorded nothing), ``phase``
    and ``path`` the phase and innermost operation open on it at ``begin_ns``."""

    framework: str  # torch, jax, tensorflow
    function: str
    begin_ns: int
    end_ns: int
    tid: int
    reason: str  # why the framework recompiled ("" where it does not say)
    kind: str  # compile, trace, lower, cache hit, backward, ...
    counts: bool  # one compilation (False: a stage of one counted by another record)
    graph_breaks: int
    thread: int = -1
    phase: int = 0
    path: int = 0


def is_compile_key(key: str) -> bool:
    return key.startswith(fmt.META_COMPILE_PREFIX)


def without_compiles(metadata: dict[str, Any]) -> dict[str, Any]:
    """The metadata less the compile records (they have their own table)."""
    return {k: v for k, v in metadata.items() if not is_compile_key(k)}


def compile_records(metadata: dict[str, Any]) -> list[Compile]:
    """The process's compile records in begin order; malformed ones are skipped."""
    out = []
    for key, v in metadata.items():
        if not is_compile_key(key) or not isinstance(v, list) or len(v) < 9:
            continue
        fw, fn, b, e, tid, reason, kind, counts, breaks = v[:9]
        if not (all(isinstance(x, str) for x in (fw, fn, reason, kind))
                and all(isinstance(x, int) for x in (b, e, tid, counts, breaks))):
            continue
        out.append(Compile(fw, fn, b, max(e, b), tid, reason, kind, bool(counts), breaks))
    return sorted(out, key=lambda c: c.begin_ns)


class CompileJoin:
    """Hands each thread's compile records to the sweep as its batches go by: a record
    takes the state after the thread's last event at or before its begin."""

    def __init__(self, records: list[Compile]) -> None:
        self._by_tid: dict[int, list[Compile]] = {}
        for c in records:
            self._by_tid.setdefault(c.tid, []).append(c)
        self.out: list[Compile] = []

    def __bool__(self) -> bool:
        return bool(self._by_tid)

    def take(self, thread: int, tid: int, time: np.ndarray, phase: np.ndarray,
             path: np.ndarray, hi: int | None) -> None:
        """Join the records of ``tid`` that began before ``hi`` (all: None) to the state
        arrays of this batch (``time``: its event times; phase/path after each)."""
        todo = self._by_tid.get(tid)
        if not todo:
            return
        n = len(todo) if hi is None else sum(1 for c in todo if c.begin_ns < hi)
        if not n:
            return
        now, self._by_tid[tid] = todo[:n], todo[n:]
        i = np.searchsorted(time, np.array([c.begin_ns for c in now], np.int64),
                            side="right") - 1
        for c, k in zip(now, i.tolist(), strict=True):
            ph, pa = (int(phase[k]), int(path[k])) if k >= 0 else (0, 0)
            self.out.append(_with(c, thread, ph, pa))

    def finish(self) -> list[Compile]:
        """Every record joined; those of threads the sweep never saw stay unannotated."""
        for todo in self._by_tid.values():
            self.out += todo
        self._by_tid.clear()
        return sorted(self.out, key=lambda c: c.begin_ns)


def _with(c: Compile, thread: int, phase: int, path: int) -> Compile:
    from dataclasses import replace

    return replace(c, thread=thread, phase=phase, path=path)


def union_ns(begin: np.ndarray, end: np.ndarray) -> int:
    """Length of the union of intervals (nested stages are counted once)."""
    if not len(begin):
        return 0
    o = np.argsort(begin, kind="stable")
    b, e = begin[o], np.maximum.accumulate(end[o])
    starts = np.r_[True, b[1:] > e[:-1]]
    sb = b[starts]
    se = np.r_[e[np.flatnonzero(starts)[1:] - 1], e[-1]]
    return int((se - sb).sum())
