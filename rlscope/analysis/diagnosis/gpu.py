"""GPU findings: a GPU that NVML reads busy while its kernels and copies (and, where the
device offers NVML GPM metrics, its SMs) barely work (docs/analysis.md, "Diagnosis")."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from rlscope.analysis.engine.paths import STARTUP

BUSY_SAMPLED = 50.0  # NVML reads the GPU busy in at least this % of samples...
OVERSTATED = 2.0  # ...at least this many times the share of time in kernels and copies
MIN_GPU_SAMPLES = 5  # fewer samples say nothing


@dataclass
class GpuFinding:
    """A process's GPU as sampled utilisation shows it (NVML, what nvidia-smi prints)
    against the time its kernels and copies took (CUPTI): the RL-Scope contrast."""

    pid: int
    process: str
    devices: str  # "0" or "0,1"
    samples: int
    sampled_busy_pct: float  # share of NVML samples with utilisation > 0
    sampled_util_pct: float  # mean NVML utilisation
    gpu_pct: float  # kernels and copies, % of the process's wall time x devices
    gpu_s: float
    sharing: int = 0  # other processes of the run with GPU work on these devices
    # NVML GPM metrics (Hopper and later; None without): mean share of time the SMs were
    # active and their occupancy over the GPM samples of the same phases.
    gpm_samples: int = 0
    sm_active_pct: float | None = None
    sm_occupancy_pct: float | None = None

    @property
    def overstated_x(self) -> float:
        return self.sampled_busy_pct / self.gpu_pct if self.gpu_pct > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "overstated_x": self.overstated_x}


def gpu_findings(util: pd.DataFrame) -> list[GpuFinding]:
    """Processes whose GPU NVML reads busy (BUSY_SAMPLED) far more (OVERSTATED) than
    their kernels and copies occupy it. ``util``: Analysis.utilisation(). Where the
    device has GPM metrics, the finding carries the SMs' activity and occupancy too."""
    out: list[GpuFinding] = []
    if not len(util):
        return out
    # The start-up (imports, before the first operation) would dilute the run it precedes.
    sampled = util[(util["gpu_samples"] > 0) & util["rlscope_gpu_s"].notna()
                   & (util["phase"] != STARTUP)]
    users = util[util["rlscope_gpu_s"].fillna(0) > 0]
    on = {int(p): set(str(d).split(",")) for p, d in zip(users["pid"], users["gpu_devices"],
                                                        strict=True)}
    for (pid, _session, process), g in sampled.groupby(["pid", "session", "process"],
                                                        sort=False, dropna=False):
        n = int(g["gpu_samples"].sum())
        devices = str(g["gpu_devices"].iloc[0])
        wall = float(g["wall_s"].sum()) * max(len(devices.split(",")), 1)
        if n < MIN_GPU_SAMPLES or wall <= 0:
            continue
        busy = float((g["sampled_gpu_busy_pct"] * g["gpu_samples"]).sum() / n)
        mean = float((g["sampled_gpu_util_pct"] * g["gpu_samples"]).sum() / n)
        gpu_s = float(g["rlscope_gpu_s"].sum())
        sharing = sum(1 for p, d in on.items() if p != pid and d & set(devices.split(",")))
        f = GpuFinding(int(pid), str(process), devices, n, busy, mean, 100 * gpu_s / wall,
                       gpu_s, sharing)
        if "gpm_samples" in g:
            k = g["gpm_samples"].fillna(0)
            if (nk := int(k.sum())) > 0:
                f.gpm_samples = nk
                f.sm_active_pct = float((g["sampled_sm_active_pct"].fillna(0) * k).sum() / nk)
                f.sm_occupancy_pct = float(
                    (g["sampled_sm_occupancy_pct"].fillna(0) * k).sum() / nk)
        if busy >= BUSY_SAMPLED and f.overstated_x >= OVERSTATED:
            out.append(f)
    return out
