"""JIT compile time in the report (docs/attribution.md#compile-time): per operation
and function, how often and how long torch.compile / jax.jit / tf.function compiled, and
the verdicts on recompiles that recur. No I/O: lines and data."""

from __future__ import annotations

from typing import Any

import pandas as pd

from rlscope.analysis.compile_rows import FRAMEWORK_NAMES
from rlscope.analysis.frames import Analysis
from rlscope.reporters.units import seconds

TOP = 8  # functions listed per process in the text report


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (process, operation, framework, function): compilations, recompiles (with a
    reason), seconds (the records' times summed), graph breaks and the first reason."""
    if not len(rows):
        return pd.DataFrame(columns=["pid", "session", "operation", "framework", "function",
                                     "compiles", "recompiles", "seconds", "graph_breaks",
                                     "reason"])
    keys = ["pid", "session", "operation", "framework", "function"]
    g = rows.groupby(keys, sort=False)
    out = g.agg(compiles=("counts", "sum"), seconds=("seconds", "sum"),
                graph_breaks=("graph_breaks", "sum")).reset_index()
    reasons = g["reason"].agg(lambda r: next((x for x in r if x), ""))
    out["recompiles"] = g["reason"].agg(lambda r: int((r != "").sum())).to_numpy()
    out["reason"] = reasons.to_numpy()
    return out.sort_values("seconds", ascending=False, kind="stable", ignore_index=True)


def lines(a: Analysis) -> list[str]:
    rows = a.compiles()
    if not len(rows):
        return []
    out = ["", "JIT compilation (per operation and function; also inside the operations' "
               "self time and categories):"]
    table = summary(rows)
    for (pid, session), t in table.groupby(["pid", "session"], sort=False):
        out.append(f"  pid {pid}" + (f" (session {session})" if session else ""))
        for r in t.head(TOP).itertuples():
            label = FRAMEWORK_NAMES.get(r.framework, r.framework)
            line = (f"    {r.operation}: {label} {r.function or '?'}: {r.compiles} "
                    f"compilation{'s' if r.compiles != 1 else ''}, {seconds(r.seconds)} s")
            if r.graph_breaks:
                line += f", {r.graph_breaks} graph break{'s' if r.graph_breaks != 1 else ''}"
            if r.reason:
                line += f"; recompiled because: {r.reason[:160]}"
            out.append(line)
        if len(t) > TOP:
            out.append(f"    ... {len(t) - TOP} more (JSON: compiles)")
    for v in a.compile_verdicts():
        out.append(f"  Verdict: {v['text']}")
    return out


def json_section(a: Analysis) -> dict[str, Any]:
    rows = a.compiles()
    if not len(rows):
        return {}
    table = summary(rows)
    return {"compiles": {"records": _records(rows), "functions": _records(table),
                         "verdicts": a.compile_verdicts()}}


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}
            for r in df.to_dict("records")]
