"""The barrier of each vector step: every env's events joined to the vector step that
holds them, each env's busy time, the slowest env, the time lost waiting for it, the
straggler, IPC overhead, and the Sampling / Optimizing table (docs/multiprocess.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from rlscope.analysis.intervals import Intervals, length, overlap, union
from rlscope.analysis.lockstep import batches
from rlscope.analysis.lockstep.model import (
    ENV_COLUMNS,
    PROJECTION_COLUMNS,
    Lockstep,
    SamplingTable,
    VectorEnv,
    straggler_min_share,
)
from rlscope.analysis.lockstep.projections import projections
from rlscope.analysis.lockstep.reader import (
    INFERENCE_OPS,
    OPTIMIZING_OPS,
    ProcessEvents,
    env_pairs,
)
from rlscope.trace import format as fmt


def has_vector_envs(metadata: Iterable[dict[str, Any]]) -> bool:
    """Whether any process's metadata announces a vector env (cheap check for reports)."""
    return any(fmt.META_VECENVS in m for m in metadata)


def analyze(procs: list[ProcessEvents]) -> Lockstep:
    warnings: list[str] = []
    vecs: list[VectorEnv] = []
    tables: list[SamplingTable] = []
    pools = [b for p in procs for b in batches.from_metadata(p.pid, p.process, p.metadata)]
    for p in procs:
        announced = p.metadata.get(fmt.META_VECENVS)
        if not isinstance(announced, list):
            continue
        mine = []
        for a in announced:
            if not isinstance(a, dict) or "name" not in a:
                continue
            key = a.get("key")  # what its workers record (a Ray job's EnvRunnerGroup)
            if not isinstance(key, dict):
                key = {"pid": p.pid, "name": a["name"]}
            workers = [w for w in procs if w.metadata.get(fmt.META_VECENV) == key]
            v = _vector_env(p, a, workers, warnings)
            if v is not None:
                mine.append(v)
        if mine:
            table, optimizing = _sampling_table(p, mine)
            for v in mine:
                v.sampling_s = table.sampling_s
                v.projections = projections(v, optimizing)
            tables.append(table)
            vecs += mine
    return Lockstep(vecs, tables, warnings, batches=pools)


def _vector_intervals(p: ProcessEvents, name: str, reset: bool) -> Intervals:
    iv, idx = env_pairs(p.env, reset)
    sid = p.strings.index(name) if name in p.strings else -1
    m = (iv.name == sid) & (idx == fmt.VECTOR_ENV_INDEX)
    o = np.argsort(iv.begin[m], kind="stable")
    return Intervals(iv.begin[m][o], iv.end[m][o], iv.thread[m][o], iv.name[m][o])


def group_event(p: ProcessEvents) -> str | None:
    """The name of the env events with which ``p`` serves a barrier of Ray workers
    (RLlib's EnvRunnerGroup: each ``sample()`` call), else None."""
    served = p.metadata.get(fmt.META_VECENV)
    if isinstance(served, dict) and "ray_job" in served and isinstance(served.get("name"), str):
        return str(served["name"])
    return None


def _env_intervals(sources: list[ProcessEvents], only: str | None = None
                   ) -> tuple[np.ndarray, ...]:
    """(env index, begin, end, is reset, pid, name) of every env step and reset; with
    ``only``, of the events of that name (a Ray barrier's), else of the others."""
    rows = []
    for w in sources:
        name = only if only is not None else group_event(w)
        sid = w.strings.index(name) if name is not None and name in w.strings else -1
        for is_reset in (False, True):
            iv, idx = env_pairs(w.env, is_reset)
            m = (idx >= 0) & ((iv.name == sid) if only is not None else (iv.name != sid))
            k = int(m.sum())
            names = np.array([w.process if only is not None else w.strings[i]
                              for i in iv.name[m].tolist()], object)  # a runner by its name
            rows.append((idx[m], iv.begin[m], iv.end[m], np.full(k, is_reset),
                         np.full(k, w.pid), names))
    if not rows:
        z = np.zeros(0, np.int64)
        return z, z, z, z.astype(bool), z, z.astype(object)
    return tuple(np.concatenate([r[i] for r in rows]) for i in range(6))


