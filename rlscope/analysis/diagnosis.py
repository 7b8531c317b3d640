"""What limits this run: per top operation, what it is bound by, the evidence, the remedy
that evidence points to and an upper bound on what the remedy can save.

Built only from the measured breakdown (:meth:`Analysis.operations`): each top-level
operation's time, its nested operations included, split into Python / Backend /
Simulator / Waiting / CUDA API / GPU, with its transition counts. A category that holds
at least half of the operation's time, clearly ahead of the next one, is the limit; an
operation without one gets no verdict ("balanced"), never a guessed one. Thresholds are
the constants below (docs/analysis.md, "Diagnosis").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from rlscope.analysis.engine.paths import PATH_SEP, STARTUP, UNANNOTATED
from rlscope.analysis.processes import tasks as pool_tasks

DOMINANT = 0.5  # a limit holds at least this share of the operation's time...
MARGIN = 0.15  # ...and this much more than the next category
MIN_PROCESS_SHARE = 0.05  # operations below this share of their process are not diagnosed
TOP = 5  # operations diagnosed per process (the largest)
LAUNCH_MEAN_US = 20.0  # backend calls shorter than this on average...
LAUNCH_CALLS = 5.0  # ...and at least this many per operation call: launch-bound

# category column -> name used in verdicts
CATEGORIES = {"python_s": "Python", "backend_s": "ML backend", "simulator_s": "simulator",
              "waiting_s": "waiting", "cuda_api_s": "CUDA API", "gpu_s": "GPU"}


@dataclass
class Verdict:
    pid: int
    process: str
    operation: str
    wall_s: float
    process_share: float  # of the process's recorded time
    bound: str | None  # "Python", "ML backend (launch-bound)", ...; None: balanced
    shares: dict[str, float]  # category name -> share of the operation's time
    evidence: list[str] = field(default_factory=list)
    remedy: str = ""
    max_saving_s: float = 0.0  # upper bound of what the remedy can save...
    saving_of: str = ""  # ...and the measured time that bound is

    @property
    def max_saving_share(self) -> float:
        return self.max_saving_s / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "max_saving_share": self.max_saving_share}


BUSY_SAMPLED = 50.0  # NVML reads the GPU busy in at least this % of samples...
OVERSTATED = 2.0  # ...at least this many times the share of time in kernels and copies
MIN_GPU_SAMPLES = 5  # fewer samples say nothing


@dataclass
class GpuFinding:
    """A process's GPU as sampled utilisation shows it (NVML, what nvidia-smi prints)
    against the time its kernels and copies took (CUPTI): the RL-Scope contrast."""

    pid: int
    process: str
    devices: str  # "0" or "0,1"
    samples: int
    sampled_busy_pct: float  # share of NVML samples with utilisation > 0
    sampled_util_pct: float  # mean NVML utilisation
    gpu_pct: float  # kernels and copies, % of the process's wall time x devices
    gpu_s: float
    sharing: int = 0  # other processes of the run with GPU work on these devices
    # NVML GPM metrics (Hopper and later; None without): mean share of time the SMs were
    # active and their occupancy over the GPM samples of the same phases.
    gpm_samples: int = 0
    sm_active_pct: float | None = None
    sm_occupancy_pct: float | None = None

    @property
    def overstated_x(self) -> float:
        return self.sampled_busy_pct / self.gpu_pct if self.gpu_pct > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "overstated_x": self.overstated_x}


def gpu_findings(util: pd.DataFrame) -> list[GpuFinding]:
    """Processes whose GPU NVML reads busy (BUSY_SAMPLED) far more (OVERSTATED) than
    their kernels and copies occupy it. ``util``: Analysis.utilisation(). Where the
    device has GPM metrics, the finding carries the SMs' activity and occupancy too."""
    out: list[GpuFinding] = []
    if not len(util):
        return out
    sampled = util[(util["gpu_samples"] > 0) & util["rlscope_gpu_s"].notna()]
    users = util[util["rlscope_gpu_s"].fillna(0) > 0]
    on = {int(p): set(str(d).split(",")) for p, d in zip(users["pid"], users["gpu_devices"],
                                                        strict=True)}
    for (pid, _session, process), g in sampled.groupby(["pid", "session", "process"],
                                                        sort=False, dropna=False):
        n = int(g["gpu_samples"].sum())
        devices = str(g["gpu_devices"].iloc[0])
        wall = float(g["wall_s"].sum()) * max(len(devices.split(",")), 1)
        if n < MIN_GPU_SAMPLES or wall <= 0:
            continue
        busy = float((g["sampled_gpu_busy_pct"] * g["gpu_samples"]).sum() / n)
        mean = float((g["sampled_gpu_util_pct"] * g["gpu_samples"]).sum() / n)
        gpu_s = float(g["rlscope_gpu_s"].sum())
        sharing = sum(1 for p, d in on.items() if p != pid and d & set(devices.split(",")))
        f = GpuFinding(int(pid), str(process), devices, n, busy, mean, 100 * gpu_s / wall,
                       gpu_s, sharing)
        if "gpm_samples" in g:
            k = g["gpm_samples"].fillna(0)
            if (nk := int(k.sum())) > 0:
                f.gpm_samples = nk
                f.sm_active_pct = float((g["sampled_sm_active_pct"].fillna(0) * k).sum() / nk)
                f.sm_occupancy_pct = float(
                    (g["sampled_sm_occupancy_pct"].fillna(0) * k).sum() / nk)
        if busy >= BUSY_SAMPLED and f.overstated_x >= OVERSTATED:
            out.append(f)
    return out


