"""Vector environments in lock-step: per env step times, the barrier wait of every vector
step, the straggler, IPC overhead, the Sampling / Optimizing table and projections
(``rls-analyze lockstep``; definitions in docs/multiprocess.md).

Input is what rlscope.integrations.vecenv records: in the process holding a vector env,
each vector step as an ENV_STEP pair with env index -1 named after the vector env (its
wait part a WAIT_CALL ``<class>.step_wait``), vector resets likewise; every env's own
steps and resets with its env index, in its worker (metadata format.META_VECENV names the
vector env it serves) or, for the sequential classes, nested in the vector step. An env
event belongs to the vector step whose interval contains its start: every process of a
host reads the same CLOCK_MONOTONIC, and a worker can only start an env step after the
actions were sent and must end it before the result is received. A step command that
also resets (SB3 auto-reset, gymnasium's next-step autoreset) counts both toward that
vector step. A barrier over Ray workers (RLlib's EnvRunnerGroup: rlscope.integrations.rllib)
is announced with a ``key`` its workers record instead of the holder's pid, and its
events are told from the workers' own vector envs' by name. Pure data: no rendering here
(rlscope.reporters.lockstep).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlscope.analysis.processes import roles
from rlscope.trace import format as fmt
from rlscope.trace.data import EnvEvents, Events, Header, Trace

OPTIMIZING_OPS = ("backprop",)  # the SB3 integration's train(); rlscope's usual name
INFERENCE_OPS = ("inference",)
_WAIT_SUFFIXES = (".step_wait", ".reset_wait")
BATCH_FRAGMENTS = (8, 64)  # vector steps between barriers in the batched projection
ENVS_PER_WORKER = (2, 4, 8)


@dataclass
class Intervals:
    """Begin and end times (ns) of intervals, with the thread and name (string id) of
    each."""

    begin: np.ndarray
    end: np.ndarray
    thread: np.ndarray
    name: np.ndarray  # string ids

    @staticmethod
    def empty() -> Intervals:
        z = np.zeros(0, np.int64)
        return Intervals(z, z, z, z)


@dataclass
class ProcessEvents:
    """What the lock-step analysis needs of one process."""

    pid: int
    process: str
    strings: list[str]
    metadata: dict[str, Any]
    env: EnvEvents
    ops: Intervals  # outermost inference / optimizing operations
    waits: Intervals  # the vector envs' step_wait / reset_wait blocking calls

    def ids(self, predicate: Any) -> np.ndarray:
        return np.array([i for i, s in enumerate(self.strings) if predicate(s)], np.int64)


# -- reading ---------------------------------------------------------------------------

def _wanted_op(s: str) -> bool:
    return s in OPTIMIZING_OPS or s in INFERENCE_OPS


def _wanted_wait(s: str) -> bool:
    return s.endswith(_WAIT_SUFFIXES)


def _pairs(time: np.ndarray, thread: np.ndarray, kind: np.ndarray, name: np.ndarray,
           begin: int, end: int, outermost: bool) -> tuple[Intervals, np.ndarray]:
    """Intervals from begin/end events per (thread, name), in time order per thread, and
    the position of each interval's begin event in the input.

    ``outermost``: nested pairs of the same name merge into the outer one (operations);
    otherwise each begin pairs with an end right after it, so a begin whose end was lost
    (a killed process) is skipped rather than swallowing what follows (env events).
    """
    sel = np.flatnonzero((kind == begin) | (kind == end))
    if not len(sel):
        return Intervals.empty(), np.zeros(0, np.int64)
    t, th, nm = time[sel], thread[sel].astype(np.int64), name[sel].astype(np.int64)
    o = np.lexsort((np.arange(len(sel)), t, nm, th))  # stable in time per (thread, name)
    sel, t, th, nm = sel[o], t[o], th[o], nm[o]
    is_b = kind[sel] == begin
    first = np.r_[True, (th[1:] != th[:-1]) | (nm[1:] != nm[:-1])]
    if outermost:
        group = np.cumsum(first)
        step = np.where(is_b, 1, -1)
        depth = np.empty(len(t), np.int64)
        starts = np.flatnonzero(first)
        for g0, g1 in zip(starts, np.r_[starts[1:], len(t)], strict=True):  # few groups
            dg = np.cumsum(step[g0:g1])
            depth[g0:g1] = dg - np.minimum(np.minimum.accumulate(dg), 0)  # stray ends
        prev = np.r_[0, depth[:-1]]
        prev[first] = 0
        b = np.flatnonzero(is_b & (prev == 0) & (depth == 1))
        e = np.flatnonzero(~is_b & (depth == 0) & (prev > 0))
        j = np.searchsorted(e, b)
        ok = j < len(e)
        b, j = b[ok], j[ok]
        ok = group[e[j]] == group[b]
        b, en = b[ok], e[j[ok]]
    else:
        b = np.flatnonzero(is_b & np.r_[~is_b[1:] & ~first[1:], False])
        en = b + 1
    return Intervals(t[b], t[en], th[b], nm[b]), sel[b]


def _env_pairs(env: EnvEvents, reset: bool) -> tuple[Intervals, np.ndarray]:
    """(intervals, env index of each) of a process's env steps or resets."""
    kb, ke = ((fmt.ENV_RESET_BEGIN, fmt.ENV_RESET_END) if reset
              else (fmt.ENV_STEP_BEGIN, fmt.ENV_STEP_END))
    iv, pos = _pairs(env.time_ns, env.thread, env.kind, env.name, kb, ke, outermost=False)
    return iv, env.index[pos].astype(np.int64)


