"""The report's utilisation section: sampled utilisation (rls-prof's sampler: /proc,
NVML) next to what rlscope measured, per process and phase. Consumes the data API."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from rlscope.analysis import Analysis
from rlscope.reporters.units import seconds

_CPU = [("sampled_cpu_pct", "CPU% sampled"), ("rlscope_cpu_pct", "CPU% rlscope")]
_GPU = [("sampled_gpu_busy_pct", "GPU busy% NVML"), ("sampled_gpu_util_pct", "GPU util% NVML"),
        ("rlscope_gpu_pct", "GPU% rlscope")]
_GPM = [("sampled_sm_active_pct", "SM active% GPM"), ("sampled_sm_occupancy_pct", "SM occ% GPM")]


def _cell(v: Any) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.1f}"


def lines(a: Analysis) -> list[str]:
    """Text lines (none when the run was not sampled)."""
    s = a.samples
    if s is None:
        return []
    df = a.utilisation()
    # Idle helpers (forkserver, resource tracker, ...) are folded in the report: here too.
    from rlscope.reporters.processes import folded_indices

    procs = a.processes()
    folded = {int(procs.iloc[i]["pid"]) for i in folded_indices(a)}
    df = df[(df["wall_s"] > 0) & ~df["pid"].isin(folded)]
    if not len(df):
        return []
    hz = 1e9 / s.interval_ns if s.interval_ns else float("nan")
    has_gpu = bool(df["gpu_devices"].astype(bool).any() or len(s.gpu_time_ns))
    has_gpm = bool(len(s.gpm_time_ns)) and bool((df["gpm_samples"] > 0).any())
    gpu_cols = _GPU[:2] + _GPM + _GPU[2:] if has_gpm else _GPU
    cols = _CPU + (gpu_cols if has_gpu else [])
    head = ["Process", "Phase", "Wall s", *[h for _, h in cols]]
    body = [[f"{r.process} ({r.pid})", r.phase or "-", seconds(r.wall_s),
             *[_cell(getattr(r, c)) for c, _ in cols]] for r in df.itertuples()]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]

    def row(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    out = ["", f"Utilisation: sampled by rls-prof ({hz:g} Hz) next to rlscope's "
               "measurements, per process and phase",
           "  " + row(head), "  " + "  ".join("-" * w for w in widths)]
    out += ["  " + row(b) for b in body]
    out.append("CPU%: of one core. sampled: the process's CPU time (/proc); rlscope: time "
               "its threads spent in Python/Backend/Simulator/CUDA API (summed over threads).")
    if has_gpu:
        out.append("GPU busy% NVML: share of samples whose utilisation was > 0; GPU util% "
                   "NVML: mean utilisation (device-wide, of the devices the process used); "
                   "GPU% rlscope: time in kernels and copies (CUPTI), of wall x devices. "
                   "NVML counts the time in which any kernel ran, device-wide: kernels "
                   "spread through a CPU-bound loop read busier than the GPU time in them.")
    if has_gpu and has_gpm:
        out.append("SM active% GPM: mean share of time the SMs were active (NVML GPM "
                   "metrics, device-wide); SM occ% GPM: resident warps vs the maximum. "
                   "Unlike NVML's utilisation, they fall when kernels leave SMs idle.")
    if s.gpu_status:
        out.append(f"GPU not sampled: {s.gpu_status}.")
    elif has_gpu and s.gpm_status:
        out.append(f"SM activity not sampled: {s.gpm_status}.")
    return out


def to_dict(a: Analysis) -> dict[str, Any] | None:
    """The JSON section (None when the run was not sampled)."""
    s = a.samples
    if s is None:
        return None
    df: pd.DataFrame = a.utilisation()
    return {"interval_s": s.interval_ns / 1e9, "gpu_status": s.gpu_status,
            "gpm_status": s.gpm_status,
            "gpus": s.gpus, "sampler_cpu_s": s.sampler_cpu_ns / 1e9,
            "rows": json.loads(df.to_json(orient="records"))}


def figure(a: Analysis) -> Any:
    """CPU and GPU over time: sampled (solid) against rlscope's measurements (dashed).
    Top: each process's CPU % (of one core) by /proc and in rlscope's CPU categories;
    bottom (when the run used or sampled a GPU): NVML's utilisation per device and each
    process's GPU time in kernels/copies per 0.1 s. None when the run was not sampled."""
    from rlscope.analysis.engine.timebins import BIN_NS
    from rlscope.analysis.processes import utilisation as U
    from rlscope.reporters.plots import RUN_COLOURS, plotted_processes, pyplot

    if a.samples is None:
        return None
    ts = a.utilisation_over_time()
    gpu = ts[ts["series"].isin([U.GPU_UTIL, U.GPU_BUSY])]
    plt = pyplot()
    rows = 2 if len(gpu) else 1
    fig, axes = plt.subplots(rows, 1, figsize=(9, 2.6 * rows + 1.2), sharex=True,
                             squeeze=False, constrained_layout=True)
    # The processes the other figures show (idle helpers folded), one colour each
    # (Okabe-Ito, as everywhere), the same in both panels.
    shown = plotted_processes(a)
    names = {int(r.pid): f"{r.process} ({r.pid})" for r in shown.itertuples()}
    colour = {pid: RUN_COLOURS[i % len(RUN_COLOURS)] for i, pid in enumerate(sorted(names))}
    ax = axes[0][0]
    # 1 s rolling means: /proc counts CPU time in 10 ms ticks, so a 0.1 s sample reads
    # ±10% of a core around the truth; rlscope's 0.1 s bins are averaged alike.
    window = {U.PROC_CPU: max(1, round(1e9 / a.samples.interval_ns))
              if a.samples.interval_ns else 1, U.RLSCOPE_CPU: round(1e9 / BIN_NS)}
    for pid in sorted(names):
        for series, style in ((U.PROC_CPU, "-"), (U.RLSCOPE_CPU, "--")):
            d = ts[(ts["series"] == series) & (ts["pid"] == pid)]
            if len(d):
                how = "sampled (/proc)" if series == U.PROC_CPU else "rlscope CPU categories"
                v = d["value"].rolling(window[series], center=True, min_periods=1).mean()
                ax.plot(d["time_s"], v, style, color=colour[pid], lw=1,
                        label=f"{names[pid]}: {how}")
    ax.set_ylabel("CPU % of one core (1 s means)")
    ax.set_ylim(bottom=0)  # from zero: a 2% wobble must not look like a collapse
    what = "CPU and GPU" if rows == 2 else "CPU"
    ax.set_title(f"{what} utilisation: sampled (solid) vs measured by rlscope (dashed)")
    if rows == 2:
        ax = axes[1][0]
        for i, d in enumerate(sorted(set(gpu["key"]))):
            c = RUN_COLOURS[(len(names) + i) % len(RUN_COLOURS)]
            u = gpu[(gpu["series"] == U.GPU_UTIL) & (gpu["key"] == d)]
            if len(u):
                ax.plot(u["time_s"], u["value"], "-", color=c, lw=1,
                        label=f"GPU {d}: NVML utilisation")
            b = gpu[(gpu["series"] == U.GPU_BUSY) & (gpu["key"] == d)]
            for pid, g in b.groupby("pid"):
                ax.plot(g["time_s"], g["value"], "--", color=c, lw=1,
                        label=f"GPU {d}: kernels+copies of {names.get(int(pid), pid)}")
        ax.set_ylabel("GPU %")
        ax.set_ylim(0, 105)
    for row in axes:
        row[0].grid(axis="y", linewidth=0.4, alpha=0.5)
        if row[0].get_legend_handles_labels()[0]:  # below the plot: never over a line
            row[0].legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncols=2,
                          fontsize=7, frameon=False)
    axes[-1][0].set_xlabel("time (s) from the first process's start")
    return fig
