"""Counter tracks of a timeline beside a process's timesteps (``slices.counter_tracks``):
rlscope's GPU busy time per device (the kernels and copies CUPTI recorded, in 0.1 s
bins) and rls-prof's utilisation samples (each process's CPU % and RSS, the cores' CPU %,
each GPU's NVML utilisation, memory used and SM clock), so sampled and measured
utilisation can be read against each other (docs/cuda.md#sampled-utilisation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlscope.analysis.engine.timebins import BIN_NS
from rlscope.analysis.processes import utilisation as U
from rlscope.analysis.timeline.slices import CounterTrack, Window, window_samples
from rlscope.trace.data import ProcessTrace
from rlscope.trace.samples import Samples, rates

CORES_PID = 1_000_000_000  # pseudo pids of the run-wide groups: above any real pid
GPU_PID = CORES_PID + 1  # + device index


@dataclass
class CounterGroup:
    """Run-wide counters shown as a process of their own (the cores, an NVML device)."""

    name: str
    pid: int
    tracks: list[CounterTrack]


def _track(key: str, name: str, sort: int, t: np.ndarray, v: np.ndarray, unit: str,
           window: Window) -> list[CounterTrack]:
    t, v = window_samples(np.asarray(t, np.int64), np.asarray(v), window)
    return [CounterTrack(key, name, sort, t, v, unit)] if len(t) else []


def gpu_busy_tracks(p: ProcessTrace, window: Window) -> list[CounterTrack]:
    """The process's GPU busy % per 0.1 s and device: the counterpart of NVML's
    utilisation counter."""
    g = p.gpu
    if not len(g):
        return []
    lo = int(g.start_ns.min())
    if len(p.events):
        lo = min(lo, int(p.events.time_ns.min()))
    truth = U.gpu_truth(g, (lo, int(g.end_ns.max())), np.zeros(0, np.int64),
                        np.zeros(0, np.int32))
    out = []
    for d in sorted(truth.bins):
        bins = truth.bins[d]
        t = lo + np.arange(len(bins), dtype=np.int64) * BIN_NS  # each bin from its start
        name = U.GPU_BUSY if len(truth.bins) == 1 else f"{U.GPU_BUSY} GPU {d}"
        out += _track(f"gpu_busy.{d}", name, 10 + d, t, (100 * bins / BIN_NS).round(6),
                      "%", window)
    return out


def sample_tracks(samples: Samples | None, window: Window
                  ) -> tuple[dict[int, list[CounterTrack]], list[CounterGroup]]:
    """(per pid: its sampled CPU % and RSS; the run-wide groups: cores, GPUs)."""
    per_pid: dict[int, list[CounterTrack]] = {}
    groups: list[CounterGroup] = []
    if samples is None:
        return per_pid, groups
    s = samples
    k, a, _, pct = rates(s.proc_time_ns, s.proc_pid, s.proc_cpu_ns)
    for pid in np.unique(k).tolist():  # a rate holds from its interval's start
        sel = k == pid
        per_pid.setdefault(pid, []).extend(
            _track("cpu", U.PROC_CPU, 20, a[sel], pct[sel].round(2), "%", window))
    for pid in np.unique(s.proc_pid).tolist():
        sel = s.proc_pid == pid
        per_pid.setdefault(pid, []).extend(
            _track("rss", U.PROC_RSS, 21, s.proc_time_ns[sel],
                   (s.proc_rss_bytes[sel] / 2**20).round(2), "MiB", window))
    k, a, _, pct = rates(s.core_time_ns, s.core_index.astype(np.int64), s.core_busy_ns)
    cores = []
    for core in np.unique(k).tolist():
        sel = k == core
        cores += _track(f"core.{core}", f"{U.CORE_CPU} core {core}", core, a[sel],
                        pct[sel].round(2), "%", window)
    if cores:
        groups.append(CounterGroup("CPU cores (sampled)", CORES_PID, cores))
    for d in np.unique(s.gpu_index).tolist():
        sel = s.gpu_index == d
        t = s.gpu_time_ns[sel]
        tracks = [*_track("util", U.GPU_UTIL, 0, t, s.gpu_util_pct[sel].astype(np.int64),
                          "%", window),
                  *_track("mem", U.GPU_MEM, 1, t,
                          (s.gpu_memory_used_bytes[sel] / 2**20).round(2), "MiB", window),
                  *_track("sm", U.GPU_SM, 2, t, s.gpu_sm_clock_mhz[sel].astype(np.int64),
                          "MHz", window)]
        if tracks:
            groups.append(CounterGroup(f"GPU {d} (NVML)", GPU_PID + int(d), tracks))
    return per_pid, groups
