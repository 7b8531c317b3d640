"""Trends over the whole run (rlscope.analysis.trends): a text/JSON section (key
``trends``) and a figure per process that reported progress."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from rlscope.analysis import trends
from rlscope.reporters.section import Section

KEY = "trends"
ROWS = 10  # text: the run in this many parts
TOP = 4  # text and figure: the operations with the most time


@dataclass
class TrendData:
    intervals: pd.DataFrame
    operations: pd.DataFrame
    metrics: pd.DataFrame
    drifts: list[trends.Drift]

    @property
    def empty(self) -> bool:
        return not len(self.intervals)


def data_of(a: Any) -> TrendData:
    """From an Analysis: its trend tables, metrics and drifts."""
    iv = a.trend_intervals()
    ops = a.trend_operations(iv)
    return TrendData(iv, ops, a.metrics(), trends.drifts(iv, ops))


def to_dict(d: TrendData) -> dict[str, Any]:
    """``intervals``, ``operations``, ``metrics``: the tables' rows; ``drifts``: each with
    its sentence; ``rule``: the drift thresholds."""
    return {"intervals": d.intervals.to_dict("records"),
            "operations": d.operations.to_dict("records"),
            "metrics": d.metrics.to_dict("records"),
            "drifts": [dict(asdict(x), text=x.text) for x in d.drifts],
            "rule": {"window": trends.WINDOW, "ratio": trends.RATIO,
                     "min_share": trends.MIN_SHARE, "min_intervals": trends.MIN_INTERVALS}}


def main_processes(d: TrendData) -> list[tuple[int, int]]:
    """The processes cut at progress reports (the others appear in drifts only)."""
    iv = d.intervals[d.intervals["by"] == "progress"]
    return list(dict.fromkeys(zip(iv["pid"], iv["session"], strict=True)))


def parts(d: TrendData, pid: int, session: int, n: int = ROWS) -> pd.DataFrame:
    """The process's intervals grouped into ``n`` parts of the run by position: time,
    steps/s, and per top operation its ms per step (or % of the time without steps)."""
    iv = d.intervals[(d.intervals["pid"] == pid) & (d.intervals["session"] == session)]
    ops = d.operations[(d.operations["pid"] == pid) & (d.operations["session"] == session)
                       & (d.operations["depth"] == 0)]
    part = np.minimum((iv["position"].to_numpy() * n).astype(int), n - 1)
    by_iv = dict(zip(iv["interval"], part, strict=True))
    top = (ops.groupby("operation")["wall_s"].sum().sort_values(ascending=False)
           .index[:TOP].tolist())
    rows = []
    for k in range(n):
        sel = iv[part == k]
        if not len(sel):
            continue
        sec, steps = float(sel["seconds"].sum()), float(sel["steps"].sum(min_count=1))
        o = ops[ops["interval"].map(by_iv) == k]
        row: dict[str, Any] = {"part": k, "from_pct": 100 * k / n, "to_pct": 100 * (k + 1) / n,
                               "end_s": float(sel["end_s"].max()),
                               "timesteps": float(sel["timesteps"].max()),
                               "steps_per_s": steps / sec if sec > 0 else np.nan}
        for op in top:
            w = float(o.loc[o["operation"] == op, "wall_s"].sum())
            row[op] = 1e3 * w / steps if steps and steps > 0 else 100 * w / max(sec, 1e-12)
        rows.append(row)
    return pd.DataFrame(rows)


def _metric_at(metrics: pd.DataFrame, pid: int, timesteps: float) -> str:
    """The last metrics reported at or before ``timesteps`` (by steps, not time: the
    overhead correction moves the events, not the metrics' clock readings)."""
    m = metrics[(metrics["pid"] == pid) & (metrics["timesteps"] <= timesteps)]
    if not len(m):
        return ""
    last = m.groupby("name")["value"].last()
    return " ".join(f"{k}={v:.4g}" for k, v in last.items())


def render_text(d: TrendData) -> str:
    lines = ["Trends over the run (each part: a tenth of the time from the first progress "
             "report to the last)"]
    for pid, session in main_processes(d):
        t = parts(d, pid, session)
        iv = d.intervals[(d.intervals["pid"] == pid) & (d.intervals["session"] == session)]
        unit = str(iv["unit"].iloc[0])
        ops = [c for c in t.columns if c not in ("part", "from_pct", "to_pct", "end_s",
                                                   "timesteps", "steps_per_s")]
        lines.append(f"  {iv['process'].iloc[0]} (pid {pid}): ms per "
                     f"{trends.singular(unit)} of the top operations")
        head = ["Part", "Until s", unit.capitalize(), f"{unit}/s", *ops, "Metrics"]
        body = [[f"{r['from_pct']:.0f}-{r['to_pct']:.0f}%", f"{r['end_s']:,.1f}",
                 f"{r['timesteps']:,.0f}", f"{r['steps_per_s']:,.1f}",
                 *(f"{r[o]:.3g}" for o in ops), _metric_at(d.metrics, pid, r["timesteps"])]
                for r in t.to_dict("records")]
        widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
                  for i, h in enumerate(head)]
        for cells in [head, ["-" * w for w in widths], *body]:
            lines.append("    " + "  ".join(c.rjust(w) if 0 < i < len(head) - 1 else c.ljust(w)
                                            for i, (c, w) in enumerate(zip(cells, widths,
                                                                           strict=True))
                                            ).rstrip())
    for x in d.drifts:
        lines.append(f"  Drift: {x.text}")
    if not d.drifts:
        lines.append(f"  No drift (an operation's time per step, or steps/s, changing "
                     f"{trends.RATIO:g}x between the first and last {100 * trends.WINDOW:g}% "
                     "of the run, beyond the noise).")
    return "\n".join(lines)


