"""Chrome / Perfetto trace-event JSON: one track per thread and kind of slice, one per
GPU stream, arrows from each CUDA launch to the GPU work it launched, and counter tracks
of the sampled utilisation (per process, per core, per GPU) beside rlscope's GPU busy
time; opens in ui.perfetto.dev and chrome://tracing.

Written incrementally so a large trace needs no large in-memory document.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

import numpy as np

from rlscope.analysis.roles import display_name
from rlscope.analysis.slices import process_tracks
from rlscope.trace import format as fmt
from rlscope.trace.data import ProcessTrace, Trace

_SORT_STRIDE = 10_000_000  # above any track's sort index (slices.process_tracks)


def _session(p: ProcessTrace) -> str:
    """What a later trace of a pid is: a recording session, or another process."""
    n = p.metadata.get(fmt.META_SESSION)
    return f"session {n + 1}" if isinstance(n, int) and n > 0 else "pid reused"


def write_chrome_trace(trace: Trace, out: IO[str]) -> int:
    """Write the trace; return the number of trace events written."""
    procs = trace.processes
    firsts = [int(p.events.time_ns.min()) for p in procs if len(p.events)]
    firsts += [int(p.api_calls.start_ns.min()) for p in procs if len(p.api_calls)]
    firsts += [int(p.gpu.start_ns.min()) for p in procs if len(p.gpu)]
    t0 = min(firsts, default=0)
    n = 0
    out.write('{"displayTimeUnit": "ns", "otherData": ')
    out.write(json.dumps({"source": "rlscope", "directory": str(trace.directory),
                          "origin_monotonic_ns": t0}))
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
    flow_ids = iter(range(1, 1 << 62))
    for p in procs:
        pid = p.pid
        traces, tid0 = seen.get(pid, (0, 0))
        if not traces:
            emit({"ph": "M", "name": "process_name", "pid": pid,
                  "args": {"name": f"{display_name(p.header.argv, p.metadata)} ({pid})"}})
        tracks = list(process_tracks(p))
        seen[pid] = (traces + 1, tid0 + len(tracks))
        later = f" [{_session(p)}]" if traces else ""
        track_tids: dict[str, int] = {}
        for tid, tr in enumerate(tracks, start=tid0 + 1):
            track_tids[tr.key] = tid
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
        for obj in _launch_flows(p, track_tids, t0, flow_ids):
            emit(obj)
        for obj in _gpu_busy_counters(p, t0):
            emit(obj)
    for obj in _sample_counters(trace, t0):
        emit(obj)
    out.write("\n]}\n")
    return n


def _us(ns: np.ndarray, t0: int) -> list[float]:
    """Trace-event times (µs from t0), rounded like the slices' so flows bind to them."""
    return [round(x, 3) for x in ((ns - t0) / 1e3).tolist()]


def _launch_flows(p: ProcessTrace, track_tids: dict[str, int], t0: int,
                  ids: Iterator[int]) -> Iterator[dict[str, Any]]:
    """An arrow from each CUDA API call to every kernel/copy it launched (by correlation
    id; a graph launch gets one per kernel of the graph): a flow start inside the call's
    slice and a flow end at the start of the GPU slice."""
    api, g = p.api_calls, p.gpu
    if not len(api) or not len(g):
        return
    order = np.argsort(api.correlation_id, kind="stable")
    corr = api.correlation_id[order]
    i = np.searchsorted(corr, g.correlation_id)
    found = (i < len(corr)) & (corr[np.minimum(i, len(corr) - 1)] == g.correlation_id)
    rows = np.flatnonzero(found & (g.correlation_id > 0))
    calls = order[i[rows]]
    a_ts, g_ts = _us(api.start_ns[calls], t0), _us(g.start_ns[rows], t0)
    for k, (c, r) in enumerate(zip(calls.tolist(), rows.tolist(), strict=True)):
        a_tid = track_tids.get(f"api.{int(api.tid[c])}")
        g_tid = track_tids.get(f"gpu.{int(g.device[r])}.{int(g.stream[r])}")
        if a_tid is None or g_tid is None:
            continue
        fid = next(ids)
        yield {"ph": "s", "id": fid, "pid": p.pid, "tid": a_tid, "ts": a_ts[k],
               "name": "launch", "cat": "launch"}
        yield {"ph": "f", "bp": "e", "id": fid, "pid": p.pid, "tid": g_tid, "ts": g_ts[k],
               "name": "launch", "cat": "launch"}


