"""What limits the run across its processes, before the per-operation verdicts: IPC and
scheduling in vector steps, CPU oversubscription, the lock-step loss, pool stragglers and
one start-up entry, each with its evidence, a remedy and a bound computed from the trace
(docs/analysis.md, "Diagnosis > The run")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rlscope.analysis.diagnosis.operations import Verdict
from rlscope.analysis.diagnosis.oversubscription import oversubscription
from rlscope.analysis.diagnosis.verdict import RunVerdict, in_process, library
from rlscope.analysis.engine.paths import PATH_SEP, STARTUP
from rlscope.analysis.processes import tasks as pool_tasks

IPC_SHARE = 0.5  # IPC/scheduling holds at least this share of a vector env's step time
LOSS_SHARE = 0.10  # lock-step loss at least this share of sampling
MIN_RUN_SHARE = 0.05  # start-up: at least this share of the run's wall time


def run_wall(tree: pd.DataFrame) -> float:
    """The run's wall time: first process start to last process end (process tree)."""
    return float(tree["end_s"].max() - tree["start_s"].min()) if len(tree) else 0.0


def run_cores(run: dict[str, Any], samples: Any = None) -> tuple[int | None, str]:
    """The run's core count: the sampler's (cores it read from /proc/stat on the run's
    machine), else run.json's host.cpus; never the analysing machine's."""
    if samples is not None and len(getattr(samples, "core_index", ())):
        return len(set(samples.core_index.tolist())), "sampler, /proc/stat"
    cpus = (run.get("host") or {}).get("cpus")
    if cpus:
        return int(cpus), "run.json host.cpus"
    return None, ""


def _ms(s: float, steps: int) -> str:
    return f"{1e3 * s / max(steps, 1):.2f} ms"


def _ipc(v: Any, cores: int | None, wall: float) -> RunVerdict | None:
    """IPC/scheduling against env work in a vector env's steps (lock-step table)."""
    if not v.workers or v.step_s <= 0 or v.overhead_s < IPC_SHARE * v.step_s:
        return None
    n = int(v.num_envs)
    over = cores is not None and n + 1 > cores
    inproc = v.step_s - v.env_sum_s  # the sequential projection's saving
    k = v.projections[v.projections["design"] == "k envs per worker"] \
        if len(v.projections) else v.projections
    best = k.loc[k["saved_s"].idxmax()] if len(k) else None
    saved, how, scenario = inproc, "in-process", ""
    if inproc <= 0 and best is not None:  # envs heavier than the IPC: keep the workers
        saved, how, scenario = float(best["saved_s"]), "k", str(best["scenario"])
    if saved <= 0:
        return None
    rv = RunVerdict("ipc", f"{v.name} ({v.cls}, in {v.process}) is bound by IPC/scheduling"
                    + (f", oversubscribed: {n} worker processes and the main process on "
                       f"{cores} cores" if over else "")
                    + f": {100 * v.overhead_s / v.step_s:.0f}% of its vector-step time, "
                    "against its envs' work", subject=v.name)
    rv.evidence.append(f"lock-step table: IPC/scheduling {v.overhead_s:.3g} s of "
                       f"{v.step_s:.3g} s vector-step time; env work {v.env_mean_s:.3g} s "
                       f"(mean env per step), {v.env_sum_s:.3g} s all envs one after "
                       f"another; {v.complete_steps} vector steps")
    rv.evidence.append(f"per vector step: IPC/scheduling {_ms(v.overhead_s, v.complete_steps)}"
                       f", one env's step {_ms(v.env_mean_s, v.complete_steps)}")
    rule = ("rule: worker processes pay off only when an env's step costs more than the "
            "IPC round trip per vector step, and with at most one worker per core beside "
            "the main process" + (f" (here {n} workers, {cores} cores)" if cores else ""))
    if how == "in-process":
        rv.remedy = (f"step the envs in the main process: {in_process(v.cls)} instead of "
                     f"{v.cls}" + (", or fewer worker processes than cores" if over else "")
                     + (f"; keeping the workers, more envs per each (lock-step projection "
                        f"'{best['scenario']}' saves {float(best['saved_s']):.3g} s)"
                        if best is not None and float(best["saved_s"]) > 0 else "")
                     + f"; {rule}")
        rv.bound_of = ("vector-step time - all envs' work run one after another "
                       "(the sequential projection: no IPC, envs as measured)")
    else:
        rv.remedy = (f"fewer worker processes, several envs per worker ({scenario}; "
                     f"{v.cls} has one env per worker: fewer workers, more envs each, "
                     f"e.g. {in_process(v.cls)} inside each); {rule}")
        rv.bound_of = f"the lock-step projection '{scenario}'"
    rv.bound_s = saved
    rv.bound_share = saved / wall if wall > 0 else 0.0
    return rv


