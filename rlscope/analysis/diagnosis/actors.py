"""The actor/learner verdict (docs/analysis.md, "Diagnosis > Training iterations"): which
part of the driver's training iterations took the time (rlscope.analysis.actors), the
role to scale and by how much, with a bound computed from the trace.

Over the steady iterations (all but the first when there are at least three), the part
of the iterations that is longest (sampling, learner update, weight sync, the driver's
own work) is the critical one when it holds at least :data:`CRITICAL_SHARE` of their wall
time. Sampling: the env runners' ``sample()`` work on the critical path (the slowest
runner's, per iteration) splits over twice the runners, as far as the cores allow (the
driver waits while they sample, so every core is theirs; a runner busy a share *c* of its
``sample()`` time needs *c* of a core): speed-up ``min(2N, cores/c) / min(N, cores/c)``;
the rounds' remaining time (IPC, scheduling) and every other part stay. Learner: the
update splits over twice the learners likewise, a learner using *u* cores while it
updates (rls-prof's /proc samples of the training phase over rlscope's busy time).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rlscope.analysis.actors import Iterations
from rlscope.analysis.diagnosis.verdict import RunVerdict

CRITICAL_SHARE = 0.4  # the longest part holds at least this share of the iterations
MIN_CPU = 0.05  # a runner's CPU share of its sample() time is taken as at least this
# What a runner's sample() runs (rlscope.integrations.rllib): its busy time is theirs.
SAMPLE_OPS = ("inference", "simulation", "connectors")


def _pct(x: float, w: float) -> str:
    return f"{100 * x / w:.0f}%" if w > 0 else "n/a"


def _n(cores: float | None) -> str:
    """The cores counted: the run's (whole), or those other processes left it (free)."""
    if cores is None:
        return "?"
    return f"{cores:.0f}" if float(cores).is_integer() else f"{cores:.2f} free"


def _speedup(n_old: int, n_new: int, cores: float | None, per: float) -> float:
    """How much faster work split over ``n_new`` processes runs than over ``n_old``, each
    needing ``per`` cores while it works, on ``cores`` cores (None: unlimited)."""
    cap = float("inf") if cores is None else cores / max(per, MIN_CPU)
    if cap <= 0:  # no core left to the run: more processes cannot run faster
        return 1.0
    return min(n_new, cap) / min(max(n_old, 1), cap)


def runner_cpu_share(ops: pd.DataFrame | None, pids: list[int], sample_s: float) -> float:
    """The env runners' CPU share of their sample() time: the self time of the
    operations sample() runs (SAMPLE_OPS) that is not waiting, over their sample()
    time."""
    if ops is None or not len(ops) or sample_s <= 0 or not pids:
        return 1.0
    top = ops["operation"].astype(str).str.split(" > ").str[0]
    o = ops[ops["pid"].isin(pids) & top.isin(SAMPLE_OPS)]
    busy = float((o["self_s"] - o["waiting_s"]).sum())
    return min(max(busy / sample_s, MIN_CPU), 1.0)


def free_cores(samples: Any, cores: int | None, window: tuple[int, int]) -> float | None:
    """The cores the run had to itself over ``window`` (ns): the cores less what the
    machine's other processes used meanwhile (rls-prof's /proc/stat and /proc/<pid>
    samples: the cores' busy time minus the run's processes' CPU time); None when not
    sampled."""
    if cores is None or samples is None or not len(getattr(samples, "core_time_ns", ())) \
            or not len(samples.proc_time_ns):
        return None
    b, e = window
    if e <= b:
        return None

    def used(time: np.ndarray, key: np.ndarray, cum: np.ndarray) -> float:
        total = 0.0
        for k in np.unique(key).tolist():
            m = key == k
            t, c = time[m], cum[m].astype(np.float64)
            if len(t) < 2 or t[-1] <= b or t[0] >= e:
                continue
            o = np.argsort(t, kind="stable")
            lo, hi = np.interp([max(b, t[o][0]), min(e, t[o][-1])], t[o], c[o])
            total += hi - lo
        return total

    machine = used(samples.core_time_ns, samples.core_index, samples.core_busy_ns)
    own = used(samples.proc_time_ns, samples.proc_pid, samples.proc_cpu_ns)
    return max(cores - max(machine - own, 0.0) / (e - b), 0.0)


def learner_cores(util: pd.DataFrame | None, pids: list[int], phase: str = "training"
                  ) -> float:
    """The cores a learner used while it updated: /proc's sampled CPU over rlscope's busy
    time in the training phase (several threads: more than one); 1 when not sampled."""
    if util is None or not len(util) or "sampled_cpu_s" not in util:
        return 1.0
    u = util[util["pid"].isin(pids) & (util["cpu_samples"] > 0)]
    ph = u[u["phase"] == phase]
    u = ph if len(ph) else u
    rec, smp = float(u["rlscope_cpu_s"].sum()), float(u["sampled_cpu_s"].sum())
    return max(smp / rec, 1.0) if rec > 0 else 1.0


