"""Compare runs side by side: seconds per operation or category, deltas against the first
run, and whether a delta exceeds run-to-run noise (when runs have repetitions)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlscope.analysis import Analysis
from rlscope.analysis.paths import UNANNOTATED
from rlscope.reporters.table import to_markdown

COLUMNS = ["key", "run", "repetitions", "mean_s", "std_s", "delta_s", "delta_pct",
           "significant"]


def run_label(dirs: list[Path]) -> str:
    name = dirs[0].resolve().name or str(dirs[0])
    return name if len(dirs) == 1 else f"{name} (x{len(dirs)})"


def unique_labels(names: list[str]) -> list[str]:
    """Run labels, a repeated one numbered (the same directory given twice)."""
    out: list[str] = []
    for n in names:
        label, k = n, 2
        while label in out:
            label, k = f"{n} #{k}", k + 1
        out.append(label)
    return out


def _seconds(a: Analysis, by: str) -> pd.Series:
    if by == "operation":  # in the report's row order, unannotated last
        ops = a.operations()
        s = ops.groupby("operation", sort=False)["self_s"].sum()
        return s.reindex([k for k in s.index if k != UNANNOTATED]
                         + [k for k in s.index if k == UNANNOTATED])
    bd = a.breakdown(by=("category",))
    return bd.set_index("category")["seconds"]


def compare(runs: list[list[Analysis]], names: list[str], by: str = "operation"
            ) -> pd.DataFrame:
    """Long table: one row per (key, run) with the mean and standard deviation over the
    run's repetitions, the delta of the mean against the first run, and ``significant``:
    True/False when both runs have at least two repetitions (|delta| > 2 standard errors of
    the difference, Welch), None otherwise."""
    rows = []
    stats = []
    for reps in runs:
        table = pd.concat([_seconds(a, by) for a in reps], axis=1).fillna(0.0)
        stats.append((table.mean(axis=1), table.std(axis=1, ddof=1) if len(reps) > 1
                      else table.mean(axis=1) * np.nan, len(reps)))
    keys: list[str] = []
    for mean, _, _ in stats:
        keys += [k for k in mean.index if k not in keys]
    base_mean, base_std, base_n = stats[0]
    for key in keys:
        b = float(base_mean.get(key, 0.0))
        bs = float(base_std.get(key, np.nan))
        for name, (mean, std, n) in zip(names, stats, strict=True):
            m = float(mean.get(key, 0.0))
            s = float(std.get(key, np.nan))
            delta = m - b
            sig = None
            if n > 1 and base_n > 1 and name != names[0]:
                se = math.sqrt(s * s / n + bs * bs / base_n)
                sig = bool(abs(delta) > 2 * se)
            rows.append({"key": key, "run": name, "repetitions": n, "mean_s": m,
                         "std_s": s, "delta_s": delta,
                         "delta_pct": 100 * delta / b if b else np.nan, "significant": sig})
    return pd.DataFrame(rows, columns=COLUMNS)


def render(df: pd.DataFrame, names: list[str], fmt: str) -> str:
    if fmt == "csv":
        return df.to_csv(index=False).rstrip("\n")
    if fmt == "json":
        return df.to_json(orient="records", indent=2)
    wide = _wide(df, names)
    if fmt == "markdown":
        return to_markdown(wide)
    head = list(wide.columns)
    body = [[str(v) for v in r] for r in wide.itertuples(index=False)]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                       for i, (h, w) in enumerate(zip(head, widths, strict=True))),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(b, widths, strict=True))) for b in body]
    lines.append("")
    noise = df["significant"].notna().any()
    lines.append("Seconds (mean over repetitions ± standard deviation); Δ: against "
                 f"{names[0]}. " + ("*: the delta exceeds run-to-run noise (2 standard "
                                    "errors); ~: it does not." if noise else
                                    "Give repetitions as DIR1,DIR2 to tell deltas from "
                                    "noise."))
    return "\n".join(lines)


def _wide(df: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    out: dict[str, list[str]] = {"": []}
    for name in names:
        out[name] = []
        if name != names[0]:
            out[f"Δ {name}"] = []
    for key, g in df.groupby("key", sort=False):
        out[""].append(str(key))
        for r in g.itertuples():
            cell = f"{r.mean_s:.3f}"
            if r.repetitions > 1 and not math.isnan(r.std_s):
                cell += f" ±{r.std_s:.3f}"
            out[r.run].append(cell)
            if r.run != names[0]:
                pct = "" if math.isnan(r.delta_pct) else f" ({r.delta_pct:+.0f}%)"
                mark = {True: " *", False: " ~", None: ""}[r.significant]
                out[f"Δ {r.run}"].append(f"{r.delta_s:+.3f}{pct}{mark}")
    return pd.DataFrame(out)


def figure(df: pd.DataFrame, names: list[str], by: str = "operation") -> Any:
    """Grouped horizontal bars of the comparison, one row per operation (full path) or
    category in the table's order; the caller saves and closes it."""
    from rlscope.reporters.plots import RUN_COLOURS, pyplot, row_labels

    plt = pyplot()
    keys = list(dict.fromkeys(df["key"]))
    n = len(keys)
    height = max(2.6, (0.15 * len(names) + 0.1) * n + 2.0)
    fig, ax = plt.subplots(figsize=(9.0, height), constrained_layout=True)
    y = np.arange(n)
    h = 0.8 / len(names)
    for i, name in enumerate(names):
        g = df[df["run"] == name].set_index("key").reindex(keys)
        err = g["std_s"].fillna(0.0).to_numpy()
        ax.barh(y + (i - (len(names) - 1) / 2) * h, g["mean_s"].to_numpy(), h,
                xerr=err if err.any() else None, capsize=2,
                color=RUN_COLOURS[i % len(RUN_COLOURS)], label=name,
                error_kw={"linewidth": 0.8})
    ax.set_yticks(y, row_labels([str(k) for k in keys]))
    ax.set_ylim(n - 0.5, -0.5)
    what = ("Self time (s): nested operations excluded, summed over processes and phases"
            if by == "operation" else "Time (s) per category, summed over processes")
    reps = df["repetitions"].max() > 1 if len(df) else False
    ax.set_xlabel(what + ("\nmean ± standard deviation over each run's repetitions"
                          if reps else ""))
    ax.grid(axis="x", linewidth=0.4, alpha=0.5)
    ax.set_axisbelow(True)
    fig.legend(loc="outside lower center", ncols=min(len(names), 4), frameon=False)
    ax.set_title("Run comparison")
    return fig
