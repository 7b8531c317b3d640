"""RL-Scope-style figures: time per operation and transitions per iteration.

One row per operation path, labelled with the full path ("backprop > forward"), in the
order of the report's table (``Analysis.operations()``: start-up first, then by time,
unannotated last). Colour = what the thread or GPU was doing (the table's category
columns), from the Okabe–Ito palette so colour-blind readers can tell them apart; hatching
= the GPU was busy at the same time (region CPU + GPU). Consumes only the data API.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from rlscope.analysis import Analysis
from rlscope.analysis.engine.paths import PATH_SEP, STARTUP, UNANNOTATED
from rlscope.errors import RLScopeError
from rlscope.reporters import processes
from rlscope.reporters.table import per_progress_unit

# Okabe & Ito's colour-blind safe palette, one colour per category in every figure.
CATEGORY_COLOURS = {
    "Python": "#0072B2",  # blue
    "Backend": "#E69F00",  # orange
    "Simulator": "#009E73",  # bluish green
    "CUDA API": "#CC79A7",  # reddish purple
    "Waiting": "#CCCCCC",  # grey: off the CPU
    "GPU kernel": "#D55E00",  # vermillion
    "GPU memcpy": "#F0E442",  # yellow
    "GPU memset": "#56B4E9",  # sky blue
}
RUN_COLOURS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9",
               "#F0E442", "#000000"]  # compare: one per run
CPU_GPU_HATCH = "////"
# (region, category) -> (label, colour, hatch), in stacking order (left first).
SEGMENTS: list[tuple[str, str, str, str, str]] = [
    *[("CPU only", c, f"CPU only: {c}" if c != "Waiting" else "Waiting (off CPU)",
       CATEGORY_COLOURS[c], "")
      for c in ("Python", "Backend", "Simulator", "CUDA API", "Waiting")],
    *[("CPU + GPU", c, f"CPU+GPU: {c}", CATEGORY_COLOURS[c], CPU_GPU_HATCH)
      for c in ("Python", "Backend", "Simulator", "CUDA API")],
    *[("GPU only", c, f"GPU only: {c[4:]}", CATEGORY_COLOURS[c], "")
      for c in ("GPU kernel", "GPU memcpy", "GPU memset")],
]
_MAX_ROWS = 30  # beyond this, rows under _MIN_SHARE of the time are grouped as "other"
_MIN_SHARE = 0.002
_LABEL_WIDTH = 46


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed); without matplotlib, an
    RLScopeError naming the extra that installs it."""
    try:
        import matplotlib
    except ImportError:
        raise RLScopeError("figures need matplotlib, which this install lacks: pip install "
                           "'rlscope[plot]' (or pip install matplotlib)") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9,
                         "legend.fontsize": 8, "axes.spines.top": False,
                         "axes.spines.right": False, "svg.fonttype": "none",
                         "hatch.linewidth": 0.8, "figure.dpi": 100})
    return plt


def row_labels(paths: Sequence[str], width: int = _LABEL_WIDTH) -> list[str]:
    """Full operation paths; one too long keeps its first and last parts
    ("train > … > forward"), unless that would make two labels alike."""
    def short(p: str) -> str:
        if len(p) <= width:
            return p
        parts = p.split(PATH_SEP)
        cand = f"{parts[0]}{PATH_SEP}…{PATH_SEP}{parts[-1]}" if len(parts) > 2 else p
        return cand if len(cand) <= width else "…" + p[-(width - 1):]

    out = [short(p) for p in paths]
    seen: dict[str, int] = {}
    for s in out:
        seen[s] = seen.get(s, 0) + 1
    return [s if seen[s] == 1 else p for s, p in zip(out, paths, strict=True)]


def row_order(a: Analysis, pid: int, session: int = 0) -> list[str]:
    """Operation paths of a process in the report table's order, once each (the table
    repeats an operation per phase), unannotated last."""
    ops = a.operations()
    mine = (ops["pid"] == pid) & (ops["session"] == session)
    order = list(dict.fromkeys(ops.loc[mine, "operation"]))
    if UNANNOTATED in order:
        order.remove(UNANNOTATED)
        order.append(UNANNOTATED)
    return order


