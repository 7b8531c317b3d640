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
    comp = float(t.get("compile_s", 0.0))
    if comp > 0 and wall > 0:  # compiling is inside the categories (mostly Python)
        n = int(t.get("compiles", 0))
        v.evidence.append(f"JIT compiling {comp:.3g} s ({100 * comp / wall:.0f}%), "
                          f"{n} compilation{'s' if n != 1 else ''}")
        if comp / wall >= DOMINANT:
            v.bound = "JIT compiling"
            v.remedy = ("compile less often: keep input shapes and types constant (mark "
                        "varying dimensions dynamic, or pad), compile outside the loop, or "
                        "cache compilations across runs; a longer run amortises a one-off "
                        "compile (JIT compilation section)")
            v.max_saving_s, v.saving_of = comp, "the compile time"
            return v
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