def section(d: TrendData) -> Section:
    return Section(KEY, lambda: to_dict(d), lambda: render_text(d))


def figures(d: TrendData) -> list[tuple[str, Any]]:
    """One figure per process cut at progress reports: steps/s, the top operations' time
    per step (stacked), and the reported metrics, over timesteps."""
    from rlscope.reporters.plots import RUN_COLOURS, pyplot

    plt = pyplot()
    out = []
    for pid, session in main_processes(d):
        iv = d.intervals[(d.intervals["pid"] == pid) & (d.intervals["session"] == session)]
        ops = d.operations[(d.operations["pid"] == pid)
                           & (d.operations["session"] == session)
                           & (d.operations["depth"] == 0)]
        met = d.metrics[d.metrics["pid"] == pid]
        unit = str(iv["unit"].iloc[0])
        x = iv["timesteps"].to_numpy(float)
        n = 3 if len(met) else 2
        fig, axes = plt.subplots(n, 1, figsize=(9, 2.6 * n), sharex=True,
                                 constrained_layout=True)
        axes[0].plot(x, iv["steps_per_s"], color="black")
        axes[0].set_ylabel(f"{unit}/s")
        axes[0].set_title(f"{iv['process'].iloc[0]} (pid {pid}): trends over the run")
        top = (ops.groupby("operation")["wall_s"].sum().sort_values(ascending=False)
               .index[:8].tolist())
        wide = ops.pivot_table(index="interval", columns="operation", values="ms_per_step",
                               aggfunc="sum").reindex(iv["interval"]).fillna(0.0)
        ys = [wide[o].to_numpy() if o in wide else np.zeros(len(x)) for o in top]
        if ys:
            axes[1].stackplot(x, ys, labels=top, colors=RUN_COLOURS[:len(top)])
            axes[1].legend(loc="upper left", fontsize="small", frameon=False)
        axes[1].set_ylabel(f"ms per {trends.singular(unit)}")
        if n == 3:
            for name, g in met.groupby("name", sort=False):
                axes[2].plot(g["timesteps"], g["value"], label=str(name))
            axes[2].legend(loc="upper left", fontsize="small", frameon=False)
            axes[2].set_ylabel("metric")
        axes[-1].set_xlabel(unit)
        out.append((f"trends.{pid}" if session == 0 else f"trends.{pid}.{session}", fig))
    return out