def operation_segments(a: Analysis, pid: int, session: int = 0) -> pd.DataFrame:
    """Self seconds per operation (rows, in the table's order) and segment label
    (columns, stacking order), summed over phases and threads."""
    df = a.breakdown(by=("pid", "session", "operation", "region", "category"))
    df = df[(df["pid"] == pid) & (df["session"] == session)]
    labels = {(r, c): lab for r, c, lab, _, _ in SEGMENTS}
    df = df.assign(segment=[labels.get((r, c), f"{r}: {c}")
                            for r, c in zip(df["region"], df["category"], strict=True)])
    # fillna, not fill_value=: pandas < 2 would round times under 10 ns to 0 (api.py).
    wide = df.pivot_table(index="operation", columns="segment", values="seconds",
                          aggfunc="sum").fillna(0.0)
    wide = wide[[s[2] for s in SEGMENTS if s[2] in wide.columns]]
    wide = wide.reindex(row_order(a, pid, session), fill_value=0.0)
    total = wide.sum(axis=1)
    small = (total < _MIN_SHARE * total.sum()) & ~wide.index.isin([UNANNOTATED, STARTUP])
    if len(wide) > _MAX_ROWS and small.sum() > 1:
        other = wide[small].sum().rename(f"other ({int(small.sum())} operations "
                                         f"< {100 * _MIN_SHARE:g}% each)")
        rest = wide[~small]
        tail = [UNANNOTATED] if UNANNOTATED in rest.index else []
        wide = pd.concat([rest.drop(index=tail), other.to_frame().T, rest.loc[tail]])
    return wide


def wall_seconds(a: Analysis, pid: int, session: int = 0) -> pd.Series:
    """Wall (inclusive) seconds per operation path, summed over phases."""
    ops = a.operations()
    mine = ops[(ops["pid"] == pid) & (ops["session"] == session)]
    return mine.groupby("operation", sort=False)["wall_s"].sum()


def _time_unit(largest_s: float) -> tuple[float, str]:
    if largest_s >= 1:
        return 1.0, "s"
    if largest_s >= 1e-3:
        return 1e3, "ms"
    return 1e6, "µs"


def value_label(v: float) -> str:
    """3 significant digits, never in exponent notation."""
    if v == 0:
        return "0"
    if v < 0.001:
        return "<0.001"
    return f"{v:.3g}" if v < 1000 else f"{v:,.0f}"


def _height(rows: int) -> float:
    return max(2.6, 0.3 * rows + 1.9)


