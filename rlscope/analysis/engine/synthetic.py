"""Build in-memory process traces from plain rows: for tests and benchmarks of the
analysis (no file, no recorder)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlscope.trace import format as fmt
from rlscope.trace.data import Events, Header, ProcessTrace, Progress, ThreadInfo
from rlscope.trace.gpu import RUNTIME_API, CudaApiCalls, GpuActivities


def process_trace(events: Sequence[tuple[int, int, int, str]],
                  threads: dict[int, int] | None = None,
                  api: Sequence[tuple[int, int, int, int, str]] = (),
                  gpu: Sequence[tuple[int, int, int, int, int]] = (),
                  progress: Sequence[tuple[int, int, int]] = (),
                  pid: int = 100, name: str = "synthetic", ppid: int = 1,
                  argv: Sequence[str] | None = None, metadata: dict[str, Any] | None = None,
                  host: str = "host") -> ProcessTrace:
    """A process trace from rows.

    events: (time_ns, thread index, kind, name); threads: index -> OS tid (default
    1000 + index); api: (tid, start, end, correlation id, function name); gpu: (kind,
    stream, start, end, correlation id); progress: (time_ns, timesteps, total); argv
    defaults to ``(name,)``. The header's clock pair is read at the first event, both
    clocks equal.
    """
    strings = [""]
    ids: dict[str, int] = {"": 0}

    def sid(s: str) -> int:
        if s not in ids:
            ids[s] = len(strings)
            strings.append(s)
        return ids[s]

    rows = [(t, th, k, sid(n)) for t, th, k, n in events]
    rows += [(t, 0, fmt.PROGRESS, 0) for t, _, _ in progress]
    a = np.array(rows, np.int64).reshape(-1, 4)
    ev = Events(a[:, 0].copy(), a[:, 1].astype(np.uint32), a[:, 2].astype(np.uint8),
                a[:, 3].astype(np.uint32))
    idx = sorted({int(x) for x in ev.thread.tolist()} | set(threads or {}))
    tmap = {i: (threads or {}).get(i, 1000 + i) for i in idx}
    tinfo = {i: ThreadInfo(i, tid, "MainThread" if i == 0 else f"thread-{i}")
             for i, tid in tmap.items()}
    pr = np.array(progress, np.int64).reshape(-1, 3)
    prog = Progress(pr[:, 0], np.zeros(len(pr), np.uint32), pr[:, 1], pr[:, 2])
    t0 = int(ev.time_ns.min()) if len(ev) else 0
    header = Header(fmt.FORMAT_VERSION, "python", pid, ppid, host, name,
                    tuple(argv) if argv is not None else (name,),
                    fmt.ClockPair(t0, t0, 0), "synthetic", "0")
    p = ProcessTrace(Path(f"python.{pid}{fmt.FILE_SUFFIX}"), header, ev, strings, tinfo,
                     prog, dict(metadata or {}))
    if api:
        p.api_calls = api_calls(api)
    if gpu:
        p.gpu = gpu_activities(gpu)
    return p


def api_calls(rows: Sequence[tuple[int, int, int, int, str]]) -> CudaApiCalls:
    strings = [""]
    names = []
    for *_, n in rows:
        if n not in strings:
            strings.append(n)
        names.append(strings.index(n))
    a = np.array([r[:4] for r in rows], np.int64).reshape(-1, 4)
    return CudaApiCalls(a[:, 0].copy(), a[:, 1].copy(), a[:, 2].copy(),
                        a[:, 3].astype(np.uint64), np.array(names, np.uint32),
                        np.full(len(a), RUNTIME_API, np.uint8), strings)


def gpu_activities(rows: Sequence[tuple[int, int, int, int, int]]) -> GpuActivities:
    a = np.array(rows, np.int64).reshape(-1, 5)
    n = len(a)
    return GpuActivities(a[:, 0].astype(np.uint8), np.zeros(n, np.uint32),
                         a[:, 1].astype(np.uint32), a[:, 2].copy(), a[:, 3].copy(),
                         a[:, 4].astype(np.uint64), np.zeros(n, np.uint32),
                         np.zeros(n, np.int64))