def _process(pid: int, process: str, strings: list[str], metadata: dict[str, Any],
             env: EnvEvents, time: np.ndarray, thread: np.ndarray, kind: np.ndarray,
             name: np.ndarray) -> ProcessEvents:
    ops, _ = _pairs(time, thread, kind, name, fmt.OPERATION_BEGIN, fmt.OPERATION_END, True)
    waits, _ = _pairs(time, thread, kind, name, fmt.WAIT_CALL_BEGIN, fmt.WAIT_CALL_END,
                      False)
    return ProcessEvents(pid, process, strings, metadata, env, ops, waits)


def _label(header: Header, metadata: dict[str, Any]) -> str:
    """The process's name: a Ray worker's by what it runs, else its program's."""
    if fmt.META_RAY in metadata:
        return roles.display_name(header.argv, metadata)
    return header.process_name


def from_trace(trace: Trace, infer: str = "auto") -> list[ProcessEvents]:
    """The processes of a trace already read (rlscope.trace.reader.read_trace), with the
    operations inferred where none is recorded (rlscope.analysis.inferred)."""
    from rlscope.analysis import inferred

    out = []
    for p in trace.processes:
        p = inferred.apply(p, infer)
        ev = p.events
        op_ids = [i for i, s in enumerate(p.strings) if _wanted_op(s) or _wanted_wait(s)]
        keep = np.isin(ev.name, op_ids) & np.isin(
            ev.kind, (fmt.OPERATION_BEGIN, fmt.OPERATION_END, fmt.WAIT_CALL_BEGIN,
                      fmt.WAIT_CALL_END))
        out.append(_process(p.pid, _label(p.header, p.metadata), p.strings, p.metadata, p.env,
                            ev.time_ns[keep], ev.thread[keep], ev.kind[keep],
                            ev.name[keep]))
    return out


