"""Runs side by side, rendered: the comparison frame of rlscope.analysis.compare (seconds
per process role and operation or category, deltas against the first run, whether a
delta exceeds run-to-run noise) as text, Markdown, CSV, JSON or a figure. The text table
is grouped by role (main first) when the runs have more than one; a line under it says
which idle helpers were left out."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

# The computation lives in rlscope.analysis.compare; its names stay importable from
# here (rls-analyze compare calls them through this module).
from rlscope.analysis.compare import (
    COLUMNS,
    compare,
    correction_warnings,
    left_out_line,
    noise_known,
    parse_map,
    roles,
    run_label,
    timesteps,
    unique_labels,
)
from rlscope.reporters.markdown import to_markdown

__all__ = ["COLUMNS", "compare", "correction_warnings", "figure", "left_out_line",
           "parse_map", "render", "roles", "run_label", "timesteps", "unique_labels"]


def render(df: pd.DataFrame, names: list[str], fmt: str, per_timestep: bool = False) -> str:
    if fmt == "csv":
        return df.to_csv(index=False).rstrip("\n")
    if fmt == "json":
        return df.to_json(orient="records", indent=2)
    left = left_out_line(df)
    if fmt == "markdown":
        md = to_markdown(_wide(df, names, per_timestep, role_column=True))
        return md + (f"\n\n{left}" if left else "")
    wide = _wide(df, names, per_timestep)
    head = list(wide.columns)
    body = [[str(v) for v in r] for r in wide.itertuples(index=False)]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                       for i, (h, w) in enumerate(zip(head, widths, strict=True))),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(b, widths, strict=True))).rstrip()
              for b in body]
    lines.append("")
    if left:
        lines.append(left)
    noise = noise_known(df)
    unit = "Microseconds per timestep" if per_timestep else "Seconds"
    marks = ("*: the delta exceeds run-to-run noise (2 standard errors); ~: it does not."
             if noise else "Give repetitions as DIR1,DIR2 to tell deltas from noise.")
    lines.append(f"{unit} (mean over repetitions ± standard deviation); –: not in that "
                 f"run; Δ: against {names[0]}. {marks}")
    return "\n".join(lines)


def _role_header(g: pd.DataFrame, role: str) -> str:
    counts = list(dict.fromkeys(int(n) for n in g["processes"]))
    n = " / ".join(str(c) for c in counts)
    return f"{role} ({n} process{'' if counts == [1] else 'es'})"


def _wide(df: pd.DataFrame, names: list[str], per_timestep: bool = False,
          role_column: bool = False) -> pd.DataFrame:
    """One row per (role, key). With more than one role: a header row per role and its
    keys indented below (text), or a role column (``role_column``: Markdown)."""
    scale, digits = (1e6, 2) if per_timestep else (1.0, 3)
    grouped = len(roles(df)) > 1
    out: dict[str, list[str]] = {"role": []} if grouped and role_column else {}
    out[""] = []
    for name in names:
        out[name] = []
        if name != names[0]:
            out[f"Δ {name}"] = []
    for role, rg in df.groupby("role", sort=False):
        if grouped and not role_column:
            for col in out:
                out[col].append(_role_header(rg, str(role)) if col == "" else "")
        for key, g in rg.groupby("key", sort=False):
            if "role" in out:
                out["role"].append(str(role))
            out[""].append(f"  {key}" if grouped and not role_column else str(key))
            rows = list(g.itertuples())
            base_present = rows[0].present
            for r in rows:
                cell = f"{scale * r.mean_s:.{digits}f}" if r.present else "–"
                if r.present and r.repetitions > 1 and not math.isnan(r.std_s):
                    cell += f" ±{scale * r.std_s:.{digits}f}"
                out[r.run].append(cell)
                if r.run != names[0]:
                    mark = {True: " *", False: " ~", None: ""}[r.significant]
                    if not r.present and not base_present:
                        out[f"Δ {r.run}"].append("–")
                    elif not r.present:
                        out[f"Δ {r.run}"].append(f"absent{mark}")
                    elif not base_present:
                        out[f"Δ {r.run}"].append(f"new{mark}")
                    else:
                        pct = "" if math.isnan(r.delta_pct) else f" ({r.delta_pct:+.0f}%)"
                        out[f"Δ {r.run}"].append(
                            f"{scale * r.delta_s:+.{digits}f}{pct}{mark}")
    return pd.DataFrame(out)


def figure(df: pd.DataFrame, names: list[str], by: str = "operation",
           per_timestep: bool = False) -> Any:
    """Grouped horizontal bars of the comparison, one row per operation (full path) or
    category in the table's order, one colour per run, error bars from the repetitions
    and the table's significance marks; the caller saves and closes it."""
    from rlscope.reporters.plots import RUN_COLOURS, pyplot, row_labels, value_label

    plt = pyplot()
    # One bar group per (role, key): with several roles, the role is in the label.
    several = len(roles(df)) > 1
    df = df.assign(key=[f"{k} [{r}]" if several else str(k)
                        for r, k in zip(df["role"], df["key"], strict=True)])
    keys = list(dict.fromkeys(df["key"]))
    n = len(keys)
    scale, unit = (1e6, "µs per timestep") if per_timestep else (1.0, "s")
    height = max(2.6, (0.15 * len(names) + 0.1) * n + 2.0)
    fig, ax = plt.subplots(figsize=(9.0, height), constrained_layout=True)
    y = np.arange(n)
    h = 0.8 / len(names)
    for i, name in enumerate(names):
        g = df[df["run"] == name].set_index("key").reindex(keys)
        vals = scale * g["mean_s"].fillna(0.0).to_numpy()
        err = scale * g["std_s"].fillna(0.0).to_numpy()
        pos = y + (i - (len(names) - 1) / 2) * h
        ax.barh(pos, vals, h, xerr=err if err.any() else None, capsize=2,
                color=RUN_COLOURS[i % len(RUN_COLOURS)], label=name,
                error_kw={"linewidth": 0.8})
        # Each bar's value (a row far smaller than the largest is unreadable from its
        # length alone), then the run's significance mark against the first run.
        for p_, v, e, sig, present in zip(pos, vals, err, g["significant"], g["present"],
                                          strict=True):
            mark = "*" if sig is True else ("~" if sig is False else "")
            if present is False:
                mark = "–"
            label = "" if present is False else value_label(v)
            ax.text(v + e, p_, f" {label}{mark if i else ''}", va="center", fontsize=7)
    ax.margins(x=0.08)  # room for the largest bar's label
    ax.set_yticks(y, row_labels([str(k) for k in keys]))
    ax.set_ylim(n - 0.5, -0.5)  # first row on top, as in the table
    what = (f"Self time ({unit}): nested operations excluded, summed over each role's "
            "processes and the phases" if by == "operation" else f"Time ({unit}) per "
            "category, summed over each role's processes")
    reps = df["repetitions"].max() > 1 if len(df) else False
    ax.set_xlabel(what + ("\nmean ± standard deviation over each run's repetitions"
                          if reps else ""))
    ax.grid(axis="x", linewidth=0.4, alpha=0.5)
    ax.set_axisbelow(True)
    fig.legend(loc="outside lower center", ncols=min(len(names), 4), frameon=False)
    noise = noise_known(df)
    ax.set_title("Run comparison" + (f" (* beyond the run-to-run noise, ~ within it, "
                                     f"– absent; against {names[0]})" if noise else ""),
                 fontsize=9)
    return fig
