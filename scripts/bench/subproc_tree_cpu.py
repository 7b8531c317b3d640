"""What rlscope costs SB3 PPO with SubprocVecEnv(4) in the process tree's CPU time (the
like-for-like measure of a multi-process run: main, forkserver, resource tracker and the
workers), with and without the Python stack sampler and interception, against runs
without rlscope.

    OMP_NUM_THREADS=1 python scripts/bench/subproc_tree_cpu.py [--rounds 3] [--steps 2048]

Rounds interleave two uninstrumented runs (rlscope.calibration.runner.run_once: the
tree's CPU, orphans reaped as rls-prof does; the second one, ``plain2``, shows how far
identical runs differ), a profiled run (rls-prof defaults), one with ``--sample-python
off`` and one with neither sampler nor interception (``--intercept none``: rlscope's
start-up, recorder and writer alone), each from run.json's ``cpu_s``. Last line:

    RESULT plain_cpu_s=<median> plain2_pct=<median vs plain> prof_pct=<...>
        nosampler_pct=<...> nointercept_pct=<...>
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

from rlscope.calibration.runner import run_once
from rlscope.launch import child_env

WORKLOAD = Path(__file__).resolve().parents[2] / "tests/integration/workloads/sb3_vec.py"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=2048)
    a = ap.parse_args()
    cmd = [sys.executable, str(WORKLOAD), "4", str(a.steps)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    res: dict[str, list[float]] = {"plain": [], "plain2": [], "prof": [], "nosampler": [],
                                   "nointercept": []}
    with tempfile.TemporaryDirectory(prefix="rlscope-subproc-") as tmp:
        for r in range(a.rounds):
            _w, cpu, _rc = run_once(cmd, child_env.uninstrumented(base=env),
                                    Path(tmp, f"plain{r}"), 600)
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
                subprocess.run([sys.executable, "-m", "rlscope.cli.prof", "-q", "--force",
                                "--no-cost-model", "-o", str(d), *extra, "--", *cmd],
                               env=env, check=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
                res[name].append(json.loads((d / "run.json").read_text())["cpu_s"])
            print(f"round {r}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in res.items()),
                  flush=True)
    m = {k: statistics.median(v) for k, v in res.items()}
    print(f"RESULT plain_cpu_s={m['plain']:.2f} " + " ".join(
        f"{k}_pct={100 * (m[k] / m['plain'] - 1):+.1f}" for k in res if k != "plain"))


if __name__ == "__main__":
    main()
