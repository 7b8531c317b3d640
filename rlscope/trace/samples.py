"""Utilisation samples of a run (rls-prof's sampler, ``samples.<pid>.rlsamples``), as
columnar numpy arrays. Read by :mod:`rlscope.trace.samples_reader`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Samples:
    """One row per tick and process / core / GPU; times CLOCK_MONOTONIC ns, sorted."""

    interval_ns: int
    # Processes of the run: cumulative CPU ns (user + system) and resident bytes.
    proc_time_ns: np.ndarray
    proc_pid: np.ndarray
    proc_cpu_ns: np.ndarray
    proc_rss_bytes: np.ndarray
    # Cores: cumulative busy ns.
    core_time_ns: np.ndarray
    core_index: np.ndarray
    core_busy_ns: np.ndarray
    # GPUs (NVML): utilisation %, memory utilisation %, memory used, SM clock.
    gpu_time_ns: np.ndarray
    gpu_index: np.ndarray
    gpu_util_pct: np.ndarray
    gpu_memory_util_pct: np.ndarray
    gpu_memory_used_bytes: np.ndarray
    gpu_sm_clock_mhz: np.ndarray
    # GPUs with NVML GPM metrics, over the time since the device's previous row: SMs
    # active, SM occupancy, any context active; % (hundredths stored in the file).
    gpm_time_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    gpm_index: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint32))
    gpm_sm_active_pct: np.ndarray = field(default_factory=lambda: np.zeros(0))
    gpm_sm_occupancy_pct: np.ndarray = field(default_factory=lambda: np.zeros(0))
    gpm_graphics_pct: np.ndarray = field(default_factory=lambda: np.zeros(0))
    gpus: list[dict[str, object]] = field(default_factory=list)  # index, name, uuid, ...
    # Per proc row: cumulative run-queue wait ns (runnable without a core); -1 unknown
    # (schedstats off, or a file written before it was sampled).
    proc_runq_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    gpu_status: str = ""  # why GPUs were not sampled ("" when they were)
    gpm_status: str = ""  # why GPM metrics were not sampled ("" when they were, or no GPU)
    sampler_cpu_ns: int = 0  # the sampler's own CPU time
    ticks: int = 0
    warnings: list[str] = field(default_factory=list)

    @staticmethod
    def empty(interval_ns: int = 0) -> Samples:
        i, u = np.zeros(0, np.int64), np.zeros(0, np.uint32)
        return Samples(interval_ns, i, i, i, i, i, u, i, i, u, u, u, i, u)


def rates(time_ns: np.ndarray, key: np.ndarray, cumulative: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per series (``key``: pid or core), the utilisation between consecutive samples:
    (key, start ns, end ns, percent of one core). A series' first sample opens it."""
    o = np.lexsort((time_ns, key))
    k, t, c = key[o], time_ns[o], cumulative[o].astype(np.float64)
    same = k[1:] == k[:-1]
    dt = (t[1:] - t[:-1]).astype(np.float64)
    ok = same & (dt > 0)
    pct = np.zeros(int(ok.sum()))
    pct[:] = 100.0 * (c[1:] - c[:-1])[ok] / dt[ok]
    return k[1:][ok], t[:-1][ok], t[1:][ok], pct