def _vector_env(p: ProcessEvents, a: dict[str, Any], workers: list[ProcessEvents],
                warnings: list[str]) -> VectorEnv | None:
    name, cls = str(a["name"]), str(a.get("class", "?"))
    n = max(int(a.get("num_envs", 0)), 0)
    in_workers = bool(a.get("workers", True))
    steps = _vector_intervals(p, name, False)
    resets = _vector_intervals(p, name, True)
    if not len(steps.begin) and not len(resets.begin):
        return None
    if in_workers and len(workers) < n:
        warnings.append(f"{name} (pid {p.pid}): the traces of {n - len(workers)} of its {n} "
                        "workers are missing; vector steps lack their envs")
    env_idx, eb, ee, is_reset, epid, ename = _env_intervals(
        workers if in_workers else [p], name if isinstance(a.get("key"), dict) else None)
    bad = (env_idx >= n)
    if bad.any():
        warnings.append(f"{name} (pid {p.pid}): {int(bad.sum())} env events with an index "
                        f"outside 0..{n - 1} are left out")
    # Join: the vector step or reset whose interval holds the env event's start.
    V = len(steps.begin)
    vb = np.r_[steps.begin, resets.begin]
    ve = np.r_[steps.end, resets.end]
    o = np.argsort(vb, kind="stable")
    j = np.searchsorted(vb[o], eb, side="right") - 1
    jj = np.maximum(j, 0)
    ok = (j >= 0) & (eb <= ve[o][jj]) if len(vb) else np.zeros(len(eb), bool)
    vec = np.where(ok, o[jj], -1) if len(vb) else np.full(len(eb), -1)
    in_step = (vec >= 0) & (vec < V) & ~bad
    width = max(n, 1)
    busy = np.zeros((V, width), np.int64)
    seen = np.zeros((V, width), bool)
    np.add.at(busy, (vec[in_step], env_idx[in_step]), (ee - eb)[in_step])
    seen[vec[in_step], env_idx[in_step]] = True
    complete = seen.all(axis=1) & (n > 0)
    # A sampled vector env (rlscope.integrations.vecenv) records its envs in some steps:
    # the others hold no env event and are not missing anything.
    partial = ~complete & seen.any(axis=1) if a.get("sampled") else ~complete
    if V and partial.any():
        warnings.append(f"{name} (pid {p.pid}): {int(partial.sum())} of {V} vector steps "
                        "lack some env's events and are left out of the barrier figures")
    B = busy[complete].astype(np.float64) / 1e9
    cb, ce = steps.begin[complete], steps.end[complete]
    T = (ce - cb).astype(np.float64) / 1e9
    send_s, wait_s = _send_wait(p, cls, cb, ce)
    if len(B):
        slowest, mean, total, arg = B.max(axis=1), B.mean(axis=1), B.sum(axis=1), \
            B.argmax(axis=1)
    else:
        slowest = mean = total = np.zeros(0)
        arg = np.zeros(0, np.int64)
    if in_workers:  # the barrier: every env waits for the slowest
        wait_each = slowest[:, None] - B
        caused = np.bincount(arg, weights=slowest - mean, minlength=width)
        loss, idle = float((slowest - mean).sum()), float(wait_each.sum())
        overhead = float((T - slowest).sum())
        barrier = wait_each.sum(axis=0)
    else:  # one after another, no barrier: an env costs its own time; above-mean time
        caused = np.maximum(B - mean[:, None], 0).sum(axis=0)
        loss = idle = 0.0
        overhead = float((T - total).sum())
        barrier = np.zeros(width)
    first_env = None if in_workers else _first_stepped(vec, env_idx, eb, in_step,
                                                        np.asarray(complete), width)
    straggler: int | None = None
    share = float("nan")
    if n > 1 and caused.sum() > 0:
        k = int(caused.argmax())
        share = float(caused[k] / caused.sum())
        # Named only when it stands out: with the loss spread evenly (seen: 4 alike
        # BipedalWalker envs at 19-30% each) no env is to blame.
        straggler = k if share >= straggler_min_share(n) else None
    slow_count = np.bincount(arg, minlength=width)
    step_times: dict[int, np.ndarray] = {}
    env_rows = []
    for i in range(n):
        mine = env_idx == i
        st = ((ee - eb)[mine & ~is_reset]).astype(np.float64) / 1e9
        rs = ((ee - eb)[mine & is_reset]).astype(np.float64) / 1e9
        step_times[i] = st
        pids = np.unique(epid[mine])
        q = np.percentile(st, [50, 99]) * 1e3 if len(st) else (np.nan, np.nan)
        env_rows.append({
            "env": i, "pid": int(pids[0]) if len(pids) == 1 else -1,
            "name": str(ename[mine][0]) if mine.any() else "",
            "steps": len(st), "resets": len(rs),
            "step_mean_ms": st.mean() * 1e3 if len(st) else np.nan,
            "step_p50_ms": q[0], "step_p99_ms": q[1],
            "step_max_ms": st.max() * 1e3 if len(st) else np.nan,
            "reset_mean_ms": rs.mean() * 1e3 if len(rs) else np.nan,
            "busy_s": float(B[:, i].sum()),
            "slowest_steps": int(slow_count[i]),
            "slowest_pct": 100.0 * slow_count[i] / len(B) if len(B) else np.nan,
            "barrier_wait_s": float(barrier[i]), "loss_caused_s": float(caused[i]),
            "loss_caused_pct": 100.0 * caused[i] / caused.sum() if caused.sum() > 0
            else np.nan})
    per_step = pd.DataFrame({"vector_step": np.flatnonzero(complete), "begin_ns": cb,
                             "step_s": T, "slowest_env": arg, "slowest_s": slowest,
                             "mean_s": mean, "sum_s": total})
    return VectorEnv(
        pid=p.pid, process=p.process, name=name, cls=cls, num_envs=n, workers=in_workers,
        vector_steps=V, complete_steps=int(complete.sum()), vector_resets=len(resets.begin),
        step_s=length(cb, ce) / 1e9, send_s=send_s, wait_s=wait_s,  # exact: integer ns
        reset_s=length(resets.begin, resets.end) / 1e9, env_mean_s=float(mean.sum()),
        env_sum_s=float(total.sum()), slowest_s=float(slowest.sum()), lockstep_loss_s=loss,
        idle_env_s=idle, overhead_s=overhead, straggler=straggler, straggler_share=share,
        envs=pd.DataFrame(env_rows, columns=ENV_COLUMNS),
        projections=pd.DataFrame(columns=PROJECTION_COLUMNS), step_times=step_times,
        per_step=per_step, busy=B, first_env=first_env)