def _inclusive(ops: pd.DataFrame, pid: int, name: str) -> pd.Series:
    rows = ops[(ops["pid"] == pid) & ((ops["operation"] == name)
                                      | ops["operation"].str.startswith(name + PATH_SEP))]
    numeric = rows.select_dtypes("number").drop(columns=["pid", "depth"], errors="ignore")
    total = numeric.sum()
    own = rows[rows["operation"] == name]
    total["calls"] = float(own["calls"].sum())  # calls of the operation itself
    return total


def _verdict(pid: int, process: str, name: str, t: pd.Series, covered_s: float,
             process_has_gpu: bool) -> Verdict:
    wall = float(sum(t[c] for c in CATEGORIES))
    shares = {CATEGORIES[c]: float(t[c]) / wall for c in CATEGORIES if wall > 0}
    v = Verdict(pid, process, name, wall, wall / covered_s if covered_s > 0 else 0.0, None,
                shares)
    ranked = sorted(shares.items(), key=lambda kv: -kv[1])
    calls = max(float(t["calls"]), 1.0)
    v.evidence.append(", ".join(f"{n} {100 * s:.0f}%" for n, s in ranked if s >= 0.01))
    if t["backend_calls"]:
        mean_us = 1e6 * float(t["backend_s"]) / float(t["backend_calls"])
        v.evidence.append(f"{t['backend_calls'] / calls:,.1f} backend calls per call, "
                          f"{mean_us:,.1f} µs each on average")
    if t["simulator_calls"]:
        v.evidence.append(f"{t['simulator_calls'] / calls:,.1f} simulator calls per call, "
                          f"{1e6 * float(t['simulator_s']) / float(t['simulator_calls']):,.1f}"
                          " µs each on average")
    if process_has_gpu and wall > 0:
        v.evidence.append(f"GPU idle while the CPU works: "
                          f"{100 * float(t['cpu_only_s']) / wall:.0f}% of the operation")
    if not ranked or ranked[0][1] < DOMINANT or (
            len(ranked) > 1 and ranked[0][1] - ranked[1][1] < MARGIN):
        return v  # balanced: no single limit
    top = ranked[0][0]
    py, be = float(t["python_s"]), float(t["backend_s"])
    if top == "Python":
        v.bound = "Python"
        v.remedy = ("less Python per step: vectorise across envs, or move the loop into the "
                    "ML backend (jit/compile) or the simulator")
        v.max_saving_s, v.saving_of = py, "the Python time"
    elif top == "ML backend":
        mean_us = 1e6 * be / t["backend_calls"] if t["backend_calls"] else float("inf")
        if mean_us < LAUNCH_MEAN_US and t["backend_calls"] / calls >= LAUNCH_CALLS:
            v.bound = "ML backend (launch-bound: many short calls)"
            v.remedy = ("fewer, larger backend calls: fuse them (torch.compile, tf.function, "
                        "jax.jit) or batch the envs")
            v.max_saving_s = py
            v.saving_of = (f"the Python between the calls (fusing also trims the backend's "
                           f"per-call dispatch, inside its {be:.3g} s and not separable from "
                           "compute)")
        else:
            v.bound = "ML backend (compute)"
            v.remedy = ("the backend's compute: a smaller or lower-precision model, fewer "
                        "epochs/updates, or an accelerator")
            v.max_saving_s, v.saving_of = be, "the backend time"
    elif top == "simulator":
        v.bound = "simulator"
        v.remedy = ("the simulator: a cheaper configuration (fewer substeps, simpler "
                    "model), or step envs in parallel (more workers, asynchronous vector "
                    "envs)")
        v.max_saving_s, v.saving_of = float(t["simulator_s"]), "the simulator time"
    elif top == "waiting":
        v.bound = "waiting"
        v.remedy = ("the operation waits for other processes, I/O or sleeps: overlap the "
                    "wait (asynchronous envs, more envs per worker) or speed up what it "
                    "waits for (process tree, lock-step report)")
        v.max_saving_s, v.saving_of = float(t["waiting_s"]), "the waiting time"
    elif top == "CUDA API":
        v.bound = "CUDA API"
        v.remedy = ("CUDA API time: fewer synchronisations and small copies, CUDA graphs for "
                    "many small launches")
        v.max_saving_s, v.saving_of = float(t["cuda_api_s"]), "the CUDA API time"
    else:
        v.bound = "GPU"
        v.remedy = ("the GPU's kernels and copies: optimise the heaviest kernels or move "
                    "work to the idle CPU")
        v.max_saving_s, v.saving_of = float(t["gpu_only_s"]), "the time only the GPU works"
    return v


