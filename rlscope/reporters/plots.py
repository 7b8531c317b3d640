"""RL-Scope-style figures: stacked bars per operation and transitions per iteration.

Colour = where the time went (CPU only, CPU + GPU, GPU only); shade = what the CPU was
doing (Python, Backend, Simulator, CUDA API, Waiting) or what the GPU ran (kernel, memcpy,
memset). Consumes only the data API.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from rlscope.analysis import Analysis
from rlscope.analysis.paths import UNANNOTATED

# (region, category) -> (label, colour, hatch), in stacking order (bottom first).
SEGMENTS: list[tuple[str, str, str, str, str]] = [
    ("CPU only", "Python", "CPU: Python", "#1f4e79", ""),
    ("CPU only", "Backend", "CPU: Backend", "#3a7dbf", ""),
    ("CPU only", "Simulator", "CPU: Simulator", "#86b6e0", ""),
    ("CPU only", "CUDA API", "CPU: CUDA API", "#c6dcf0", "//"),
    # Off the CPU, no GPU work running (a wait under running GPU work is GPU only).
    ("CPU only", "Waiting", "Waiting (off CPU)", "#c8c8c8", ".."),
    ("CPU + GPU", "Python", "CPU+GPU: Python", "#5b2c83", ""),
    ("CPU + GPU", "Backend", "CPU+GPU: Backend", "#8e5cb8", ""),
    ("CPU + GPU", "Simulator", "CPU+GPU: Simulator", "#bb9bd8", ""),
    ("CPU + GPU", "CUDA API", "CPU+GPU: CUDA API", "#e0d0ee", "//"),
    ("GPU only", "GPU kernel", "GPU: kernel", "#2e7d32", ""),
    ("GPU only", "GPU memcpy", "GPU: memcpy", "#66bb6a", ""),
    ("GPU only", "GPU memset", "GPU: memset", "#b9e2ba", ""),
]
_MIN_SHARE = 0.002  # operations below this share of the time are grouped as "other"


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9,
                         "legend.fontsize": 8, "axes.spines.top": False,
                         "axes.spines.right": False, "svg.fonttype": "none",
                         "hatch.linewidth": 0.5, "figure.dpi": 100})
    return plt


def operation_segments(a: Analysis, pid: int, session: int = 0) -> pd.DataFrame:
    """Seconds per operation (rows, largest first, unannotated last) and segment label
    (columns, stacking order), summed over phases and threads; exclusive time."""
    df = a.breakdown(by=("pid", "session", "operation", "region", "category"))
    df = df[(df["pid"] == pid) & (df["session"] == session)]
    labels = {(r, c): lab for r, c, lab, _, _ in SEGMENTS}
    df = df.assign(segment=[labels.get((r, c), f"{r}: {c}")
                            for r, c in zip(df["region"], df["category"], strict=True)])
    # fillna, not fill_value=: pandas < 2 would round times under 10 ns to 0 (api.py).
    wide = df.pivot_table(index="operation", columns="segment", values="seconds",
                          aggfunc="sum").fillna(0.0)
    wide = wide[[s[2] for s in SEGMENTS if s[2] in wide.columns]]
    total = wide.sum(axis=1)
    small = (total < _MIN_SHARE * total.sum()) & (wide.index != UNANNOTATED)
    if small.sum() > 1:
        other = wide[small].sum().rename(f"other ({int(small.sum())} ops)")
        wide = pd.concat([wide[~small], other.to_frame().T])
    order = wide.sum(axis=1).sort_values(ascending=False).index.tolist()
    if UNANNOTATED in order:
        order.remove(UNANNOTATED)
        order.append(UNANNOTATED)
    return wide.loc[order]


def _time_unit(largest_s: float) -> tuple[float, str]:
    if largest_s >= 1:
        return 1.0, "s"
    if largest_s >= 1e-3:
        return 1e3, "ms"
    return 1e6, "µs"


def _short(label: str, width: int = 18) -> str:
    last = label.split(" > ")[-1]
    return last if len(last) <= width else last[: width - 1] + "…"


def breakdown_figure(a: Analysis, pid: int, title: str, session: int = 0):
    plt = pyplot()
    wide = operation_segments(a, pid, session)
    colours = {lab: (col, hatch) for _, _, lab, col, hatch in SEGMENTS}
    n = len(wide)
    fig, axes = plt.subplots(1, 2, figsize=(max(6.5, 1.1 * n + 3.5), 3.6),
                             constrained_layout=True)
    x = np.arange(n)
    scale, unit = _time_unit(float(wide.sum(axis=1).max()) if n else 0.0)
    wide = wide * scale
    totals = wide.sum(axis=1).to_numpy()
    for ax, percent in zip(axes, (False, True), strict=True):
        bottom = np.zeros(n)
        for col in wide.columns:
            vals = wide[col].to_numpy()
            if percent:
                vals = 100 * vals / np.where(totals > 0, totals, 1)
            colour, hatch = colours.get(col, ("#999999", ""))
            ax.bar(x, vals, 0.65, bottom=bottom, color=colour, hatch=hatch,
                   edgecolor="white", linewidth=0.4, label=col)
            bottom += vals
        ax.set_xticks(x, [_short(s) for s in wide.index], rotation=30, ha="right")
        ax.set_ylabel("Share of the operation's time (%)" if percent else f"Time ({unit})")
        ax.set_ylim(0, 100 if percent else max(totals.max() * 1.12, 1e-9))
        ax.grid(axis="y", linewidth=0.4, alpha=0.5)
        ax.set_axisbelow(True)
        if not percent:
            for xi, t in zip(x, totals, strict=True):
                ax.annotate(f"{t:.3g}", (xi, t), ha="center", va="bottom", fontsize=7,
                            xytext=(0, 1), textcoords="offset points")
    axes[0].set_title("Time per operation")
    axes[1].set_title("Breakdown per operation")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles[::-1], labels[::-1], loc="outside right center", frameon=False)
    fig.suptitle(title, fontsize=10)
    return fig


def transitions_per_iteration(a: Analysis, pid: int, session: int = 0
                              ) -> tuple[pd.DataFrame, str]:
    """Intercepted calls (Python -> Backend / Simulator / CUDA API transitions) per
    iteration for each operation: per timestep when progress records exist, else per
    call of the operation."""
    ops = a.operations()
    ops = ops[(ops["pid"] == pid) & (ops["session"] == session)
              & (ops["operation"] != UNANNOTATED)]
    g = ops.groupby("operation", sort=False)[["calls", "backend_calls", "simulator_calls",
                                              "cuda_api_calls"]].sum()
    ex = a.extrapolation()
    ex = ex[(ex["pid"] == pid) & (ex["session"] == session)]
    steps = float(ex["timesteps"].iloc[0]) if len(ex) else 0.0
    if steps > 0:
        denom, unit = steps, "per timestep"
    else:
        denom, unit = g["calls"].where(g["calls"] > 0, 1).to_numpy(), "per operation call"
    out = pd.DataFrame({"Backend": g["backend_calls"] / denom,
                        "Simulator": g["simulator_calls"] / denom,
                        "CUDA API": g["cuda_api_calls"] / denom}, index=g.index)
    return out, unit


def transitions_figure(a: Analysis, pid: int, title: str, session: int = 0):
    plt = pyplot()
    df, unit = transitions_per_iteration(a, pid, session)
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(df) + 2.5), 3.2),
                           constrained_layout=True)
    x = np.arange(len(df))
    kinds = [(k, c) for k, c in (("Backend", "#3a7dbf"), ("Simulator", "#e08a2b"),
                                 ("CUDA API", "#6a6a6a")) if df[k].any()] or [
        ("Backend", "#3a7dbf")]
    w = 0.8 / len(kinds)
    for i, (k, colour) in enumerate(kinds):
        vals = df[k].to_numpy()
        bars = ax.bar(x + (i - (len(kinds) - 1) / 2) * w, vals, w, color=colour, label=k)
        ax.bar_label(bars, labels=[f"{v:.3g}" if v else "" for v in vals], fontsize=7,
                     padding=1)
    ax.set_xticks(x, [_short(s) for s in df.index], rotation=30, ha="right")
    ax.set_ylabel(f"Transitions {unit}")
    ax.grid(axis="y", linewidth=0.4, alpha=0.5)
    ax.set_axisbelow(True)
    ax.legend(frameon=False, title="Python →")
    if not len(df) or not df.to_numpy().any():
        ax.text(0.5, 0.5, "no intercepted native calls recorded", transform=ax.transAxes,
                ha="center", va="center", color="#666666")
    ax.set_title(title)
    return fig


def figures(a: Analysis) -> Iterator[tuple[str, Any]]:
    """(file stem, figure): breakdown and transitions figures for every process. The
    caller saves and closes each figure (``pyplot().close(fig)``)."""
    procs = a.processes()
    names = a.process_tree().set_index("index")["name"]
    for i, p in procs.iterrows():
        n = int(p["session"])
        # A process's later recording sessions: .<pid>.<session> (docs/rls-analyze.md).
        suffix = "" if len(procs) == 1 else f".{p['pid']}" + (f".{n}" if n else "")
        name = f"{names.get(i, p['process'])} (pid {p['pid']})"
        yield f"breakdown{suffix}", breakdown_figure(a, p["pid"], name, n)
        yield f"transitions{suffix}", transitions_figure(a, p["pid"], name, n)
