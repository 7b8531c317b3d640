"""The main process's critical path: where its wall time went, and which process or role
it was waiting on meanwhile (docs/analysis.md, "Critical path of the main process").

The main process's self time splits into its own CPU work (Python, Backend, Simulator),
CUDA API calls and Waiting. Its vector steps (envs in worker processes) come apart by the
lock-step analysis: each step's slowest env's work (done in a worker while the main
process waited) and the rest of the step, IPC and scheduling. Waiting while Pool or
executor tasks ran is the pool workers'. What the main process waited inside
``simulation`` outside any recorded vector step (a native pool's threads, PufferLib's
workers, the env's own I/O) is the env's. What is left of Waiting (sleep, locks, I/O,
other processes) stays one row. The run-queue wait (sampled) is part of its own CPU row:
the time it was runnable without a core.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rlscope.analysis.engine.paths import PATH_SEP, STARTUP

COLUMNS = ["part", "on", "seconds", "share", "detail"]
SIMULATION = "simulation"


def _startup(ops: pd.DataFrame) -> pd.Series:
    op = ops["operation"].astype(str)
    return (op == STARTUP) | op.str.startswith(STARTUP + PATH_SEP)


def _union_s(begin: np.ndarray, end: np.ndarray) -> float:
    total, last = 0, None
    for b, e in sorted(zip(begin.tolist(), end.tolist(), strict=True)):
        if last is not None and e <= last:
            continue
        total += e - (b if last is None else max(b, last))
        last = e
    return total / 1e9


def critical_path(tree: pd.DataFrame, ops: pd.DataFrame, lockstep: Any = None,
                  tasks: pd.DataFrame | None = None, util: pd.DataFrame | None = None,
                  main_pid: int | None = None) -> pd.DataFrame:
    """Rows (part, on, seconds, share of the main process's wall, detail); empty when the
    run has no main process with operations."""
    if main_pid is None:
        mains = tree[tree["role"] == "main"] if "role" in tree else tree.iloc[:0]
        if not len(mains):
            return pd.DataFrame(columns=COLUMNS)
        main_pid = int(mains["pid"].iloc[0])
    row = tree[tree["pid"] == main_pid]
    m = ops[ops["pid"] == main_pid]
    if not len(row) or not len(m):
        return pd.DataFrame(columns=COLUMNS)
    wall = float(row["wall_s"].iloc[0])
    name = f"main process (pid {main_pid})"
    start = m[_startup(m)]
    rest = m[~_startup(m)]
    py, be, sim = (float(rest[c].sum()) for c in ("python_s", "backend_s", "simulator_s"))
    cuda, wait = float(rest["cuda_api_s"].sum()), float(rest["waiting_s"].sum())
    out: list[tuple[str, str, float, str]] = []
    vec_rows: list[tuple[str, str, float, str]] = []
    vec_waited: list[float] = []
    for v in (lockstep.vector_envs if lockstep is not None else []):
        if v.pid != main_pid or not v.workers or v.step_s <= 0:
            continue
        send = v.send_s if v.send_s == v.send_s else 0.0  # nan: unknown, all waiting
        waited = v.wait_s if v.wait_s == v.wait_s else v.step_s - send
        py -= send
        wait -= waited
        vec_waited.append(waited)
        slow = v.envs.sort_values("slowest_steps", ascending=False) if len(v.envs) else None
        detail = ""
        if slow is not None and len(slow):
            top = slow.iloc[0]
            detail = (f"env {int(top['env'])} (pid {int(top['pid'])}) slowest in "
                      f"{float(top['slowest_pct']):.0f}% of {v.complete_steps} steps")
        vec_rows.append((f"{v.name}: the slowest env's step", "vector-env workers",
                         float(v.slowest_s), detail))
        vec_rows.append((f"{v.name}: IPC and scheduling", "pipes, the OS scheduler",
                         float(v.overhead_s), "the rest of each vector step"))
    runq = float("nan")
    if util is not None and "runq_wait_s" in util:
        q = util[util["pid"] == main_pid]["runq_wait_s"]
        if len(q) and q.notna().all():
            runq = float(q.sum())
    own = max(py, 0.0) + be + sim
    # Waiting inside env steps that no vector step accounts for: a native pool's threads
    # (EnvPool) or a vector env's workers that record no vector steps (PufferLib).
    op = rest["operation"].astype(str)
    in_env = float(rest[(op == SIMULATION) | op.str.endswith(PATH_SEP + SIMULATION)]
                   ["waiting_s"].sum()) - sum(vec_waited)
    env_wait = min(max(in_env, 0.0), max(wait, 0.0))
    if env_wait > 1e-9:
        vec_rows.append(("waiting inside env steps", "the env (its workers, threads, I/O)",
                         env_wait, "blocking calls inside simulation outside recorded "
                         "vector steps (a native pool, PufferLib's worker backends)"))
        wait -= env_wait
    out.append((f"{name}: own CPU work", "main", own,
                f"Python {max(py, 0.0):.3g} s, Backend {be:.3g} s, Simulator {sim:.3g} s"
                + (f"; the process waited for a core (run queue) {runq:.3g} s over its "
                   "life, start-up included" if runq == runq else "")))
    out += vec_rows
    if tasks is not None and len(tasks):
        pool = min(_union_s(tasks["begin_ns"].to_numpy(), tasks["end_ns"].to_numpy()),
                   max(wait, 0.0))
        if pool > 0:
            fns = tasks.groupby("function").size().sort_values(ascending=False)
            out.append(("waiting while pool tasks ran", "pool workers", pool,
                        ", ".join(f"{f}: {n} tasks" for f, n in fns.head(3).items())))
            wait -= pool
    if cuda > 0:
        out.append(("CUDA API calls", "the GPU and its driver", cuda, ""))
    if wait > 1e-9:
        out.append(("other waiting", "sleep, locks, I/O, other processes", wait,
                    "intercepted blocking calls outside vector steps and pool waits"))
    s = float(start["self_s"].sum())
    if s > 0:
        out.append(("start-up", "main", s, "before its first operation"))
    return pd.DataFrame([(p, o, sec, sec / wall if wall > 0 else np.nan, d)
                         for p, o, sec, d in out], columns=COLUMNS)