def _startup_verdict(pid: int, process: str, t: pd.Series, covered_s: float,
                     imports_s: float | None) -> Verdict:
    """The start-up is paid once per process, not per step: no per-step remedy applies
    (docs/analysis.md#start-up)."""
    wall = float(sum(t[c] for c in CATEGORIES))
    shares = {CATEGORIES[c]: float(t[c]) / wall for c in CATEGORIES if wall > 0}
    v = Verdict(pid, process, STARTUP, wall, wall / covered_s if covered_s > 0 else 0.0,
                "start-up, paid once per process", shares)
    if imports_s is None:  # recorded without rls-prof's import timer
        v.evidence.append("imports not timed (rls-prof times them), Python "
                          f"{100 * shares.get('Python', 0.0):.0f}%")
    else:
        # A total: in seconds, as every total of the report (a non-zero one never "0.000").
        took = "<0.001 s" if 0 < imports_s < 0.0005 else f"{imports_s:.3f} s"
        v.evidence.append(f"imports {took} ({100 * imports_s / max(wall, 1e-12):.0f}%), the "
                          "rest the program's own code before its first operation")
    v.remedy = ("a longer run amortises it; else import less at start (lazily, only what "
                "the process uses) or start fewer processes")
    v.max_saving_s, v.saving_of = wall, "the start-up itself, once per process"
    return v


def diagnose(ops: pd.DataFrame, processes: pd.DataFrame) -> list[Verdict]:
    """Verdicts (and balanced operations, bound None) for the top operations of every
    process, largest first. ``ops``/``processes``: Analysis.operations()/processes()."""
    out: list[Verdict] = []
    if not len(ops):
        return out
    gpu_pids = set(ops.loc[ops["gpu_s"] > 0, "pid"])
    for _, proc in processes.iterrows():
        pid = int(proc["pid"])
        mine = ops[(ops["pid"] == pid) & (ops["depth"] == 0)
                   & (ops["operation"] != UNANNOTATED)]
        if not len(mine):
            continue
        covered = float(proc["covered_s"])
        tops = mine.groupby("operation", sort=False)["wall_s"].sum().sort_values(
            ascending=False)
        for name, wall in tops.head(TOP).items():
            if covered <= 0 or wall / covered < MIN_PROCESS_SHARE:
                continue
            t = _inclusive(ops, pid, str(name))
            if name == STARTUP:
                imports = ops[(ops["pid"] == pid)
                              & (ops["operation"] == STARTUP + PATH_SEP + "imports")]
                out.append(_startup_verdict(pid, str(proc["process"]), t, covered,
                                            float(imports["self_s"].sum())
                                            if len(imports) else None))
                continue
            out.append(_verdict(pid, str(proc["process"]), str(name), t, covered,
                                pid in gpu_pids))
    out.sort(key=lambda v: -v.wall_s)
    return out


