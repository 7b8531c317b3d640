"""Sampled utilisation next to what rlscope measured (docs/analysis.md#utilisation).

Per process and phase: the GPU busy as NVML reports it (share of samples with
utilisation > 0, mean utilisation) next to the GPU time spent in kernels and copies
that CUPTI recorded; the process's CPU utilisation as /proc reports it next to the time
its threads spent in rlscope's CPU categories. The two disagree by design: NVML counts the
time in which any kernel ran, device-wide and at its own granularity, so kernels spread
through a CPU-bound loop read busier than the time in them (PPO on an H100: busy in 99%
of samples, 4% mean utilisation, 1.8% in kernels; docs/cuda.md); an uninstrumented
blocking call looks like Python time to rlscope but is idle to /proc.

Where the GPU offers NVML's GPM metrics (Hopper and later), the third view: the share
of time its SMs were active and their occupancy (sampled_sm_active_pct,
sampled_sm_occupancy_pct), which, unlike NVML's utilisation, falls with the share of the
GPU that kernels leave idle; empty (NaN) without GPM.

A sample's value describes the interval since the series' previous sample; it is
assigned to the phase that holds the middle of that interval. The main thread's
start-up (recording start to its first event) is a row of its own, "(start-up)": its
imports would otherwise dilute the no-phase row ("-") of the run they precede (PPO on an
H100: NVML busy in 93% of the training samples, 43% with the 12 s of imports counted).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from rlscope.analysis.engine.paths import STARTUP
from rlscope.analysis.engine.timebins import BIN_NS, TimeBins
from rlscope.analysis.intervals import covered_before, union
from rlscope.trace.gpu import GpuActivities
from rlscope.trace.samples import Samples, rates

STARTUP_PHASE = -2  # the phase id of the main thread's start-up in these rows


def phase_spans(span: tuple[int, int], times: np.ndarray, ids: np.ndarray,
                startup_ns: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, phase id) of the main thread's phases over the process span (phase 0:
    none; STARTUP_PHASE: the first ``startup_ns``, before any event, so before any
    phase); empty spans dropped."""
    lo, hi = span
    t = np.clip(np.asarray(times, np.int64), lo, hi)
    ids = np.asarray(ids, np.int64)
    first = 0
    if startup_ns > 0:
        t, ids, first = np.r_[min(lo + startup_ns, hi), t], np.r_[0, ids], STARTUP_PHASE
    starts = np.r_[lo, t].astype(np.int64)
    ends = np.r_[t, hi].astype(np.int64)
    ph = np.r_[first, ids].astype(np.int64)
    keep = ends > starts
    return starts[keep], ends[keep], ph[keep]


def _phase_of(starts: np.ndarray, ends: np.ndarray, ph: np.ndarray,
              t: np.ndarray) -> np.ndarray:
    """Phase id holding each time (-1 outside the spans)."""
    i = np.searchsorted(starts, t, side="right") - 1
    ok = (i >= 0) & (t < ends[np.maximum(i, 0)]) if len(starts) else np.zeros(len(t), bool)
    return np.where(ok, ph[np.maximum(i, 0)] if len(ph) else 0, -1)


@dataclass
class GpuTruth:
    """What CUPTI recorded for one process, reduced to what the contrast needs (the
    activity table itself is not kept): per device, the GPU time in kernels/copies in
    each phase and on the timebins grid from the process's start."""

    devices: list[int]
    by_phase: dict[tuple[int, int], float] = field(default_factory=dict)  # (phase, dev)
    bins: dict[int, np.ndarray] = field(default_factory=dict)  # device -> ns per bin


def gpu_truth(gpu: GpuActivities, span: tuple[int, int], phase_times: np.ndarray,
              phase_ids: np.ndarray, startup_ns: int = 0) -> GpuTruth:
    devices = sorted(set(gpu.device.tolist()))
    out = GpuTruth(devices)
    starts, ends, ph = phase_spans(span, phase_times, phase_ids, startup_ns)
    for d in devices:
        sel = gpu.device == d
        s, e = union(gpu.start_ns[sel], gpu.end_ns[sel])
        per = covered_before(s, e, ends) - covered_before(s, e, starts)
        for p in np.unique(ph).tolist():
            out.by_phase[(int(p), d)] = float(per[ph == p].sum())
        bins = TimeBins(span[0], span[1])
        bins.add(s, e - s)
        out.bins[d] = bins.ns
    return out


_COLUMNS = ["pid", "process", "phase", "wall_s", "cpu_samples", "sampled_cpu_pct",
            "sampled_cpu_s", "runq_wait_s", "rlscope_cpu_s", "rlscope_cpu_pct", "gpu_devices",
            "gpu_samples", "sampled_gpu_busy_pct", "sampled_gpu_util_pct", "gpm_samples",
            "sampled_sm_active_pct", "sampled_sm_occupancy_pct", "rlscope_gpu_s",
            "rlscope_gpu_pct", "session"]


