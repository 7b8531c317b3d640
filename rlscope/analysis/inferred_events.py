"""The few events inference (analysis.inferred) reads, kept chunk by chunk in the first
pass over a process's file: operations, phase markers and backward calls."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from rlscope.trace import format as fmt
from rlscope.trace.data import Events
from rlscope.trace.records import iter_chunks


class Collector:
    """Keeps, chunk by chunk, the few events the inference reads: operations, markers
    and backward calls (a few per loop iteration, not the backend calls).

    Operations matter only once a marker is seen. With ``path`` (the file the chunks come
    from), while none is, at most ``limit`` events are kept: past it they are dropped and
    the chunks they came from are read again if a marker turns up later (a chunk's
    selection depends only on the chunk and strings defined by then, so it is the same),
    so a file without markers costs no memory for its operations."""

    def __init__(self, path: Path | None = None, limit: int = 1 << 20) -> None:
        self._parts: list[Events] = []
        self._kept = 0
        self._backward: list[int] = []
        self.marks = 0
        self._path, self._limit = path, limit
        self._chunks = 0  # chunks added
        self._dropped = 0  # the first this many chunks' events were dropped

    def _select(self, ev: Events) -> tuple[Events | None, int]:
        k = ev.kind
        ops = (k == fmt.OPERATION_BEGIN) | (k == fmt.OPERATION_END)
        marks = (k == fmt.MARK_CALL_BEGIN) | (k == fmt.MARK_CALL_END)
        keep = ops | marks
        if self._backward:
            calls = (k == fmt.BACKEND_CALL_BEGIN) | (k == fmt.BACKEND_CALL_END)
            keep |= calls & np.isin(ev.name, self._backward)
        n = int(np.count_nonzero(marks))
        return (ev.take(np.flatnonzero(keep)) if keep.any() else None), n

    def add(self, ev: Events, new_strings: Mapping[int, str]) -> None:
        self._chunks += 1
        self._backward += [i for i, s in new_strings.items() if s in fmt.BACKWARD_CALLS]
        if not len(ev):
            return
        part, marks = self._select(ev)
        if marks and not self.marks and self._dropped:
            self._parts[:0] = self._reread(self._dropped)
            self._dropped = 0
        self.marks += marks
        if part is not None:
            self._parts.append(part)
            self._kept += len(part)
        if not self.marks and self._path is not None and self._kept > self._limit:
            self._parts, self._kept, self._dropped = [], 0, self._chunks

    def _reread(self, chunks: int) -> list[Events]:
        assert self._path is not None
        out = []
        for i, c in enumerate(iter_chunks(self._path)):
            if i >= chunks:
                break
            if len(c.events):
                part, _ = self._select(c.events)
                if part is not None:
                    out.append(part)
        return out

    def events(self) -> Events:
        return Events.concat(self._parts)