# -- run level ---------------------------------------------------------------------------
# What limits the *run*, across its processes (docs/analysis.md, "Diagnosis: the run").
IPC_SHARE = 0.5  # IPC/scheduling holds at least this share of a vector env's step time
LOSS_SHARE = 0.10  # lock-step loss at least this share of sampling
MIN_BUSY_SHARE = 0.05  # a process does work: recorded busy at least this share of its wall
OVERSTATED_BUSY = 1.5  # recorded busy at least this many times /proc's sampled CPU
MIN_RUN_SHARE = 0.05  # start-up: at least this share of the run's wall time


@dataclass
class RunVerdict:
    """One run-level verdict: what limits the run, the evidence (numbers with the table
    they come from), the remedy for the library in use and a bound on what it saves."""

    kind: str  # "ipc", "oversubscription", "lockstep-loss", "start-up"
    verdict: str
    evidence: list[str] = field(default_factory=list)
    remedy: str = ""
    bound_s: float = 0.0  # at most this much of the run's wall time saved by the remedy
    bound_share: float = 0.0  # ... as a share of the run's wall time
    bound_of: str = ""  # what the bound is
    recurring: bool = True  # False: paid once (start-up), listed after the per-step costs
    subject: str = ""  # the vector env a lock-step verdict is about

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_cores(run: dict[str, Any], samples: Any = None) -> tuple[int | None, str]:
    """The run's core count: the sampler's (cores it read from /proc/stat on the run's
    machine), else run.json's host.cpus; never the analysing machine's."""
    if samples is not None and len(getattr(samples, "core_index", ())):
        return len(set(samples.core_index.tolist())), "sampler, /proc/stat"
    cpus = (run.get("host") or {}).get("cpus")
    if cpus:
        return int(cpus), "run.json host.cpus"
    return None, ""


def _library(cls: str) -> str:
    if cls in ("SubprocVecEnv", "DummyVecEnv"):
        return "sb3"
    if cls in ("AsyncVectorEnv", "SyncVectorEnv"):
        return "gymnasium"
    return ""


def _in_process(cls: str) -> str:
    """The vector env that steps the same envs in the main process."""
    return {"sb3": "DummyVecEnv", "gymnasium": "SyncVectorEnv"}.get(
        _library(cls), "a sequential vector env (envs stepped in the main process)")


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
        rv.remedy = (f"step the envs in the main process: {_in_process(v.cls)} instead of "
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
                     f"e.g. {_in_process(v.cls)} inside each); {rule}")
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
    else:
        fix = "even out the envs' step times (resets, episode lengths)"
    asyn = ("gymnasium AsyncVectorEnv with step_async/step_wait on the envs that are ready, "
            "or an asynchronous sampler (EnvPool, Sample Factory)"
            if _library(v.cls) == "gymnasium" else
            "an asynchronous sampler (EnvPool, Sample Factory) or batched rollouts")
    rv.remedy = f"{fix}; or stop stepping in lock-step: {asyn}"
    rv.bound_s = v.lockstep_loss_s
    rv.bound_share = rv.bound_s / wall if wall > 0 else 0.0
    rv.bound_of = "the lock-step loss (the projection 'asynchronous: no barrier')"
    return rv