def _device_samples(times: np.ndarray, index: np.ndarray, devices: list[int],
                    interval_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """(selection of the rows on ``devices``, middle of the interval each describes: since
    its device's previous row; for a device's first, as long as the gap to its second
    (GPM rows come every few ticks), or ``interval_ns`` when it is alone)."""
    sel = np.isin(index, devices)
    t, dev = times[sel], index[sel]
    prev = np.empty_like(t)
    for d in devices:
        k = np.flatnonzero(dev == d)
        if len(k):
            first = t[k[1]] - t[k[0]] if len(k) > 1 else interval_ns
            prev[k] = np.r_[t[k[0]] - first, t[k[:-1]]]
    return sel, (prev + t) // 2


def contrast(pid: int, process: str, span: tuple[int, int], phase_times: np.ndarray,
             phase_ids: np.ndarray, phase_names: list[str], rlscope_cpu_s: dict[str, float],
             truth: GpuTruth | None, samples: Samples | None, startup_ns: int = 0
             ) -> list[dict[str, object]]:
    """Rows of :meth:`Analysis.utilisation` for one process (see the module docstring);
    ``rlscope_cpu_s`` by phase name, the start-up's under "(start-up)"; ``truth`` made
    with the same ``startup_ns``."""
    starts, ends, ph = phase_spans(span, phase_times, phase_ids, startup_ns)
    ids = sorted(set(ph.tolist()), key=lambda p: (p == 0, p))
    wall = {p: float((ends - starts)[ph == p].sum()) for p in ids}
    cpu_ph = cpu_pct = cpu_dt = None
    rq_ph = rq_ns = None
    if samples is not None and len(samples.proc_time_ns):
        mine = samples.proc_pid == pid
        _, a, b, pct = rates(samples.proc_time_ns[mine], samples.proc_pid[mine],
                             samples.proc_cpu_ns[mine])
        cpu_ph, cpu_pct, cpu_dt = _phase_of(starts, ends, ph, (a + b) // 2), pct, b - a
        rq = samples.proc_runq_ns[mine] if len(samples.proc_runq_ns) == len(mine) else None
        if rq is not None and len(rq) and (rq >= 0).all():
            _, a, b, pct = rates(samples.proc_time_ns[mine], samples.proc_pid[mine], rq)
            rq_ph, rq_ns = _phase_of(starts, ends, ph, (a + b) // 2), pct / 100 * (b - a)
    devices = truth.devices if truth is not None else []
    g_ph = g_util = None
    if samples is not None and devices and len(samples.gpu_time_ns):
        sel, mid = _device_samples(samples.gpu_time_ns, samples.gpu_index, devices,
                                   samples.interval_ns)
        g_ph, g_util = _phase_of(starts, ends, ph, mid), samples.gpu_util_pct[sel]
    m_ph = m_sm = m_occ = None
    if samples is not None and devices and len(samples.gpm_time_ns):
        sel, mid = _device_samples(samples.gpm_time_ns, samples.gpm_index, devices,
                                   samples.interval_ns)
        m_ph, m_sm = _phase_of(starts, ends, ph, mid), samples.gpm_sm_active_pct[sel]
        m_occ = samples.gpm_sm_occupancy_pct[sel]
    rows: list[dict[str, object]] = []
    for p in ids:
        name = STARTUP if p == STARTUP_PHASE else phase_names[p]
        w = wall[p]
        row: dict[str, object] = {"pid": pid, "process": process, "phase": name,
                                  "wall_s": w / 1e9}
        if cpu_ph is not None and cpu_pct is not None and cpu_dt is not None:
            m = cpu_ph == p
            row.update(cpu_samples=int(m.sum()),
                       sampled_cpu_pct=float(cpu_pct[m].mean()) if m.any() else np.nan,
                       sampled_cpu_s=float((cpu_pct[m] / 100 * cpu_dt[m]).sum() / 1e9))
        else:
            row.update(cpu_samples=0, sampled_cpu_pct=np.nan, sampled_cpu_s=np.nan)
        # Runnable without a core (the run queue): what oversubscription costs it.
        row["runq_wait_s"] = (float(rq_ns[rq_ph == p].sum() / 1e9)
                              if rq_ph is not None and rq_ns is not None else np.nan)
        rc = rlscope_cpu_s.get(name, 0.0)
        row.update(rlscope_cpu_s=rc, rlscope_cpu_pct=100 * rc * 1e9 / w if w else np.nan,
                   gpu_devices=",".join(map(str, devices)))
        if truth is not None and devices:
            true_ns = sum(truth.by_phase.get((p, d), 0.0) for d in devices)
            row.update(rlscope_gpu_s=true_ns / 1e9,
                       rlscope_gpu_pct=100 * true_ns / (w * len(devices)) if w else np.nan)
        else:
            row.update(rlscope_gpu_s=np.nan, rlscope_gpu_pct=np.nan)
        if g_ph is not None and g_util is not None:
            m = g_ph == p
            n = int(m.sum())
            row.update(gpu_samples=n,
                       sampled_gpu_busy_pct=100 * float((g_util[m] > 0).mean()) if n else np.nan,
                       sampled_gpu_util_pct=float(g_util[m].mean()) if n else np.nan)
        else:
            row.update(gpu_samples=0, sampled_gpu_busy_pct=np.nan, sampled_gpu_util_pct=np.nan)
        n = int((m_ph == p).sum()) if m_ph is not None else 0
        if n and m_ph is not None and m_sm is not None and m_occ is not None:
            m = m_ph == p
            row.update(gpm_samples=n, sampled_sm_active_pct=float(m_sm[m].mean()),
                       sampled_sm_occupancy_pct=float(m_occ[m].mean()))
        else:
            row.update(gpm_samples=0, sampled_sm_active_pct=np.nan,
                       sampled_sm_occupancy_pct=np.nan)
        rows.append(row)
    return rows


def outside_cpu_s(samples: Samples | None) -> float | None:
    """CPU time the machine's cores spent on processes outside the run while it was
    sampled: the cores' busy time minus the run's processes' CPU time (None: no core or
    process samples)."""
    if samples is None or not len(samples.core_time_ns) or not len(samples.proc_time_ns):
        return None
    busy = 0.0
    for c in np.unique(samples.core_index).tolist():
        b = samples.core_busy_ns[samples.core_index == c]
        busy += float(b.max() - b.min())
    own = 0.0
    for p in np.unique(samples.proc_pid).tolist():
        c = samples.proc_cpu_ns[samples.proc_pid == p]
        own += float(c.max() - c.min())
    return max(busy - own, 0.0) / 1e9


def contrast_frame(rows: list[dict[str, object]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=_COLUMNS)


_SERIES_COLUMNS = ["time_s", "series", "pid", "key", "value"]
# Series names of :func:`over_time`.
PROC_CPU = "CPU % (sampled)"
RLSCOPE_CPU = "CPU % (rlscope categories)"
PROC_RSS = "RSS MiB (sampled)"
CORE_CPU = "core CPU % (sampled)"
GPU_UTIL = "GPU utilisation % (NVML)"
GPU_BUSY = "GPU busy % (rlscope kernels/copies)"
GPU_MEM = "GPU memory used MiB (NVML)"
GPU_SM = "SM clock MHz (NVML)"


def over_time(t0: int, samples: Samples | None,
              processes: list[tuple[int, int, int, np.ndarray, GpuTruth | None]]
              ) -> pd.DataFrame:
    """Every series in one long table: time_s from ``t0``; series; pid (the process, -1
    for cores and NVML's device-wide readings); key (pid, core or device); value.
    ``processes``: (pid, span start, span end, cpu_bins, GpuTruth) of each. A sample's
    time is the end of the interval it describes; a bin's, its middle. A process's last
    bin is a share of the part of it the process lived (not of a whole bin)."""
    parts: list[pd.DataFrame] = []

    def add(t: np.ndarray, series: str, pid: np.ndarray | int, key: np.ndarray | int,
            value: np.ndarray) -> None:
        if len(t):
            parts.append(pd.DataFrame({"time_s": (np.asarray(t) - t0) / 1e9,
                                       "series": series,
                                       "pid": np.broadcast_to(pid, len(t)).astype(np.int64),
                                       "key": np.broadcast_to(key, len(t)).astype(np.int64),
                                       "value": np.asarray(value, np.float64)}))

    if samples is not None:
        k, _, b, pct = rates(samples.proc_time_ns, samples.proc_pid, samples.proc_cpu_ns)
        add(b, PROC_CPU, k, k, pct)
        add(samples.proc_time_ns, PROC_RSS, samples.proc_pid, samples.proc_pid,
            samples.proc_rss_bytes / 2**20)
        k, _, b, pct = rates(samples.core_time_ns, samples.core_index.astype(np.int64),
                             samples.core_busy_ns)
        add(b, CORE_CPU, -1, k, pct)
        g = samples
        add(g.gpu_time_ns, GPU_UTIL, -1, g.gpu_index, g.gpu_util_pct)
        add(g.gpu_time_ns, GPU_MEM, -1, g.gpu_index, g.gpu_memory_used_bytes / 2**20)
        add(g.gpu_time_ns, GPU_SM, -1, g.gpu_index, g.gpu_sm_clock_mhz)
    def widths(n: int, start: int, end: int) -> np.ndarray:
        lo = np.arange(n, dtype=np.int64) * BIN_NS
        return np.clip(end - start - lo, 1, BIN_NS).astype(np.float64)

    for pid, start, end, cpu_bins, truth in processes:
        centres = start + (np.arange(len(cpu_bins)) + 0.5) * BIN_NS
        add(centres, RLSCOPE_CPU, pid, pid,
            100 * cpu_bins / widths(len(cpu_bins), start, end))
        if truth is not None:
            for d, ns in truth.bins.items():
                add(start + (np.arange(len(ns)) + 0.5) * BIN_NS, GPU_BUSY, pid, d,
                    100 * ns / widths(len(ns), start, end))
    if not parts:
        return pd.DataFrame(columns=_SERIES_COLUMNS)
    return pd.concat(parts, ignore_index=True)
