"""Chrome / Perfetto trace-event JSON: one track per thread and kind of slice, one per
GPU stream; opens in ui.perfetto.dev and chrome://tracing.

Written incrementally so a large trace needs no large in-memory document.
"""

from __future__ import annotations

import json
from typing import IO

from rlscope.analysis.roles import display_name
from rlscope.analysis.slices import process_tracks
from rlscope.trace import format as fmt
from rlscope.trace.clocks import RunClock
from rlscope.trace.data import ProcessTrace, Trace

_SORT_STRIDE = 10_000_000  # above any track's sort index (slices.process_tracks)


def _session(p: ProcessTrace) -> str:
    """What a later trace of a pid is: a recording session, or another process."""
    n = p.metadata.get(fmt.META_SESSION)
    return f"session {n + 1}" if isinstance(n, int) and n > 0 else "pid reused"


def write_chrome_trace(trace: Trace, out: IO[str]) -> int:
    """Write the trace; return the number of trace events written."""
    procs = trace.processes
    clock = RunClock.of(trace.run, [p.header for p in procs])  # several hosts: one clock
    shift = [clock.shift(p.header.host) for p in procs]
    firsts = []
    for p, sh in zip(procs, shift, strict=True):
        firsts += [int(a.min()) + sh for a in (p.events.time_ns, p.api_calls.start_ns,
                                               p.gpu.start_ns) if len(a)]
    origin = min(firsts, default=0)
    n = 0
    out.write('{"displayTimeUnit": "ns", "otherData": ')
    out.write(json.dumps({"source": "rlscope", "directory": str(trace.directory),
                          "origin_monotonic_ns": origin}))
    out.write(', "traceEvents": [\n')
    first = True

    def emit(obj: dict) -> None:
        nonlocal first, n
        out.write(("" if first else ",\n") + json.dumps(obj, separators=(",", ":")))
        first = False
        n += 1

    # A pid's later traces (recording sessions, docs/rls-analyze.md) are the same process:
    # their tracks follow its first trace's, named and sorted after them.
    seen: dict[int, tuple[int, int]] = {}  # pid -> (traces, tracks) so far
    for p, sh in zip(procs, shift, strict=True):
        t0 = origin - sh  # the origin on this process's host's clock
        pid = p.pid
        traces, tid0 = seen.get(pid, (0, 0))
        if not traces:
            emit({"ph": "M", "name": "process_name", "pid": pid,
                  "args": {"name": f"{display_name(p.header.argv, p.metadata)} ({pid})"}})
        tracks = list(process_tracks(p))
        seen[pid] = (traces + 1, tid0 + len(tracks))
        later = f" [{_session(p)}]" if traces else ""
        for tid, tr in enumerate(tracks, start=tid0 + 1):
            emit({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                  "args": {"name": tr.name + later}})
            emit({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                  "args": {"sort_index": traces * _SORT_STRIDE + tr.sort}})
            starts = ((tr.start_ns - t0) / 1e3).tolist()
            ends = ((tr.end_ns - t0) / 1e3).tolist()
            for s, e, name in zip(starts, ends, tr.names, strict=True):
                ts = round(s, 3)  # whole ns: nesting survives the rounding
                emit({"ph": "X", "pid": pid, "tid": tid, "name": name, "cat": tr.category,
                      "ts": ts, "dur": round(round(e, 3) - ts, 3)})
        pr = p.progress
        for t, steps in zip(((pr.time_ns - t0) / 1e3).tolist(), pr.timesteps.tolist(),
                            strict=True):
            emit({"ph": "C", "pid": pid, "name": "timesteps", "ts": round(t, 3),
                  "args": {"timesteps": steps}})
    out.write("\n]}\n")
    return n
