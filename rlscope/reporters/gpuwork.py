"""The report's GPU work section: kernels, copies and memsets per operation that launched
them (joined by CUPTI correlation id), with their GPU time. Consumes the data API."""

from __future__ import annotations

from typing import Any

import pandas as pd

from rlscope.analysis import Analysis
from rlscope.analysis.engine import categories as C
from rlscope.reporters.units import seconds

_KINDS = [(C.CATEGORY_NAMES[C.KERNEL], "Kernels"), (C.CATEGORY_NAMES[C.MEMCPY], "Copies"),
          (C.CATEGORY_NAMES[C.MEMSET], "Memsets")]


def table(a: Analysis) -> pd.DataFrame:
    """One row per (process, session, phase, operation) that launched GPU work: count and
    GPU seconds per kind (``kernels``, ``kernel_s``, ``copies``, ``copy_s``, ``memsets``,
    ``memset_s``), in the operations table's row order. Overlapping activities each count
    their own time."""
    g = a.gpu()
    cols = ["pid", "session", "phase", "operation", "kernels", "kernel_s", "copies",
            "copy_s", "memsets", "memset_s"]
    if not len(g):
        return pd.DataFrame(columns=cols)
    wide = g.pivot_table(index=["pid", "session", "phase", "operation"], columns="category",
                         values=["count", "seconds"], aggfunc="sum", fill_value=0)
    out = pd.DataFrame(index=wide.index)
    for (cat, _), (n, s) in zip(_KINDS, [("kernels", "kernel_s"), ("copies", "copy_s"),
                                         ("memsets", "memset_s")], strict=True):
        out[n] = wide[("count", cat)].astype("int64") if ("count", cat) in wide else 0
        out[s] = wide[("seconds", cat)].astype(float) if ("seconds", cat) in wide else 0.0
    out = out.reset_index()
    # The operations table's order (start-up first, by time, unannotated last).
    ops = a.operations()
    order = {k: i for i, k in enumerate(zip(ops["pid"], ops["session"], ops["phase"],
                                            ops["operation"], strict=True))}
    out["_o"] = [order.get(k, len(order)) for k in zip(out["pid"], out["session"],
                                                          out["phase"], out["operation"],
                                                          strict=True)]
    return out.sort_values(["_o"], kind="stable")[cols].reset_index(drop=True)


def lines(a: Analysis) -> list[str]:
    """Text lines (none when no GPU work was recorded)."""
    t = table(a)
    if not len(t):
        return []
    procs = a.processes()
    names = {(int(r.pid), int(r.session)): str(r.process) for r in procs.itertuples()}
    head = ["Process", "Phase", "Operation", "Kernels", "Kernel s", "Copies", "Copy s",
            "Memsets", "Memset s", "GPU ms / call"]
    ops = a.operations()
    calls = {k: int(c) for k, c in zip(zip(ops["pid"], ops["session"], ops["phase"],
                                           ops["operation"], strict=True), ops["calls"],
                                       strict=True)}
    body = []
    for r in t.itertuples():
        total = r.kernel_s + r.copy_s + r.memset_s
        n = calls.get((r.pid, r.session, r.phase, r.operation), 0)
        body.append([f"{names.get((int(r.pid), int(r.session)), '?')} ({r.pid})",
                     r.phase or "-", r.operation,
                     f"{r.kernels:,}", seconds(r.kernel_s), f"{r.copies:,}",
                     seconds(r.copy_s), f"{r.memsets:,}", seconds(r.memset_s),
                     f"{total * 1e3 / n:.4f}" if n else "-"])
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]

    def row(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < 3 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    return ["", "GPU work by the operation that launched it (CUPTI correlation ids)",
            "  " + row(head), "  " + "  ".join("-" * w for w in widths),
            *("  " + row(b) for b in body),
            "Kernel/Copy/Memset s: the GPU time of that work (overlapping kernels each "
            "count their own); GPU ms / call: all of it per call of the operation."]


def to_dict(a: Analysis) -> list[dict[str, Any]]:
    t = table(a)
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
            for row in t.to_dict(orient="records")]