def _gpu_busy_counters(p: ProcessTrace, t0: int) -> Iterator[dict[str, Any]]:
    """rlscope's GPU busy % per 0.1 s (kernels and copies CUPTI recorded), per device,
    on the process: the counterpart of NVML's utilisation counter."""
    from rlscope.analysis import utilisation as U
    from rlscope.analysis.timebins import BIN_NS

    g = p.gpu
    if not len(g):
        return
    lo = int(min(g.start_ns.min(), p.events.time_ns.min() if len(p.events) else g.start_ns.min()))
    truth = U.gpu_truth(g, (lo, int(g.end_ns.max())), np.zeros(0, np.int64),
                        np.zeros(0, np.int32))
    devices = sorted(truth.bins)
    n = len(truth.bins[devices[0]])
    ts = _us(lo + (np.arange(n) + 0.5) * BIN_NS, t0)
    values = {d: (100 * truth.bins[d] / BIN_NS).round(6).tolist() for d in devices}
    for k in range(n):
        yield {"ph": "C", "pid": p.pid, "name": U.GPU_BUSY, "ts": ts[k],
               "args": {f"GPU {d}": values[d][k] for d in devices}}


_CORES_PID = 1_000_000_000  # above any real pid (pid_max <= 2^22)
_GPU_PID = _CORES_PID + 1


def _sample_counters(trace: Trace, t0: int) -> Iterator[dict[str, Any]]:
    """Counter tracks of rls-prof's samples: each process's CPU % and RSS on the
    process, the cores' CPU % on a "CPU cores" track, each GPU's NVML utilisation,
    memory used and SM clock on a "GPU n (NVML)" track."""
    from rlscope.analysis import utilisation as U
    from rlscope.trace.samples import rates

    s = trace.samples
    if s is None:
        return
    k, _, b, pct = rates(s.proc_time_ns, s.proc_pid, s.proc_cpu_ns)
    for pid, t, v in zip(k.tolist(), _us(b, t0), pct.round(2).tolist(), strict=True):
        yield {"ph": "C", "pid": pid, "name": U.PROC_CPU, "ts": t, "args": {"CPU %": v}}
    for pid, t, v in zip(s.proc_pid.tolist(), _us(s.proc_time_ns, t0),
                         (s.proc_rss_bytes / 2**20).round(2).tolist(), strict=True):
        yield {"ph": "C", "pid": pid, "name": U.PROC_RSS, "ts": t, "args": {"RSS MiB": v}}
    k, _, b, pct = rates(s.core_time_ns, s.core_index.astype(np.int64), s.core_busy_ns)
    if len(k):
        yield {"ph": "M", "name": "process_name", "pid": _CORES_PID,
               "args": {"name": "CPU cores (sampled)"}}
        by_time: dict[float, dict[str, float]] = {}
        for core, t, v in zip(k.tolist(), _us(b, t0), pct.round(2).tolist(), strict=True):
            by_time.setdefault(t, {})[f"core {core}"] = v
        for t, args in sorted(by_time.items()):
            yield {"ph": "C", "pid": _CORES_PID, "name": U.CORE_CPU, "ts": t, "args": args}
    for d in sorted(set(s.gpu_index.tolist())):
        pid = _GPU_PID + d
        yield {"ph": "M", "name": "process_name", "pid": pid,
               "args": {"name": f"GPU {d} (NVML)"}}
        sel = s.gpu_index == d
        ts = _us(s.gpu_time_ns[sel], t0)
        for name, col, unit in ((U.GPU_UTIL, s.gpu_util_pct, "util %"),
                                (U.GPU_MEM, s.gpu_memory_used_bytes / 2**20, "MiB"),
                                (U.GPU_SM, s.gpu_sm_clock_mhz, "MHz")):
            for t, v in zip(ts, np.asarray(col[sel], np.float64).tolist(), strict=True):
                yield {"ph": "C", "pid": pid, "name": name, "ts": t, "args": {unit: v}}