def actor_verdicts(it: Iterations, cores: int | None, ops: pd.DataFrame | None = None,
                   util: pd.DataFrame | None = None, run_wall: float = 0.0,
                   samples: Any = None) -> list[RunVerdict]:
    """The verdict on the iterations' critical part, or none when no part holds
    CRITICAL_SHARE of them. ``ops``/``util``: Analysis.operations()/utilisation();
    ``run_wall``: the run's wall time (the bound's share); ``samples``: rls-prof's
    samples (Analysis.samples): the cores other processes left the run."""
    t = it.steady()
    wall = float(t["wall_s"].sum())
    if wall <= 0:
        return []
    parts = {"sampling": float(t["sampling_s"].sum()), "learner": float(t["learner_s"].sum()),
             "sync": float(t["sync_s"].sum()), "driver": float(t["driver_s"].sum())}
    crit = max(parts, key=lambda k: parts[k])
    if parts[crit] < CRITICAL_SHARE * wall:
        return []
    total = float(it.table["wall_s"].sum())  # every iteration: the run-level bound
    which = (f"iterations {int(t['iteration'].iloc[0])}-{int(t['iteration'].iloc[-1])} of "
             f"{len(it.table)}" if len(t) < len(it.table) else f"{len(t)} iteration(s)")
    table = (f"iterations table ({which}): wall {wall:.3g} s; sampling {parts['sampling']:.3g}"
             f" s ({_pct(parts['sampling'], wall)}), learner update {parts['learner']:.3g} s "
             f"({_pct(parts['learner'], wall)}), weight sync {parts['sync']:.3g} s "
             f"({_pct(parts['sync'], wall)}), driver {parts['driver']:.3g} s "
             f"({_pct(parts['driver'], wall)})")
    make = {"sampling": _sampling, "learner": _learner, "sync": _sync, "driver": _driver}
    rv = make[crit](it, t, parts, wall, cores, ops, util)
    rv.evidence.insert(0, table)
    free = free_cores(samples, cores, it.window_ns())
    if free is not None and cores is not None and free < cores - 0.05 \
            and crit in ("sampling", "learner"):
        # The machine was shared: the same rule on the cores the others left the run, the
        # low end (under fair scheduling more processes also take a share of theirs).
        lo = make[crit](it, t, parts, wall, free, ops, util)
        g = 1 / (1 - lo.bound_share) if lo.bound_share < 1 else float("inf")
        rv.verdict += f" ({g:.2f}x on the {free:.2f} cores other processes left it)"
        rv.evidence.append(f"samples: processes outside the run used {cores - free:.2f} of "
                           f"the {cores} cores during these iterations; on the "
                           f"{free:.2f} left: " + lo.evidence[-1].split(": ", 1)[-1])
    rv.bound_s = rv.bound_share * total  # the steady share saved, over every iteration
    run_wall = run_wall if run_wall > 0 else total
    rv.bound_share = rv.bound_s / run_wall
    rv.subject = "iterations"
    return [rv]


def _gain(wall: float, saved: float) -> float:
    return wall / (wall - saved) if wall - saved > 0 else float("inf")


def _sampling(it: Iterations, t: pd.DataFrame, parts: dict[str, float], wall: float,
              cores: float | None, ops: pd.DataFrame | None, util: pd.DataFrame | None
              ) -> RunVerdict:
    n = len(it.runners)
    s = parts["sampling"]
    rounds = float(t["rounds_s"].sum())
    slowest = float(t["sample_max_s"].fillna(0.0).sum())
    # Every iteration's: the operations table covers them all.
    all_sample = float(it.roles[it.roles["role"] == "env runner"]["sampling_s"].sum())
    c = runner_cpu_share(ops, [p for p, _ in it.runners], all_sample)
    new = 2 * n if n else 2
    x = _speedup(n, new, cores, c)
    work = slowest if n else s  # on the critical path, what more runners split
    saved = max(work * (1 - 1 / x), 0.0)
    gain = _gain(wall, saved)
    rv = RunVerdict("actors-sampling",
                    f"env runners: sampling took {_pct(s, wall)} of each training iteration "
                    f"while the learner waited; {n} -> {new} env runners bounds the gain at "
                    f"{gain:.2f}x")
    if n:
        rv.evidence.append(
            f"iterations table: the driver waited {rounds:.3g} s on remote sample() rounds; "
            f"the slowest runner's sample() {slowest:.3g} s of it, the rest IPC/scheduling "
            f"{max(rounds - slowest, 0):.3g} s; the driver's own sampling work "
            f"{max(s - rounds, 0):.3g} s")
    rv.evidence.append(f"operations table: the runners were busy {100 * c:.0f}% of their "
                       f"sample() time (not waiting); {_n(cores)} cores: {new} runners "
                       f"sample {x:.2f}x as fast as {max(n, 1)}")
    rv.remedy = (f"more env runners: config.env_runners(num_env_runners={new}) (the same "
                 "train_batch_size: each samples a share), or more envs per runner "
                 "(num_envs_per_env_runner: one batched forward pass for more envs); rule: "
                 "the runners' sample() work is on the critical path of a synchronous "
                 "algorithm, split over more runners as far as the cores allow")
    if x <= 1.0:
        rv.remedy = (f"more env runners cannot help on {_n(cores)} cores (the runners are busy "
                     f"{100 * c:.0f}% of their sample() time): more cores (another node), "
                     "cheaper env steps or inference, or asynchronous sampling (APPO/IMPALA:"
                     " sampling overlaps the update)")
    rv.bound_share = saved / wall
    rv.bound_of = (f"the slowest runner's sample() time split over {new} runners "
                   f"({x:.2f}x faster as the cores allow), over every iteration")
    return rv