def read(directory: str | os.PathLike[str], warnings: list[str] | None = None,
         infer: str = "auto") -> list[ProcessEvents]:
    """Read only what the analysis needs from each Python trace file of a directory, a
    chunk at a time: env events, metadata, and the operations and waits it names (with
    the operations inferred where none is recorded: rlscope.analysis.inferred)."""
    from rlscope.analysis import inferred
    from rlscope.trace.cuda_reader import SOURCE as SOURCE_CUDA
    from rlscope.trace.reader import trace_files
    from rlscope.trace.records import iter_chunks, read_header, string_table

    _, _, files = trace_files(directory)
    kinds = np.array([fmt.OPERATION_BEGIN, fmt.OPERATION_END, fmt.WAIT_CALL_BEGIN,
                      fmt.WAIT_CALL_END])
    out = []
    for f in files:
        header, _ = read_header(f)
        if header.source == SOURCE_CUDA:
            continue
        strings: dict[int, str] = {0: ""}
        metadata: dict[str, Any] = {}
        env: list[EnvEvents] = []
        kept: list[tuple[np.ndarray, ...]] = []
        wanted: list[int] = []
        collector = inferred.Collector()
        for c in iter_chunks(Path(f), warnings):
            strings.update(c.strings)
            if infer != "off":
                collector.add(c.events, c.strings)
            metadata.update(c.metadata)
            wanted += [i for i, s in c.strings.items() if _wanted_op(s) or _wanted_wait(s)]
            if len(c.env):
                env.append(c.env)
            ev = c.events
            if wanted and len(ev):
                m = np.isin(ev.kind, kinds) & np.isin(ev.name, wanted)
                if m.any():
                    kept.append((ev.time_ns[m], ev.thread[m], ev.kind[m], ev.name[m]))
        table = string_table(strings)
        plan = inferred.plan(collector, table, infer)
        if plan is not None:  # the inferred operations (all named inference or backprop)
            table = plan.strings
            ev = plan.whole(Events(*(np.concatenate([k[i] for k in kept]) if kept
                                     else np.zeros(0, np.int64) for i in range(4))))
            kept = [(ev.time_ns, ev.thread, ev.kind, ev.name)]
        cols = [np.concatenate([k[i] for k in kept]) if kept else np.zeros(0, np.int64)
                for i in range(4)]
        out.append(_process(header.pid, _label(header, metadata), table,
                            metadata, EnvEvents.concat(env), *cols))
    return out


# -- interval arithmetic ---------------------------------------------------------------

