"""Pool and executor tasks (rlscope.analysis.processes.tasks): the per-function table and
the straggler verdict, as one report section (key ``tasks``)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from rlscope.analysis.processes import tasks
from rlscope.reporters.section import Section
from rlscope.reporters.units import millis, seconds

KEY = "tasks"


def to_dict(rows: pd.DataFrame) -> dict[str, Any]:
    """``functions``: the per-function table's rows; ``stragglers``: the straggler of each
    function that has one (tasks.stragglers); ``rule``: its thresholds."""
    table = tasks.task_table(rows)
    return {"functions": table.to_dict("records"),
            "stragglers": tasks.stragglers(table),
            "rule": {"ratio": tasks.RATIO, "share": tasks.SHARE,
                     "min_tasks": tasks.MIN_TASKS}}


def render_text(rows: pd.DataFrame) -> str:
    table = tasks.task_table(rows)
    head = ["Function", "Tasks", "Workers", "Total s", "Mean ms", "p50 ms", "p99 ms",
            "Max ms", "Slowest (item, worker)"]
    body = [[str(r.function), f"{r.tasks:,}", str(r.workers), seconds(r.total_s),
             millis(r.mean_s), millis(r.p50_s), millis(r.p99_s), millis(r.max_s),
             f"item {r.slowest_index}, "
             + (f"thread {r.slowest_tid} of pid {r.slowest_pid}" if r.threads
                else f"pid {r.slowest_pid}")]
            for r in table.itertuples(index=False)]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i in (0, 8) else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))
                         ).rstrip()

    lines = ["Pool and executor tasks (one operation task:<function> per item, in the "
             "workers)", *("  " + line(c) for c in
                           [head, ["-" * w for w in widths], *body])]
    found = tasks.stragglers(table)
    for d in found:
        lines.append(f"  Straggler: {d['text']}")
    if not found:
        lines.append(f"  No straggler (a task over {tasks.RATIO:g}x its function's median "
                     f"and over {100 * tasks.SHARE:g}% of its wall time).")
    lines.append("  Item: the index in the map/imap/starmap call's iterable; for "
                 "apply_async/submit, the submitting process's count of such calls.")
    return "\n".join(lines)


def section(rows: pd.DataFrame) -> Section:
    """The report's tasks section, from Analysis.tasks() (non-empty)."""
    return Section(KEY, lambda: to_dict(rows), lambda: render_text(rows))
