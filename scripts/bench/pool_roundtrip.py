"""What rlscope adds to a short ``pool.map``: the main process's median round trip of
``Pool(2).map(noop, [1, 2])`` (fork), without rlscope and under rls-prof with several
interception sets, samplers off, in rotated rounds (each run a fresh process tree).

    OMP_NUM_THREADS=1 python scripts/bench/pool_roundtrip.py [--rounds 3] [--calls 3000]

Configurations: ``plain`` (no rlscope), ``none`` (``--intercept none``: rlscope present),
``wait``, ``pool`` (the pool-task integration alone), ``auto``. Last line:

    RESULT plain_us=<median> none_added_us=<median over rounds of config - plain> ...
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

WORKLOAD = """
import multiprocessing as mp, statistics, sys, time

def noop(x):
    return x

if __name__ == "__main__":
    n = int(sys.argv[1])
    with mp.get_context("fork").Pool(2) as pool:
        for _ in range(200):
            pool.map(noop, [1, 2])
        ts = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            pool.map(noop, [1, 2])
            ts.append(time.perf_counter_ns() - t0)
    print("RT", statistics.median(ts) / 1e3)
"""
CONFIGS = ("plain", "none", "wait", "pool", "auto")


def run(config: str, script: Path, out: Path, calls: int) -> float:
    cmd = [sys.executable, str(script), str(calls)]
    if config != "plain":
        cmd = [sys.executable, "-m", "rlscope.cli.prof", "-q", "--force", "--no-cost-model",
               "--no-sample", "--sample-python", "off", "--intercept", config, "-o",
               str(out), "--", *cmd]
    p = subprocess.run(cmd, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True,
                       text=True)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RT ")]
    if p.returncode != 0 or not line:
        sys.exit(f"pool_roundtrip: {config} exited {p.returncode}: {p.stderr[-500:]}")
    return float(line[-1].split()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=3000)
    a = ap.parse_args()
    per: dict[str, list[float]] = {c: [] for c in CONFIGS}
    with tempfile.TemporaryDirectory(prefix="rls-pool-rt-") as d:
        script = Path(d) / "workload.py"
        script.write_text(WORKLOAD)
        for r in range(a.rounds):
            k = r % len(CONFIGS)
            for c in CONFIGS[k:] + CONFIGS[:k]:
                per[c].append(run(c, script, Path(d) / "run", a.calls))
            print(f"round {r}: " + "  ".join(f"{c} {per[c][-1]:.1f} us" for c in CONFIGS),
                  flush=True)
    fields = [f"plain_us={statistics.median(per['plain']):.1f}"]
    for c in CONFIGS[1:]:
        d = [x - y for x, y in zip(per[c], per["plain"], strict=True)]
        fields.append(f"{c}_added_us={statistics.median(d):+.1f}")
    print("RESULT " + " ".join(fields))


if __name__ == "__main__":
    main()