FIRST_SHARE = 0.9  # an env is "stepped first" when it is in this share of vector steps


def _first_stepped(vec: np.ndarray, env_idx: np.ndarray, eb: np.ndarray, in_step: np.ndarray,
                   complete: np.ndarray, width: int) -> int | None:
    """The env whose step starts first in at least FIRST_SHARE of the complete vector
    steps, or None."""
    rows = np.flatnonzero(complete)
    if not len(rows):
        return None
    start = np.full((len(complete), width), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(start, (vec[in_step], env_idx[in_step]), eb[in_step])
    counts = np.bincount(start[rows].argmin(axis=1), minlength=width)
    k = int(counts.argmax())
    return k if counts[k] >= FIRST_SHARE * len(rows) else None


def _send_wait(p: ProcessEvents, cls: str, cb: np.ndarray, ce: np.ndarray
               ) -> tuple[float, float]:
    """Seconds sending and waiting over the given vector steps: the step_wait call that
    starts inside each one splits it; nan when a step has none (sequential classes)."""
    wait_ids = p.ids(lambda s: s == f"{cls}.step_wait")
    wb = np.sort(p.waits.begin[np.isin(p.waits.name, wait_ids)])
    if not len(wb) or not len(cb):
        return float("nan"), float("nan")
    k = np.searchsorted(wb, cb)
    has = k < len(wb)
    has[has] = wb[k[has]] <= ce[has]
    if not has.all():
        return float("nan"), float("nan")
    w0 = wb[k]
    return float((w0 - cb).sum()) / 1e9, float((ce - w0).sum()) / 1e9


def _thread_ops(p: ProcessEvents, names: tuple[str, ...], thread: int
                ) -> tuple[np.ndarray, np.ndarray]:
    ids = p.ids(lambda s: s in names)
    m = np.isin(p.ops.name, ids) & (p.ops.thread == thread)
    return union(p.ops.begin[m], p.ops.end[m])


def _sampling_table(p: ProcessEvents, vecs: list[VectorEnv]
                    ) -> tuple[SamplingTable, tuple[np.ndarray, np.ndarray]]:
    """The table for process ``p``; also its Optimizing intervals."""
    steps = [_vector_intervals(p, v.name, False) for v in vecs]
    resets = [_vector_intervals(p, v.name, True) for v in vecs]
    threads = np.concatenate([iv.thread for iv in steps + resets])
    thread = int(np.bincount(threads).argmax())
    sb, se = union(np.concatenate([iv.begin for iv in steps]),
                    np.concatenate([iv.end for iv in steps]))
    rb, re = union(np.concatenate([iv.begin for iv in resets]),
                    np.concatenate([iv.end for iv in resets]))
    w0 = min(int(x.min()) for x in (sb, rb) if len(x))
    w1 = max(int(x.max()) for x in (se, re) if len(x))
    window = _serving(p, thread) or (np.array([w0]), np.array([w1]))
    ob, oe = _thread_ops(p, OPTIMIZING_OPS, thread)
    ib, ie = _thread_ops(p, INFERENCE_OPS, thread)
    sampling = length(*window) - overlap(ob, oe, *window)
    inference = overlap(ib, ie, *window) - overlap(ib, ie, ob, oe)
    step, reset = length(sb, se), length(rb, re)
    other = max(sampling - step - reset - inference, 0)
    return SamplingTable(p.pid, p.process, sampling / 1e9, reset / 1e9, inference / 1e9,
                         step / 1e9, other / 1e9, length(ob, oe) / 1e9,
                         sum(v.vector_steps for v in vecs)), (ob, oe)


def _serving(p: ProcessEvents, thread: int) -> tuple[np.ndarray, np.ndarray] | None:
    """A Ray worker's sampling windows (its ``sample()`` calls) on ``thread``: between
    them it waits for the driver, which is not sampling."""
    name = group_event(p)
    if name is None or name not in p.strings:
        return None
    iv, idx = env_pairs(p.env, False)
    m = (iv.name == p.strings.index(name)) & (idx >= 0) & (iv.thread == thread)
    return union(iv.begin[m], iv.end[m]) if m.any() else None
