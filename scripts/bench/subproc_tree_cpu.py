"""What rlscope costs SB3 PPO with SubprocVecEnv(4) in the process tree's CPU time (the
like-for-like measure of a multi-process run: main, forkserver, resource tracker and the
workers), with and without the Python stack sampler and interception, against runs
without rlscope.

    OMP_NUM_THREADS=1 python scripts/bench/subproc_tree_cpu.py [--rounds 3] [--steps 2048]
        [-- COMMAND...]    (another multi-process workload instead: a Ray job, a Pool)

Rounds interleave two uninstrumented runs (rlscope.calibration.runner.run_once: the
tree's CPU, orphans reaped as rls-prof does; the second one, ``plain2``, shows how far
identical runs differ), a profiled run (rls-prof defaults; ``corrected``: its CPU less
what its cost model removes, the report's ``removed_cpu_s``), one with
``--sample-python off`` and one with neither sampler nor interception (``--intercept
none``: rlscope's start-up, recorder and writer alone), each from run.json's ``cpu_s``.
Last line:

    RESULT plain_cpu_s=<median> plain2_pct=<median vs plain> prof_pct=<...>
        corrected_pct=<...> nosampler_pct=<...> nointercept_pct=<...>
        prof_vs_all_plain_pct=<...> corrected_vs_all_plain_pct=<...>
    (the last two against the median of every uninstrumented run, plain and plain2)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rlscope.calibration import cost_model
from rlscope.calibration.runner import run_once
from rlscope.launch import child_env

WORKLOAD = Path(__file__).resolve().parents[2] / "tests/integration/workloads/sb3_vec.py"


def _removed_s(run: Path, env: dict[str, str]) -> float:
    """CPU seconds of book-keeping the run's cost model removes from its process tree
    (the report's ``removed_cpu_s``)."""
    out = subprocess.run([sys.executable, "-m", "rlscope.cli.analyze", "report", str(run),
                          "--format", "json"], env=env, check=True, capture_output=True,
                         text=True).stdout

    def find(x: object) -> float | None:
        if isinstance(x, dict):
            if "removed_cpu_s" in x:
                return float(x["removed_cpu_s"])
            x = list(x.values())
        if isinstance(x, list):
            for v in x:
                hit = find(v)
                if hit is not None:
                    return hit
        return None

    hit = find(json.loads(out))
    if hit is None:
        raise SystemExit(f"{run}: the report has no cost-model figure (removed_cpu_s)")
    return hit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=2048)
    ap.add_argument("command", nargs=argparse.REMAINDER,
                    help="-- COMMAND...: the workload (default: SB3 PPO, SubprocVecEnv(4))")
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    cmd = cmd or [sys.executable, str(WORKLOAD), "4", str(a.steps)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    res: dict[str, list[float]] = {"plain": [], "plain2": [], "prof": [], "corrected": [],
                                   "nosampler": [], "nointercept": []}
    with tempfile.TemporaryDirectory(prefix="rlscope-subproc-") as tmp:
        for r in range(a.rounds):
            _w, cpu, rc = run_once(cmd, child_env.uninstrumented(base=env),
                                   Path(tmp, f"plain{r}"), 600)
            if rc != 0:  # a wrong command: say so once, not a traceback per run
                sys.exit(f"subproc_tree_cpu: the command exited with status {rc} without "
                         f"rlscope: {' '.join(cmd)}")
            res["plain"].append(cpu)
            for name, extra in (("prof", []), ("nosampler", ["--sample-python", "off"]),
                                ("plain2", None),
                                ("nointercept", ["--sample-python", "off", "--intercept",
                                                 "none"])):
                if extra is None:
                    _w, cpu, _rc = run_once(cmd, child_env.uninstrumented(base=env),
                                            Path(tmp, f"{name}{r}"), 600)
                    res[name].append(cpu)
                    continue
                d = Path(tmp, f"{name}{r}")
                model = [] if name == "prof" else ["--no-cost-model"]
                p = subprocess.run([sys.executable, "-m", "rlscope.cli.prof", "-q",
                                    "--force", *model, "-o", str(d), *extra, "--", *cmd],
                                   env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
                if p.returncode != 0:
                    sys.exit(f"subproc_tree_cpu: rls-prof ({name}) exited with status "
                             f"{p.returncode}: {p.stderr.strip()[-500:]}")
                cpu = json.loads((d / "run.json").read_text())["cpu_s"]
                res[name].append(cpu)
                if name == "prof" and not (d / "costs.json").exists():
                    # A run shorter than rls-prof's cost-model threshold: model it here.
                    cost_model.measure(cmd, d, child_env.Recording(str(d)))
                if name == "prof":
                    res["corrected"].append(cpu - _removed_s(d, env))
            print(f"round {r}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in res.items()),
                  flush=True)
    m = {k: statistics.median(v) for k, v in res.items()}
    both = statistics.median(res["plain"] + res["plain2"])  # every uninstrumented run
    print(f"RESULT plain_cpu_s={m['plain']:.2f} " + " ".join(
        f"{k}_pct={100 * (m[k] / m['plain'] - 1):+.1f}" for k in res if k != "plain")
        + f" prof_vs_all_plain_pct={100 * (m['prof'] / both - 1):+.1f}"
        f" corrected_vs_all_plain_pct={100 * (m['corrected'] / both - 1):+.1f}")


if __name__ == "__main__":
    main()