def _learner(it: Iterations, t: pd.DataFrame, parts: dict[str, float], wall: float,
             cores: float | None, ops: pd.DataFrame | None, util: pd.DataFrame | None
             ) -> RunVerdict:
    n = len(it.learners)
    lr = parts["learner"]
    pids = [p for p, _ in it.learners] or [it.driver_pid]
    u = learner_cores(util, pids)
    new = 2 * n if n else 2
    x = _speedup(n, new, cores, u)
    saved = max(lr * (1 - 1 / x), 0.0)
    gain = _gain(wall, saved)
    idle = it.roles[(it.roles["role"] == "env runner")
                    & it.roles["iteration"].isin(t["iteration"])]
    runner_wait = float(idle["waiting_s"].mean()) * len(t) if len(idle) else 0.0
    rv = RunVerdict("actors-learner",
                    f"learner: the update took {_pct(lr, wall)} of each training iteration "
                    f"while the env runners waited; {n or 'local'} -> {new} learners bounds "
                    f"the gain at {gain:.2f}x")
    where = "the driver (local learner)" if not n else f"{n} remote learner(s)"
    rv.evidence.append(f"iterations table: the update ran in {where}; each env runner "
                       f"waited {runner_wait:.3g} s ({_pct(runner_wait, wall)}) of these "
                       "iterations")
    rv.evidence.append(f"utilisation table: the learner used {u:.2f} core(s) while it "
                       f"updated; {_n(cores)} cores: {new} learners update {x:.2f}x as "
                       f"fast as {max(n, 1)}")
    rv.remedy = (f"more learners: config.learners(num_learners={new}) (data-parallel: each "
                 "updates on a share of the batch), or a GPU per learner "
                 "(num_gpus_per_learner=1); or overlap sampling with the update "
                 "(APPO/IMPALA); rule: the update is on the critical path of a synchronous "
                 "algorithm while the runners wait")
    if x <= 1.0:
        rv.remedy = (f"more learners cannot help on {_n(cores)} cores (the learner already "
                     f"uses {u:.1f}): a GPU per learner (num_gpus_per_learner=1), fewer "
                     "epochs or larger minibatches (less work per update), or overlap "
                     "sampling with the update (APPO/IMPALA)")
    rv.bound_share = saved / wall
    rv.bound_of = (f"the update split over {new} learners ({x:.2f}x faster as the cores "
                   "allow), over every iteration")
    return rv


def _sync(it: Iterations, t: pd.DataFrame, parts: dict[str, float], wall: float,
          cores: float | None, ops: pd.DataFrame | None, util: pd.DataFrame | None
          ) -> RunVerdict:
    y = parts["sync"]
    rv = RunVerdict("actors-sync", f"weight sync took {_pct(y, wall)} of each training "
                    f"iteration (the driver pushing weights to {len(it.runners)} env runners)")
    rv.remedy = ("sync less often (broadcast the weights every few iterations), a smaller "
                 "model, or fewer env runners with more envs each")
    rv.bound_share = y / wall
    rv.bound_of = "the weight sync's time, over every iteration"
    return rv


def _driver(it: Iterations, t: pd.DataFrame, parts: dict[str, float], wall: float,
            cores: float | None, ops: pd.DataFrame | None, util: pd.DataFrame | None
            ) -> RunVerdict:
    d = parts["driver"]
    rv = RunVerdict("actors-driver", f"the driver's own work (outside sampling, the update "
                    f"and weight sync) took {_pct(d, wall)} of each training iteration")
    rv.remedy = ("see the driver's operations table: metrics and result reporting, "
                 "evaluation, checkpoints, or the loop's own code between train() calls")
    rv.bound_share = d / wall
    rv.bound_of = "the driver's own time in the iterations"
    return rv
