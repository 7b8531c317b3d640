"""rlscope's book-keeping per operation, by the cost model (docs/overhead-correction.md):
the operation's own calls counted in the operations table (its annotation, the backend,
simulator, wait and CUDA API calls it made directly) times each kind's per-event cost,
summed over the operation and the operations nested in it, as a share of its wall time.

Env step records (vector env wrappers) are left out: the table does not count them per
operation; they cost ~1 µs each, in the simulation operation of the process that steps
the env (DummyVecEnv: sampled; SubprocVecEnv: the workers)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rlscope.analysis.engine.paths import PATH_SEP, STARTUP
from rlscope.analysis.overhead.kinds import (
    ANNOTATION,
    BACKEND_CALL,
    CUDA_API,
    SIMULATOR_CALL,
    WAIT_CALL,
)

# operations-table column -> the cost kind of one of its events
COUNTED = (("calls", ANNOTATION), ("backend_calls", BACKEND_CALL),
           ("simulator_calls", SIMULATOR_CALL), ("wait_calls", WAIT_CALL),
           ("cuda_api_calls", CUDA_API))
MIN_WALL_PCT = 5.0  # the worst among operations with this share of their process's time
COLUMNS = ["pid", "process", "session", "phase", "operation", "wall_s", "overhead_s",
           "overhead_pct"]


def operation_overhead(ops: pd.DataFrame, costs_ns: dict[str, float]) -> pd.DataFrame:
    """One row per row of ``ops`` (Analysis.operations) that is an operation (not the
    start-up or unannotated time): its book-keeping (seconds, over its subtree) and that
    as a % of its wall time."""
    if not len(ops) or not costs_ns:
        return pd.DataFrame(columns=COLUMNS)
    own = np.zeros(len(ops))
    for col, kind in COUNTED:
        if col in ops:
            own += ops[col].to_numpy(np.float64) * float(costs_ns.get(kind, 0.0) or 0.0)
    own /= 1e9
    rows: list[dict[str, Any]] = []
    keys = list(zip(ops["pid"], ops["session"], ops["phase"], strict=True))
    names = ops["operation"].astype(str).tolist()
    by_group: dict[tuple[Any, ...], list[int]] = {}
    for i, k in enumerate(keys):
        by_group.setdefault(k, []).append(i)
    for i, (k, name) in enumerate(zip(keys, names, strict=True)):
        if name.startswith("("):  # (start-up), (unannotated): no annotation of theirs
            continue
        prefix = name + PATH_SEP
        sub = sum(own[j] for j in by_group[k] if names[j] == name
                  or names[j].startswith(prefix))
        wall = float(ops["wall_s"].iloc[i])
        rows.append({"pid": k[0], "process": ops["process"].iloc[i], "session": k[1],
                     "phase": k[2], "operation": name, "wall_s": wall, "overhead_s": sub,
                     "overhead_pct": 100.0 * sub / wall if wall > 0 else np.nan})
    return pd.DataFrame(rows, columns=COLUMNS)


def worst(per_op: pd.DataFrame, ops: pd.DataFrame) -> dict[str, Any] | None:
    """The operation rlscope inflated most, among those with MIN_WALL_PCT or more of
    their process's time after its start-up (None: no such operation)."""
    if not len(per_op):
        return None
    after_startup: dict[tuple[Any, Any], float] = {}
    for (pid, session), g in ops.groupby(["pid", "session"], sort=False):
        pct = g["wall_pct"].to_numpy(np.float64)
        ok = np.flatnonzero(pct > 0)
        if not len(ok):
            continue
        covered = float(g["wall_s"].iloc[ok[0]]) * 100.0 / float(pct[ok[0]])
        startup = float(g.loc[g["operation"] == STARTUP, "wall_s"].sum())
        after_startup[(pid, session)] = covered - startup
    total = np.array([after_startup.get((p, n), np.nan) for p, n in
                      zip(per_op["pid"], per_op["session"], strict=True)])
    with np.errstate(divide="ignore", invalid="ignore"):
        share = 100.0 * per_op["wall_s"].to_numpy(np.float64) / total
    big = per_op[(share >= MIN_WALL_PCT)
                 & np.isfinite(per_op["overhead_pct"].to_numpy(np.float64))]
    if not len(big):
        return None
    row = big.loc[big["overhead_pct"].idxmax()]
    return {k: row[k] for k in ("pid", "process", "phase", "operation", "overhead_pct")}
