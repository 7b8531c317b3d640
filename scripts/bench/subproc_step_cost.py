"""What recording adds to a SubprocVecEnv's vector step, as the main process times it
(workloads/subproc_steps.py: SB3, 4 CartPole workers), side by side in rotated rounds:

- ``plain``: no rlscope;
- ``full``: ``rls-prof`` defaults (no cost model: it runs after the command);
- ``nopy``: ``--sample-python off`` (no Python stack sampler in the five processes);
- ``nosamp``: ``--no-sample --sample-python off`` (neither sampler);
- ``bare``: ``--intercept none`` and neither sampler: rlscope present in the five
  processes (start-up, recorder, writer thread, the workload's annotations) but no call
  intercepted.

    OMP_NUM_THREADS=1 python scripts/bench/subproc_step_cost.py [--rounds 10] [--steps 3000]

Each run's figure is its median vector step; each configuration's difference from plain
is taken per round, then its median over rounds. Last line:
``RESULT plain_step_us=... <config>_pct=...``.
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

HERE = Path(__file__).resolve().parent
WORKLOAD = HERE / "workloads" / "subproc_steps.py"
FLAGS = {"plain": None, "full": [], "nopy": ["--sample-python", "off"],
         "nosamp": ["--no-sample", "--sample-python", "off"],
         "bare": ["--intercept", "none", "--no-sample", "--sample-python", "off"]}


def run(config: str, tmp: Path, steps: int) -> float:
    out = tmp / f"{config}.json"
    cmd = [sys.executable, str(WORKLOAD), str(out), str(steps)]
    flags = FLAGS[config]
    if flags is not None:
        cmd = [sys.executable, "-m", "rlscope.cli.prof", "-q", "--force", "--no-cost-model",
               "-o", str(tmp / "run"), *flags, "--", *cmd]
    p = subprocess.run(cmd, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True,
                       text=True)
    if p.returncode != 0:
        sys.exit(f"subproc_step_cost: {config} exited {p.returncode}: {p.stderr[-2000:]}")
    return float(json.loads(out.read_text())["median_us"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--steps", type=int, default=3000)
    a = ap.parse_args()
    per: dict[str, list[float]] = {c: [] for c in FLAGS}
    configs = list(FLAGS)
    with tempfile.TemporaryDirectory(prefix="rls-subproc-step-") as d:
        for r in range(a.rounds):
            for c in configs[r % len(configs):] + configs[:r % len(configs)]:
                per[c].append(run(c, Path(d), a.steps))
            print(f"round {r}: " + "  ".join(f"{c} {per[c][-1]:.1f} us" for c in configs),
                  flush=True)
    fields = [f"plain_step_us={statistics.median(per['plain']):.1f}"]
    for c in configs[1:]:
        diff = [100.0 * (x / p - 1.0) for x, p in zip(per[c], per["plain"], strict=True)]
        print(f"{c:>7}: {statistics.median(diff):+.1f}% (rounds {min(diff):+.1f}.."
              f"{max(diff):+.1f})")
        fields.append(f"{c}_pct={statistics.median(diff):+.1f}")
    print("RESULT " + " ".join(fields))


if __name__ == "__main__":
    main()