def _loss(v: Any, wall: float) -> RunVerdict | None:
    share = v.loss_share
    if share != share or share < LOSS_SHARE or v.lockstep_loss_s <= 0:
        return None
    rv = RunVerdict("lockstep-loss", f"{v.name} ({v.cls}) loses {100 * share:.0f}% of "
                    "sampling at the lock-step barrier (envs wait for the slowest)",
                    subject=v.name)
    rv.evidence.append(f"lock-step table: lock-step loss {v.lockstep_loss_s:.3g} s of "
                       f"{v.sampling_s:.3g} s sampling; slowest env {v.slowest_s:.3g} s vs "
                       f"mean env {v.env_mean_s:.3g} s summed over {v.complete_steps} "
                       "vector steps")
    if v.straggler is not None:
        rv.verdict += f"; env {v.straggler} is the straggler"
        rv.evidence.append(f"env {v.straggler} causes {100 * v.straggler_share:.0f}% of the "
                           "loss (lock-step env table)")
        fix = (f"make env {v.straggler} as fast as the others (its configuration, its "
               "episode resets, the core it runs on)")
        fixed = _without_straggler(v)
    else:
        fix = "even out the envs' step times (resets, episode lengths)"
    asyn = ("gymnasium AsyncVectorEnv with step_async/step_wait on the envs that are ready, "
            "or an asynchronous sampler (EnvPool, Sample Factory)"
            if library(v.cls) == "gymnasium" else
            "an asynchronous sampler (EnvPool, Sample Factory) or batched rollouts")
    rv.remedy = f"{fix}; or stop stepping in lock-step: {asyn}"
    if v.straggler is not None and fixed > 0:
        rv.bound_s = fixed
        rv.bound_of = (f"each vector step's slowest env minus its slowest env other than "
                       f"env {v.straggler}, summed (env {v.straggler} as fast as the next "
                       f"slowest); stepping without a barrier would save at most the loss, "
                       f"{v.lockstep_loss_s:.3g} s")
    else:
        rv.bound_s = v.lockstep_loss_s
        rv.bound_of = "the lock-step loss (the projection 'asynchronous: no barrier')"
    rv.bound_share = rv.bound_s / wall if wall > 0 else 0.0
    return rv


def _without_straggler(v: Any) -> float:
    """Seconds saved if the straggler stepped as fast as the slowest of the other envs,
    from each complete vector step's env busy times."""
    busy = np.asarray(v.busy, float)
    if busy.ndim != 2 or busy.shape[1] < 2 or v.straggler is None:
        return 0.0
    others = np.delete(busy, int(v.straggler), axis=1)
    return float(np.sum(busy.max(axis=1) - others.max(axis=1)))


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def _startup(tree: pd.DataFrame, processes: pd.DataFrame, ops: pd.DataFrame,
             main_pid: int | None, wall: float) -> RunVerdict | None:
    if "startup_s" not in processes or not len(tree):
        return None
    p = processes[processes["startup_s"] > 0][["pid", "startup_s", "imports_s"]]
    p = p.merge(tree[["pid", "start_s", "role"]].drop_duplicates("pid"), on="pid")
    if not len(p):
        return None
    iv = [(float(s), float(s + d)) for s, d in zip(p["start_s"], p["startup_s"], strict=True)]
    union = _union(iv)
    if wall <= 0 or union < MIN_RUN_SHARE * wall:
        return None
    many = len(p) > 1
    rv = RunVerdict("start-up", f"start-up: {union:.3g} s of the run's {wall:.3g} s before "
                    + (f"the processes' first operations ({len(p)} processes' start-ups, "
                       "overlapping, as one entry)" if many else "its first operation"),
                    recurring=False)
    rv.evidence.append(f"processes table: start-ups {float(p['startup_s'].sum()):.3g} s "
                       f"summed over {len(p)} processes, {union:.3g} s on the run clock "
                       f"(their union); imports {float(p['imports_s'].sum()):.3g} s summed")
    others = p[p["pid"] != main_pid]
    if main_pid is not None and main_pid in set(p["pid"]) and len(others):
        m = p[p["pid"] == main_pid].iloc[0]
        mine = ops[(ops["pid"] == main_pid) & ((ops["operation"] == STARTUP) | ops[
            "operation"].str.startswith(STARTUP + PATH_SEP))]
        waited = float(mine["waiting_s"].sum())
        ms, me = float(m["start_s"]), float(m["start_s"] + m["startup_s"])
        overlap = _union([(max(s, ms), min(e, me)) for s, e in
                          zip(others["start_s"], others["start_s"] + others["startup_s"],
                              strict=True) if min(e, me) > max(s, ms)])
        on_workers = min(waited, overlap)
        if on_workers > 0:
            rv.evidence.append(
                f"operations table: the main process waited {on_workers:.3g} s "
                f"({100 * on_workers / max(float(m['startup_s']), 1e-12):.0f}% of its "
                f"{float(m['startup_s']):.3g} s start-up) on its {len(others)} worker "
                f"processes' start-up (their imports {float(others['imports_s'].mean()):.3g}"
                " s each on average); its own imports "
                f"{float(m['imports_s']):.3g} s")
    rv.remedy = ("paid once per run: a longer run amortises it; "
                 + ("start fewer worker processes (each imports the same modules again, all "
                    "at once on the same cores), " if many else "")
                 + "import less at start (lazily, only what each process uses)")
    rv.bound_s = union
    rv.bound_share = union / wall
    rv.bound_of = "the start-ups' union on the run clock"
    return rv