def _union(b: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted intervals covering the union."""
    if not len(b):
        return b, e
    o = np.argsort(b, kind="stable")
    b, e = b[o], np.maximum.accumulate(e[o])
    start = np.r_[True, b[1:] > e[:-1]]
    gi = np.cumsum(start) - 1
    ends = np.zeros(int(gi[-1]) + 1, e.dtype)
    np.maximum.at(ends, gi, e)
    return b[start], ends


def _overlap(b: np.ndarray, e: np.ndarray, b2: np.ndarray, e2: np.ndarray) -> int:
    """Total overlap (ns) of two sets of disjoint sorted intervals."""
    if not len(b) or not len(b2):
        return 0
    total = 0
    # Each interval of the first set against the second's (both disjoint and sorted).
    lo = np.searchsorted(e2, b, side="right")
    hi = np.searchsorted(b2, e, side="left")
    for i in np.flatnonzero(hi > lo).tolist():
        s = slice(lo[i], hi[i])
        total += int(np.maximum(0, np.minimum(e2[s], e[i]) - np.maximum(b2[s], b[i])).sum())
    return total


def straggler_min_share(n: int) -> float:
    """The share of the loss an env must cause to be called the straggler: halfway
    between an even share (1/n) and all of it."""
    return (1.0 + 1.0 / n) / 2.0


def _length(b: np.ndarray, e: np.ndarray) -> int:
    return int((e - b).sum())


# -- results ---------------------------------------------------------------------------

@dataclass
class VectorEnv:
    """One vector env: its envs' step times and, per vector step, the barrier."""

    pid: int  # the process holding it
    process: str
    name: str  # e.g. SubprocVecEnv#1
    cls: str
    num_envs: int
    workers: bool  # envs in worker processes (False: stepped one after another in place)
    vector_steps: int  # recorded vector steps
    complete_steps: int  # ... with every env's events found (the ones measured below)
    vector_resets: int
    step_s: float  # main-process time of the complete vector steps
    send_s: float  # ... of which sending (step start to the start of the wait); nan: unknown
    wait_s: float  # ... and waiting for the results; nan: no wait recorded
    reset_s: float  # main-process time in vector resets
    env_mean_s: float  # sum over vector steps of the mean env busy time
    env_sum_s: float  # ... of the total over envs
    slowest_s: float  # ... of the slowest env's busy time
    lockstep_loss_s: float  # sum of (slowest - mean): wall time lost to the barrier
    idle_env_s: float  # sum over steps and envs of (slowest - env): env time spent waiting
    overhead_s: float  # step_s - slowest_s (workers) or - env_sum_s (sequential)
    straggler: int | None  # env that causes most of the loss, when it stands out
    straggler_share: float  # the largest share of the loss one env causes
    envs: pd.DataFrame  # one row per env (ENV_COLUMNS)
    projections: pd.DataFrame  # PROJECTION_COLUMNS
    step_times: dict[int, np.ndarray] = field(repr=False)  # env -> each step's seconds
    per_step: pd.DataFrame = field(repr=False)  # one row per complete vector step
    busy: np.ndarray = field(repr=False)  # complete steps x envs: each env's busy seconds
    sampling_s: float = float("nan")  # the owning process's Sampling (SamplingTable)
    # Stepped one after another: the env stepped first in (nearly) every vector step, right
    # after other code (the policy), when there is one. Caches are cold there whichever
    # env it is, so its extra time is not all its own.
    first_env: int | None = None

    @property
    def loss_share(self) -> float:
        """Lock-step loss as a share of sampling time."""
        return self.lockstep_loss_s / self.sampling_s if self.sampling_s > 0 else float("nan")


ENV_COLUMNS = ["env", "pid", "name", "steps", "resets", "step_mean_ms", "step_p50_ms",
               "step_p99_ms", "step_max_ms", "reset_mean_ms", "busy_s", "slowest_steps",
               "slowest_pct", "barrier_wait_s", "loss_caused_s", "loss_caused_pct"]
PROJECTION_COLUMNS = ["design", "scenario", "step_s", "saved_s", "sampling_speedup",
                      "assumptions"]


@dataclass
class SamplingTable:
    """The seed talk's table for one process holding vector envs: Sampling (Reset,
    Inference, Step, other) and Optimizing, in seconds of that process's thread."""

    pid: int
    process: str
    sampling_s: float
    reset_s: float
    inference_s: float
    step_s: float
    other_s: float
    optimizing_s: float
    vector_steps: int

    @property
    def total_s(self) -> float:
        return self.sampling_s + self.optimizing_s


@dataclass
class Lockstep:
    vector_envs: list[VectorEnv]
    tables: list[SamplingTable]
    warnings: list[str]
    corrected: bool = False  # rlscope's own overhead removed (a calibration was applied)

    def envs(self) -> pd.DataFrame:
        frames = [v.envs.assign(vector_env=v.name, vector_pid=v.pid) for v in self.vector_envs]
        cols = ["vector_pid", "vector_env", *ENV_COLUMNS]
        return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(
            columns=cols)


# -- analysis --------------------------------------------------------------------------

def load(directory: str | os.PathLike[str], infer: str = "auto",
         correct: bool = False) -> Lockstep:
    """The lock-step analysis of a run directory. ``correct``: with a calibration.json
    there, rlscope's own overhead is removed first, as in the rest of the report (that
    reads the whole trace); otherwise only what this analysis needs is read, a chunk at a
    time, and the times are raw."""
    from rlscope.analysis.overhead.model import find_calibration

    warnings: list[str] = []
    cal = find_calibration(directory) if correct else None
    if cal is not None:
        from rlscope.analysis.overhead.correction import apply_correction
        from rlscope.trace.reader import read_trace

        result = analyze(from_trace(apply_correction(read_trace(directory), cal), infer))
        result.corrected = True
    else:
        result = analyze(read(directory, warnings, infer))
    result.warnings[:0] = warnings
    return result


def has_vector_envs(metadata: Iterable[dict[str, Any]]) -> bool:
    """Whether any process's metadata announces a vector env (cheap check for reports)."""
    return any(fmt.META_VECENVS in m for m in metadata)


def analyze(procs: list[ProcessEvents]) -> Lockstep:
    warnings: list[str] = []
    vecs: list[VectorEnv] = []
    tables: list[SamplingTable] = []
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
                v.projections = _projections(v, optimizing)
            tables.append(table)
            vecs += mine
    return Lockstep(vecs, tables, warnings)


def _vector_intervals(p: ProcessEvents, name: str, reset: bool) -> Intervals:
    iv, idx = _env_pairs(p.env, reset)
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
            iv, idx = _env_pairs(w.env, is_reset)
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
    if V and not complete.all():
        warnings.append(f"{name} (pid {p.pid}): {int((~complete).sum())} of {V} vector steps "
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
        step_s=_length(cb, ce) / 1e9, send_s=send_s, wait_s=wait_s,  # exact: integer ns
        reset_s=_length(resets.begin, resets.end) / 1e9, env_mean_s=float(mean.sum()),
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
    return _union(p.ops.begin[m], p.ops.end[m])


def _sampling_table(p: ProcessEvents, vecs: list[VectorEnv]
                    ) -> tuple[SamplingTable, tuple[np.ndarray, np.ndarray]]:
    """The table for process ``p``; also its Optimizing intervals."""
    steps = [_vector_intervals(p, v.name, False) for v in vecs]
    resets = [_vector_intervals(p, v.name, True) for v in vecs]
    threads = np.concatenate([iv.thread for iv in steps + resets])
    thread = int(np.bincount(threads).argmax())
    sb, se = _union(np.concatenate([iv.begin for iv in steps]),
                    np.concatenate([iv.end for iv in steps]))
    rb, re = _union(np.concatenate([iv.begin for iv in resets]),
                    np.concatenate([iv.end for iv in resets]))
    w0 = min(int(x.min()) for x in (sb, rb) if len(x))
    w1 = max(int(x.max()) for x in (se, re) if len(x))
    window = _serving(p, thread) or (np.array([w0]), np.array([w1]))
    ob, oe = _thread_ops(p, OPTIMIZING_OPS, thread)
    ib, ie = _thread_ops(p, INFERENCE_OPS, thread)
    sampling = _length(*window) - _overlap(ob, oe, *window)
    inference = _overlap(ib, ie, *window) - _overlap(ib, ie, ob, oe)
    step, reset = _length(sb, se), _length(rb, re)
    other = max(sampling - step - reset - inference, 0)
    return SamplingTable(p.pid, p.process, sampling / 1e9, reset / 1e9, inference / 1e9,
                         step / 1e9, other / 1e9, _length(ob, oe) / 1e9,
                         sum(v.vector_steps for v in vecs)), (ob, oe)


def _serving(p: ProcessEvents, thread: int) -> tuple[np.ndarray, np.ndarray] | None:
    """A Ray worker's sampling windows (its ``sample()`` calls) on ``thread``: between
    them it waits for the driver, which is not sampling."""
    name = group_event(p)
    if name is None or name not in p.strings:
        return None
    iv, idx = _env_pairs(p.env, False)
    m = (iv.name == p.strings.index(name)) & (idx >= 0) & (iv.thread == thread)
    return _union(iv.begin[m], iv.end[m]) if m.any() else None


def _projections(v: VectorEnv, optimizing: tuple[np.ndarray, np.ndarray]) -> pd.DataFrame:
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
