"""Pool and executor tasks (rlscope.integrations.pooltasks): one row per task from the
workers' metadata, a per-function table, and the straggler rule (docs/analysis.md#pool-
and-executor-tasks).

Straggler: a function's slowest task, when the function ran at least
:data:`MIN_TASKS` tasks and that task took more than :data:`RATIO` times the median of
its tasks and more than :data:`SHARE` of the function's wall time (first task's start to
last task's end, over all workers): one task alone held the pool up for a visible part
of its run.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from rlscope.trace import format as fmt

RATIO = 3.0  # a straggler takes more than this many times its function's median task
SHARE = 0.10  # ... and more than this share of the function's wall time
MIN_TASKS = 3  # fewer tasks have no meaningful median

ROW_COLUMNS = ["pid", "function", "call", "index", "begin_ns", "end_ns", "seconds", "tid"]
TABLE_COLUMNS = ["function", "tasks", "workers", "calls", "total_s", "mean_s", "p50_s",
                 "p99_s", "max_s", "wall_s", "slowest_index", "slowest_call",
                 "slowest_pid", "slowest_tid", "threads"]


def is_task_key(key: str) -> bool:
    return key.startswith(fmt.META_TASK_PREFIX)


def without_tasks(metadata: dict[str, Any]) -> dict[str, Any]:
    """The metadata less the task records (they have their own table)."""
    return {k: v for k, v in metadata.items() if not is_task_key(k)}


def task_rows(processes: Iterable[tuple[int, dict[str, Any]]]) -> pd.DataFrame:
    """One row per task recorded in ``processes`` ((pid, metadata) pairs): pid, function,
    call, index, begin_ns, end_ns, seconds, tid (the OS thread that ran it; 0: a record
    from before it was kept); in start order. Malformed records are skipped."""
    rows = []
    for pid, metadata in processes:
        for key, v in metadata.items():
            if not is_task_key(key) or not isinstance(v, list) or len(v) < 5:
                continue
            name, call, index, begin, end = v[:5]
            if not (isinstance(name, str) and all(isinstance(x, int)
                                                  for x in (call, index, begin, end))):
                continue
            tid = v[5] if len(v) > 5 and isinstance(v[5], int) else 0
            rows.append((pid, name, call, index, begin, end, (end - begin) / 1e9, tid))
    out = pd.DataFrame(rows, columns=ROW_COLUMNS)
    return out.sort_values(["begin_ns", "pid"], kind="stable", ignore_index=True)


def task_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per function (most total time first): tasks, workers (distinct processes, or
    threads of one process: a thread pool), calls, total, mean, p50, p99 and max seconds,
    the wall time from its first task's start to its last task's end, the slowest task's
    index, call, worker pid and thread, and whether the workers are threads."""
    out = []
    for name, g in rows.groupby("function", sort=False):
        s = g["seconds"].to_numpy(float)
        slow = g.iloc[int(np.argmax(s))]
        out.append({
            "function": name, "tasks": len(g), "workers": _workers(g),
            "calls": g["call"].nunique(), "total_s": float(s.sum()),
            "mean_s": float(s.mean()), "p50_s": float(np.median(s)),
            "p99_s": float(np.percentile(s, 99)), "max_s": float(s.max()),
            "wall_s": (int(g["end_ns"].max()) - int(g["begin_ns"].min())) / 1e9,
            "slowest_index": int(slow["index"]), "slowest_call": int(slow["call"]),
            "slowest_pid": int(slow["pid"]), "slowest_tid": int(slow["tid"]),
            "threads": _workers(g) > g["pid"].nunique(),
        })
    table = pd.DataFrame(out, columns=TABLE_COLUMNS)
    return table.sort_values("total_s", ascending=False, kind="stable", ignore_index=True)


def stragglers(table: pd.DataFrame, ratio: float = RATIO, share: float = SHARE,
               min_tasks: int = MIN_TASKS) -> list[dict[str, Any]]:
    """The straggler of each function of :func:`task_table` that has one (the rule in
    the module's docstring), slowest first: function, index, call, pid, seconds,
    median_s, ratio, tasks, wall_s, share (of wall_s) and a one-line ``text``."""
    out = []
    for r in table.itertuples(index=False):
        if r.tasks < min_tasks or r.p50_s <= 0 or r.wall_s <= 0:
            continue
        x = r.max_s / r.p50_s
        part = r.max_s / r.wall_s
        if x <= ratio or part <= share:
            continue
        where = f" of call {r.slowest_call}" if r.calls > 1 else ""
        worker = (f"thread {r.slowest_tid} of pid {r.slowest_pid}" if r.threads
                  else f"worker pid {r.slowest_pid}")
        text = (f"{r.function} item {r.slowest_index}{where} took {r.max_s:.2f} s, "
                f"{x:.1f}x the median {r.p50_s:.2f} s of its {r.tasks} tasks "
                f"({worker}; {100 * part:.0f}% of the tasks' "
                f"{r.wall_s:.2f} s wall time)")
        out.append({"function": r.function, "index": r.slowest_index,
                    "call": r.slowest_call, "pid": r.slowest_pid, "seconds": r.max_s,
                    "median_s": r.p50_s, "ratio": x, "tasks": r.tasks,
                    "wall_s": r.wall_s, "share": part, "text": text})
    return sorted(out, key=lambda d: -d["seconds"])


def _workers(g: pd.DataFrame) -> int:
    """The tasks' workers: distinct (process, thread) pairs (a process pool's worker
    runs its tasks on one thread; a thread pool's threads share one process)."""
    return int(g[["pid", "tid"]].drop_duplicates().shape[0])


def makespan(durations: Iterable[float], workers: int) -> float:
    """Wall time of tasks handed out in this order, each to the worker free first (a pool
    with chunksize 1, dispatch cost ignored)."""
    free = [0.0] * max(workers, 1)
    for d in durations:
        i = min(range(len(free)), key=free.__getitem__)
        free[i] += d
    return max(free)


def first_gain(rows: pd.DataFrame, function: str, call: int) -> tuple[float, float, int]:
    """What handing a call's slowest task out first saves: (makespan in the recorded
    order, makespan with the slowest first, workers), both simulated from the recorded
    task times on the call's workers (processes, or a thread pool's threads) so the
    dispatch cost cancels."""
    g = rows[(rows["function"] == function) & (rows["call"] == call)].sort_values(
        ["index", "begin_ns"], kind="stable")
    s = g["seconds"].to_list()
    w = _workers(g)
    if not s:
        return 0.0, 0.0, w
    k = max(range(len(s)), key=s.__getitem__)
    return makespan(s, w), makespan([s[k], *s[:k], *s[k + 1:]], w), w
