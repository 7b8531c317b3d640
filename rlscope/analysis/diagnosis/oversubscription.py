"""CPU oversubscription: more processes of the run doing work at once than its cores, and
what fewer of them would give the main process back (docs/analysis.md, "The run")."""

from __future__ import annotations

from typing import Any

import pandas as pd

from rlscope.analysis.diagnosis.verdict import RunVerdict, in_process

MIN_BUSY_SHARE = 0.05  # a process does work: busy at least this share of its wall
OVERSTATED_BUSY = 1.5  # recorded busy at least this many times /proc's sampled CPU


def _peak(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    n = peak = 0
    for _, d in edges:
        n += d
        peak = max(peak, n)
    return peak


def oversubscription(tree: pd.DataFrame, util: pd.DataFrame | None, lockstep: Any,
                      cores: int | None, cores_from: str, main_pid: int | None,
                      wall: float, outside_cpu_s: float | None = None) -> RunVerdict | None:
    if cores is None or not len(tree):
        return None
    t = tree
    idle = (t["idle_helper"].fillna(False).astype(bool) if "idle_helper" in t
            else pd.Series(False, index=t.index))
    busy = t["busy_s"].astype(float).where(~idle, 0.0)  # a helper's thread, not its work
    if util is not None and len(util) and "sampled_cpu_s" in util:
        # Sampled, /proc's CPU time says which processes work: a helper burning CPU
        # outside every operation does; an actor whose recorded busy time is its
        # lifetime (Ray), or a worker asleep in its env step, does not.
        cpu = util[util["cpu_samples"] > 0].groupby("pid")["sampled_cpu_s"].sum() \
            if "cpu_samples" in util else util.groupby("pid")["sampled_cpu_s"].sum()
        sampled = t["pid"].map(cpu)
        busy = sampled.fillna(busy).astype(float)
    t = t[busy >= MIN_BUSY_SHARE * t["wall_s"].clip(lower=1e-12)]
    peak = _peak(list(zip(t["start_s"].astype(float), t["end_s"].astype(float),
                          strict=True)))
    if peak <= cores:
        return None
    roles = t["role"].value_counts() if "role" in t else pd.Series(dtype=int)
    who = ", ".join(f"{n} {r}" + (("es" if r.endswith("s") else "s") if n > 1 else "")
                    for r, n in roles.items())
    rv = RunVerdict("oversubscription", f"CPU oversubscribed: {peak} processes doing work "
                    f"at once on {cores} cores")
    rv.evidence.append(f"process tree: {len(t)} processes doing work ({who}), "
                       f"up to {peak} alive at once; {cores} cores ({cores_from})")
    excess_main = runq = None
    if util is not None and len(util) and "sampled_cpu_s" in util:
        u = util[util["pid"].isin(t["pid"]) & (util["cpu_samples"] > 0)]
        u = u.groupby("pid")[["rlscope_cpu_s", "sampled_cpu_s"]].sum()
        rec, smp = float(u["rlscope_cpu_s"].sum()), float(u["sampled_cpu_s"].sum())
        if len(u) and rec > 0:
            line = (f"utilisation table: recorded busy {rec:.3g} s, /proc sampled CPU "
                    f"{smp:.3g} s over these processes")
            if rec >= OVERSTATED_BUSY * max(smp, 1e-9):
                line += (f": recorded busy exceeds what /proc gave {rec / max(smp, 1e-9):.1f}x"
                         " (runnable, waiting for a core)")
            rv.evidence.append(line)
        if main_pid is not None and main_pid in u.index:
            m = u.loc[main_pid]
            excess_main = max(float(m["rlscope_cpu_s"] - m["sampled_cpu_s"]), 0.0)
            rv.evidence.append(f"utilisation table: the main process recorded busy "
                               f"{float(m['rlscope_cpu_s']):.3g} s, /proc sampled "
                               f"{float(m['sampled_cpu_s']):.3g} s")
            q = util[util["pid"] == main_pid]["runq_wait_s"] if "runq_wait_s" in util \
                else pd.Series(dtype=float)
            if len(q) and q.notna().all():
                runq = _runq_bound(float(q.sum()), u, main_pid, outside_cpu_s, rv)
    workers = [v for v in (lockstep.vector_envs if lockstep is not None else []) if v.workers]
    if workers and workers[0].cls == "EnvRunnerGroup":  # RLlib's env runners (Ray actors)
        rv.remedy = (f"fewer env runners than cores: config.env_runners(num_env_runners="
                     f"{max(cores - 1, 1)}) beside the driver, more envs each "
                     "(num_envs_per_env_runner) to keep the batch; rule: processes doing "
                     "work at once <= cores")
    elif workers:
        v = workers[0]
        rv.remedy = (f"fewer worker processes than cores: at most {max(cores - 1, 1)} "
                     f"worker(s) beside the main process, or {in_process(v.cls)} instead of "
                     f"{v.cls} (no worker processes); rule: processes doing work at once "
                     "<= cores")
    else:
        rv.remedy = (f"at most {cores} processes doing work at once: fewer worker processes "
                     "(or pool size), one thread each for their ML backend "
                     "(torch.set_num_threads(1))")
    if runq is not None:
        rv.bound_s, rv.bound_of = runq
    elif excess_main is not None:
        rv.bound_s = excess_main
        rv.bound_of = ("the main process's recorded busy time /proc did not give it (it was "
                       "runnable without a core)")
    else:
        rv.bound_of = "not measured (rls-prof's sampler was off)"
    rv.bound_share = rv.bound_s / wall if wall > 0 else 0.0
    return rv


def _runq_bound(waited: float, u: pd.DataFrame, main_pid: int,
                outside_cpu_s: float | None, rv: RunVerdict) -> tuple[float, str]:
    """What fewer processes would give the main process back: the time it waited on a run
    queue, in the share the run's other processes' CPU time holds among everything that
    competed with it (the machine's other processes too, when the cores were sampled)."""
    others = float(u.drop(index=main_pid)["sampled_cpu_s"].sum())
    outside = outside_cpu_s or 0.0
    share = others / (others + outside) if others + outside > 0 else 1.0
    rv.evidence.append(
        f"utilisation table: the main process waited {waited:.3g} s for a core (run "
        f"queue, /proc/<pid>/schedstat); the run's other processes used {others:.3g} s "
        "of CPU" + (f", processes outside the run {outside:.3g} s" if outside_cpu_s
                    is not None else ""))
    return waited * share, ("the main process's run-queue wait, in the share of the "
                            "competing CPU time the run's own other processes used")