def _peak(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    n = peak = 0
    for _, d in edges:
        n += d
        peak = max(peak, n)
    return peak


def _oversubscription(tree: pd.DataFrame, util: pd.DataFrame | None, lockstep: Any,
                      cores: int | None, cores_from: str, main_pid: int | None,
                      wall: float) -> RunVerdict | None:
    if cores is None or not len(tree):
        return None
    t = tree
    if "idle_helper" in t:
        t = t[~t["idle_helper"].fillna(False).astype(bool)]
    t = t[t["busy_s"] >= MIN_BUSY_SHARE * t["wall_s"].clip(lower=1e-12)]
    peak = _peak(list(zip(t["start_s"].astype(float), t["end_s"].astype(float),
                          strict=True)))
    if peak <= cores:
        return None
    roles = t["role"].value_counts() if "role" in t else pd.Series(dtype=int)
    who = ", ".join(f"{n} {r}" + ("s" if n > 1 else "") for r, n in roles.items())
    rv = RunVerdict("oversubscription", f"CPU oversubscribed: {peak} processes doing work "
                    f"at once on {cores} cores")
    rv.evidence.append(f"process tree: {len(t)} processes with recorded busy time ({who}), "
                       f"up to {peak} alive at once; {cores} cores ({cores_from})")
    excess_main = None
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
    workers = [v for v in (lockstep.vector_envs if lockstep is not None else []) if v.workers]
    if workers:
        v = workers[0]
        rv.remedy = (f"fewer worker processes than cores: at most {max(cores - 1, 1)} "
                     f"worker(s) beside the main process, or {_in_process(v.cls)} instead of "
                     f"{v.cls} (no worker processes); rule: processes doing work at once "
                     "<= cores")
    else:
        rv.remedy = (f"at most {cores} processes doing work at once: fewer worker processes "
                     "(or pool size), one thread each for their ML backend "
                     "(torch.set_num_threads(1))")
    if excess_main is not None:
        rv.bound_s = excess_main
        rv.bound_of = ("the main process's recorded busy time /proc did not give it (it was "
                       "runnable without a core)")
    else:
        rv.bound_of = "not measured (rls-prof's sampler was off)"
    rv.bound_share = rv.bound_s / wall if wall > 0 else 0.0
    return rv


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
                 tasks: pd.DataFrame | None = None) -> list[RunVerdict]:
    """What limits the run across its processes, before the per-operation verdicts:
    IPC/scheduling in vector steps, CPU oversubscription, the lock-step loss (per-step
    costs, largest bound first), then the run's start-up (one entry, paid once).
    ``tree``/``processes``/``ops``/``util``: Analysis.process_tree()/processes()/
    operations()/utilisation() (None: not sampled); ``lockstep``: the Lockstep result;
    ``cores``: run_cores(); ``tasks``: Analysis.tasks() (pool and executor tasks)."""
    if not len(tree):
        return []
    wall = float(tree["end_s"].max() - tree["start_s"].min())
    mains = tree[tree["role"] == "main"] if "role" in tree else tree.iloc[:0]
    main_pid = int(mains["pid"].iloc[0]) if len(mains) else (
        int(tree.sort_values("start_s")["pid"].iloc[0]))
    out: list[RunVerdict] = []
    for v in (lockstep.vector_envs if lockstep is not None else []):
        out += [r for r in (_ipc(v, cores, wall), _loss(v, wall)) if r is not None]
    o = _oversubscription(tree, util, lockstep, cores, cores_from, main_pid, wall)
    if o is not None:
        out.append(o)
    if tasks is not None and len(tasks):
        out += _task_stragglers(tasks, wall)
    out.sort(key=lambda r: -r.bound_s)
    s = _startup(tree, processes, ops, main_pid, wall)
    if s is not None:
        out.append(s)
    return out


def _task_stragglers(tasks: pd.DataFrame, wall: float) -> list[RunVerdict]:
    """A pool function whose slowest task stands out (rlscope.analysis.processes.tasks's
    rule): the pool waits for it, so at most its excess over the median is saved."""
    out = []
    for s in pool_tasks.stragglers(pool_tasks.task_table(tasks)):
        bound = s["seconds"] - s["median_s"]
        out.append(RunVerdict(
            "straggler-task", f"pool straggler: {s['text']}",
            [f"tasks table: {s['function']}: {s['tasks']} tasks, median "
             f"{s['median_s']:.3f} s, slowest {s['seconds']:.3f} s (item {s['index']})"],
            "split the slow item's work, or hand it out first (imap_unordered with "
            "chunksize=1, or submit it first) so the other workers are not left idle "
            "behind it", bound, bound / wall if wall > 0 else 0.0,
            "the slow task's time above its function's median (the pool waits for it)",
            subject=str(s["function"])))
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