def diagnose_run(tree: pd.DataFrame, processes: pd.DataFrame, ops: pd.DataFrame,
                 util: pd.DataFrame | None = None, lockstep: Any = None,
                 cores: int | None = None, cores_from: str = "",
                 tasks: pd.DataFrame | None = None,
                 extra: list[RunVerdict] | None = None,
                 outside_cpu_s: float | None = None) -> list[RunVerdict]:
    """What limits the run across its processes, before the per-operation verdicts:
    IPC/scheduling in vector steps, CPU oversubscription, the lock-step loss (per-step
    costs, largest bound first), then the run's start-up (one entry, paid once).
    ``tree``/``processes``/``ops``/``util``: Analysis.process_tree()/processes()/
    operations()/utilisation() (None: not sampled); ``lockstep``: the Lockstep result;
    ``cores``: run_cores(); ``tasks``: Analysis.tasks() (pool and executor tasks);
    ``extra``: verdicts made elsewhere, ordered in by their bound (the actor/learner
    iterations': rlscope.analysis.diagnosis.actors); ``outside_cpu_s``: CPU time of
    processes outside the run (utilisation.outside_cpu_s), to share out run-queue waits."""
    if not len(tree):
        return []
    wall = run_wall(tree)
    mains = tree[tree["role"] == "main"] if "role" in tree else tree.iloc[:0]
    main_pid = int(mains["pid"].iloc[0]) if len(mains) else (
        int(tree.sort_values("start_s")["pid"].iloc[0]))
    out: list[RunVerdict] = []
    for v in (lockstep.vector_envs if lockstep is not None else []):
        out += [r for r in (_ipc(v, cores, wall), _loss(v, wall)) if r is not None]
    o = oversubscription(tree, util, lockstep, cores, cores_from, main_pid, wall,
                         outside_cpu_s)
    if o is not None:
        out.append(o)
    if tasks is not None and len(tasks):
        out += _task_stragglers(tasks, wall)
    out += extra or []
    out.sort(key=lambda r: -r.bound_s)
    s = _startup(tree, processes, ops, main_pid, wall)
    if s is not None:
        out.append(s)
    return out


def _task_stragglers(tasks: pd.DataFrame, wall: float) -> list[RunVerdict]:
    """A pool function whose slowest task stands out (rlscope.analysis.processes.tasks's
    rule): the pool waits for it. The bound: the call's makespan in the recorded order
    minus the makespan with the slow task handed out first, both simulated from the
    recorded task times (tasks.first_gain)."""
    out = []
    for s in pool_tasks.stragglers(pool_tasks.task_table(tasks)):
        now, first, workers = pool_tasks.first_gain(tasks, s["function"], s["call"])
        bound = max(now - first, 0.0)
        out.append(RunVerdict(
            "straggler-task", f"pool straggler: {s['text']}",
            [f"tasks table: {s['function']}: {s['tasks']} tasks, median "
             f"{s['median_s']:.3f} s, slowest {s['seconds']:.3f} s (item {s['index']})",
             f"schedule of that call on its {workers} worker(s), from the recorded task "
             f"times: {now:.3f} s in the order given, {first:.3f} s with item "
             f"{s['index']} handed out first"],
            "hand the slow item out first (submit it first, or order the iterable by "
            "expected cost; imap_unordered with chunksize=1) so the other workers are not "
            "left idle behind it, or split its work", bound, bound / wall if wall > 0 else 0.0,
            "the call's simulated makespan in the given order minus with the slow task "
            "first (chunksize 1, dispatch cost ignored)", subject=str(s["function"])))
    return out


def refine(verdicts: list[Verdict], run_verdicts: list[RunVerdict],
           lockstep: Any = None) -> list[Verdict]:
    """The per-operation verdicts under the run-level ones: no per-process start-up
    (the run-level start-up entry holds them); for the operation that steps a vector env
    (``simulation`` in the process holding it), no "vectorise across envs": dropped when
    the lock-step analysis explains it (an IPC verdict), else a remedy for envs already
    vectorised."""
    vec = {v.pid: v for v in (lockstep.vector_envs if lockstep is not None else [])}
    explained = {r.subject for r in run_verdicts if r.kind == "ipc"}
    out = []
    for v in verdicts:
        if v.operation == STARTUP:
            continue
        ve = vec.get(v.pid)
        if ve is not None and v.operation == VECTOR_STEP_OP and v.bound == "Python":
            if ve.name in explained:
                continue
            v.remedy = (f"less Python per env step: the envs are already vectorised "
                        f"({ve.name}); a natively batched env (one call steps all envs, "
                        "numpy/jax) or cheaper env code (lock-step report: per-env step "
                        "times)")
        out.append(v)
    return out


VECTOR_STEP_OP = "simulation"  # the operation the SB3 and gymnasium integrations open