def _label_axis(ax: Any, labels: list[str]) -> None:
    ax.set_yticks(np.arange(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)  # first row on top
    ax.grid(axis="x", linewidth=0.4, alpha=0.5)
    ax.set_axisbelow(True)


def breakdown_figure(a: Analysis, pid: int, title: str, session: int = 0):
    """Left: each row's self time, stacked by category and region, with its wall time
    (nested operations included) as an outline. Right: the same split in percent."""
    plt = pyplot()
    from matplotlib.patches import Patch

    wide = operation_segments(a, pid, session)
    covered = float(a.processes().set_index(["pid", "session"]).loc[(pid, session),
                                                                    "covered_s"])
    wall = wall_seconds(a, pid, session).reindex(wide.index)
    wall = wall.where(wall.notna(), wide.sum(axis=1))
    n = len(wide)
    labels = row_labels([str(i) for i in wide.index])
    fig, axes = plt.subplots(1, 2, figsize=(11.5, _height(n)), sharey=True,
                             gridspec_kw={"width_ratios": [3, 2]}, constrained_layout=True)
    y = np.arange(n)
    scale, unit = _time_unit(float(max(wall.max(), wide.sum(axis=1).max())) if n else 0.0)
    selfs = wide.sum(axis=1).to_numpy() * scale
    walls = wall.to_numpy() * scale
    style = {lab: (col, hatch) for _, _, lab, col, hatch in SEGMENTS}
    for ax, percent in zip(axes, (False, True), strict=True):
        left = np.zeros(n)
        for col in wide.columns:
            vals = wide[col].to_numpy() * scale
            if percent:
                vals = 100 * vals / np.where(selfs > 0, selfs, 1)
            colour, hatch = style.get(col, ("#777777", ""))
            ax.barh(y, vals, 0.7, left=left, color=colour, hatch=hatch,
                    edgecolor="white", linewidth=0 if hatch else 0.4, label=col)
            left += vals
        _label_axis(ax, labels)
    ax0, ax1 = axes
    nested = walls > selfs * 1.0005
    if nested.any():
        ax0.barh(y[nested], walls[nested], 0.7, fill=False, edgecolor="#333333",
                 linewidth=0.8, linestyle="--", zorder=3)
    top = float(max(walls.max(), selfs.max())) if n else 1.0
    for yi, s, w in zip(y, selfs, walls, strict=True):
        share = 100 * s / scale / covered if covered > 0 else 0.0
        wall_text = f", wall {value_label(w)}" if w > s * 1.0005 else ""
        text = f"{value_label(s)} ({share:.1f}%){wall_text}"
        ax0.annotate(text, (max(s, w), yi), va="center", ha="left", fontsize=7,
                     xytext=(3, 0), textcoords="offset points")
    ax0.set_xlim(0, max(top * 1.35, 1e-9))
    ax0.set_xlabel(f"Self time ({unit}): nested operations excluded; "
                   "% of the process's wall time")
    ax0.set_title("Self time per operation" + (" (dashed outline: wall time, nested "
                                                "operations included)" if nested.any()
                                                else ""))
    ax1.set_xlim(0, 100)
    ax1.set_xlabel("Share of the row's self time (%)")
    ax1.set_title("Where the self time went")
    handles, names = ax0.get_legend_handles_labels()
    keep = [(h, lab) for h, lab in zip(handles, names, strict=True) if wide[lab].any()]
    if nested.any():
        keep.append((Patch(fill=False, edgecolor="#333333", linestyle="--"),
                     "wall time (outline)"))
    fig.legend([h for h, _ in keep], [lab for _, lab in keep], loc="outside lower center",
               ncols=min(len(keep), 5), frameon=False)
    fig.suptitle(title, fontsize=10)
    return fig


def transitions_per_iteration(a: Analysis, pid: int, session: int = 0
                              ) -> tuple[pd.DataFrame, str]:
    """Intercepted calls (Python -> Backend / Simulator / CUDA API transitions) per
    iteration for each operation, in the table's order: per timestep (per episode, ...:
    the unit progress is reported in) when progress records exist, else per call of the
    operation. Unannotated time and the start-up are no iteration's: left out."""
    ops = a.operations()
    ops = ops[(ops["pid"] == pid) & (ops["session"] == session)
              & (ops["operation"] != UNANNOTATED)
              & (ops["operation"] != STARTUP)
              & ~ops["operation"].str.startswith(STARTUP + PATH_SEP)]
    g = ops.groupby("operation", sort=False)[["calls", "backend_calls", "simulator_calls",
                                              "cuda_api_calls"]].sum()
    ex = a.extrapolation()
    ex = ex[(ex["pid"] == pid) & (ex["session"] == session)]
    steps = float(ex["timesteps"].iloc[0]) if len(ex) else 0.0
    if steps > 0:
        denom, unit = steps, per_progress_unit(str(ex["unit"].iloc[0]))
    else:
        denom, unit = g["calls"].where(g["calls"] > 0, 1).to_numpy(), "per operation call"
    out = pd.DataFrame({"Backend": g["backend_calls"] / denom,
                        "Simulator": g["simulator_calls"] / denom,
                        "CUDA API": g["cuda_api_calls"] / denom}, index=g.index)
    return out, unit


def has_transitions(a: Analysis, pid: int, session: int = 0) -> bool:
    df, _ = transitions_per_iteration(a, pid, session)
    return bool(len(df) and df.to_numpy().any())


def transitions_figure(a: Analysis, pid: int, title: str, session: int = 0):
    """Rows with any transitions, in the table's order; one bar per kind of call."""
    plt = pyplot()
    df, unit = transitions_per_iteration(a, pid, session)
    df = df[df.to_numpy().any(axis=1)]
    n = len(df)
    fig, ax = plt.subplots(figsize=(8.5, _height(n)), constrained_layout=True)
    y = np.arange(n)
    kinds = [k for k in ("Backend", "Simulator", "CUDA API") if df[k].any()] or ["Backend"]
    h = 0.8 / len(kinds)
    for i, k in enumerate(kinds):
        vals = df[k].to_numpy()
        bars = ax.barh(y + (i - (len(kinds) - 1) / 2) * h, vals, h,
                       color=CATEGORY_COLOURS[k], label=f"→ {k}")
        ax.bar_label(bars, labels=[value_label(v) if v else "" for v in vals], fontsize=7,
                     padding=2)
    _label_axis(ax, row_labels([str(i) for i in df.index]))
    ax.set_xlim(0, max(float(df.to_numpy().max()) * 1.15, 1e-9) if n else 1.0)
    ax.set_xlabel(f"Calls from Python into native code {unit} "
                  "(outermost intercepted calls)")
    fig.legend(loc="outside lower center", ncols=len(kinds), frameon=False)
    ax.set_title(title)
    return fig


def plotted_processes(a: Analysis) -> pd.DataFrame:
    """The processes with something to show: the report's folded idle helpers and
    processes with no recorded time are left out."""
    procs = a.processes()
    folded = processes.folded_indices(a)
    keep = [i not in folded and p["covered_s"] > 0 for i, p in procs.iterrows()]
    return procs[keep]


def figures(a: Analysis) -> Iterator[tuple[str, Any]]:
    """(file stem, figure): the breakdown of every process with something to show, and
    its transitions when it made intercepted calls. The caller saves and closes each
    figure (``pyplot().close(fig)``)."""
    procs = a.processes()
    labels = processes.process_label(a)
    for i, p in plotted_processes(a).iterrows():
        n = int(p["session"])
        # A process's later recording sessions: .<pid>.<session> (docs/rls-analyze.md).
        suffix = "" if len(procs) == 1 else f".{p['pid']}" + (f".{n}" if n else "")
        name = f"{labels.get(int(i), p['process']) if len(procs) > 1 else p['process']}" \
            f", pid {p['pid']}"
        yield f"breakdown{suffix}", breakdown_figure(a, p["pid"], name, n)
        if has_transitions(a, p["pid"], n):
            yield f"transitions{suffix}", transitions_figure(
                a, p["pid"], f"{name}: transitions from Python", n)
