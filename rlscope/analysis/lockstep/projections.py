"""Projections: the measured vector steps' time under other designs (asynchronous, batched
rollouts, k envs per worker; for sequential vector envs, worker processes), each row with
its assumptions (docs/multiprocess.md#projections)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rlscope.analysis.lockstep.model import PROJECTION_COLUMNS, VectorEnv

BATCH_FRAGMENTS = (8, 64)  # vector steps between barriers in the batched projection
ENVS_PER_WORKER = (2, 4, 8)


def projections(v: VectorEnv, optimizing: tuple[np.ndarray, np.ndarray]) -> pd.DataFrame:
    """Vector stepping time of the measured steps under other designs (PROJECTION_COLUMNS).
    Each row states its assumptions."""
    B, T = v.busy, v.per_step["step_s"].to_numpy()
    V = len(B)
    rows: list[dict[str, Any]] = []
    if not V:
        return pd.DataFrame(rows, columns=PROJECTION_COLUMNS)
    now = float(T.sum())
    slowest = B.max(axis=1)

    def row(design: str, scenario: str, projected: float, assumptions: str) -> None:
        saved = now - projected
        rest = v.sampling_s - saved
        rows.append({"design": design, "scenario": scenario, "step_s": projected,
                     "saved_s": saved,
                     "sampling_speedup": v.sampling_s / rest if rest > 0 else np.nan,
                     "assumptions": assumptions})

    # No barrier: env i yields V samples in its busy time b_i, all together N*V samples in
    # N / sum(1 / b_i) (the mean env when all are alike; a slow env yields fewer).
    per_env = B.sum(axis=0)
    free = float(B.shape[1] / (1 / per_env).sum()) if (per_env > 0).all() else float("nan")
    if not v.workers:
        same = ("a core per env; env step times as measured; IPC and scheduling not "
                "included; with no barrier every env steps at its own pace")
        row("worker processes", "one worker process per env, lock-step",
            float(slowest.sum()), same)
        if free == free:
            row("worker processes", "one worker process per env, no barrier", free, same)
        return pd.DataFrame(rows, columns=PROJECTION_COLUMNS)
    ipc = T - slowest  # per vector step: everything but the slowest env
    if free == free:
        row("asynchronous", "asynchronous: no barrier", free + float(ipc.sum()),
            "every env steps at its own pace and its samples are used as they come; env "
            "step times and IPC per step as measured")
    fragments: list[tuple[str, np.ndarray]] = [
        (f"{r} steps", np.arange(V) // r) for r in BATCH_FRAGMENTS if r < V]
    ob, _ = optimizing
    if len(ob):
        seg = np.searchsorted(ob, v.per_step["begin_ns"].to_numpy())
        if len(np.unique(seg)) > 1:
            per = int(np.median(np.bincount(seg)[np.unique(seg)]))
            fragments.append((f"one rollout (~{per} steps)", seg))
    for label, group in fragments:
        g = np.unique(group, return_inverse=True)[1]
        S = np.zeros((int(g.max()) + 1, B.shape[1]))
        np.add.at(S, g, B)
        row("batched rollouts", f"batched rollouts: barrier every {label}",
            float(S.max(axis=1).sum() + ipc.sum()),
            "workers run the policy on their envs and sync once per fragment; env step times "
            "as measured; IPC and inference per step unchanged")
    for k in ENVS_PER_WORKER:
        U = V // k
        if U < 2:
            continue
        G = B[:U * k].reshape(U, k, B.shape[1]).sum(axis=1)
        per_sample = (G.max(axis=1).sum() + U * ipc.mean()) / (U * k)
        row("k envs per worker", f"{k} envs per worker (same workers)",
            float(per_sample * V),
            "each worker steps its k envs one after another, each like k consecutive steps "
            "of its env; time for the same number of samples; IPC per vector step "
            "unchanged (k times the payload ignored); inference on k times larger batches "
            "not included; a core per worker")
    return pd.DataFrame(rows, columns=PROJECTION_COLUMNS)
