"""Which backend (and simulator) functions take an operation's Backend (Simulator) time:
per named call (the wrapper's name: ``torch.nn.functional.linear``, ``Tensor.__eq__``),
its outermost calls and the CPU time in that category inside them (docs/analysis.md,
"Top calls per operation")."""

from __future__ import annotations

import pandas as pd

from rlscope.analysis.engine import categories as C
from rlscope.analysis.frames import Analysis

COLUMNS = ["pid", "process", "phase", "operation", "category", "name", "calls", "seconds"]
TOP = 5  # calls listed per operation and category
MIN_SHARE = 0.01  # ... each at least this share of the operation's time in its category


def named_calls(a: Analysis) -> pd.DataFrame:
    """One row per process, phase, operation, category and call name."""
    rows = [(r.pid, name, a.phases.names[c.phase], a.paths.path(c.path),
             C.CATEGORY_NAMES[c.category], c.name, c.calls, c.ns / 1e9)
            for r, name in zip(a.results, a.process_names(), strict=True) for c in r.calls]
    return pd.DataFrame(rows, columns=COLUMNS)


def top_calls(a: Analysis, category: str = "Backend", top: int = TOP,
              min_share: float = MIN_SHARE) -> pd.DataFrame:
    """Per operation (summed over processes and phases), its ``top`` calls of one
    category by time: operation, name, calls, seconds, per_call_us, share (of the
    operation's time in that category, recorded in named calls), slowest first within
    each operation; operations by their category time, largest first."""
    df = named_calls(a)
    df = df[df["category"] == category]
    cols = ["operation", "name", "calls", "seconds", "per_call_us", "share"]
    if not len(df):
        return pd.DataFrame(columns=cols)
    g = df.groupby(["operation", "name"], sort=False)[["calls", "seconds"]].sum().reset_index()
    total = g.groupby("operation")["seconds"].transform("sum")
    g["share"] = (g["seconds"] / total.where(total > 0)).fillna(0.0)
    g["per_call_us"] = 1e6 * g["seconds"] / g["calls"].where(g["calls"] > 0)
    g = g[g["share"] >= min_share]
    order = g.groupby("operation")["seconds"].sum().sort_values(ascending=False).index
    rank = {op: i for i, op in enumerate(order)}
    g = (g.assign(_o=g["operation"].map(rank))
         .sort_values(["_o", "seconds"], ascending=[True, False], kind="stable")
         .groupby("operation", sort=False).head(top))
    return g.drop(columns="_o")[cols].reset_index(drop=True)
