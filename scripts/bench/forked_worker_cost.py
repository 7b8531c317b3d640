"""What recording costs the work of a forked single-threaded worker, timed by the worker
itself (its thread CPU clock around each task: workloads/pool_worker_task.py), side by
side in interleaved rounds:

- ``plain``: no rlscope;
- ``thread``: no rlscope, one idle extra thread in each worker (what any thread costs);
- ``bare``: ``rls-prof --intercept none --no-sample --sample-python off``: the recorder
  alone (its start-up in the worker, its writer);
- ``nosampler``: ``rls-prof --no-sample --sample-python off``: every interception;
- ``full``: ``rls-prof`` defaults (interception and both samplers).

    OMP_NUM_THREADS=1 python scripts/bench/forked_worker_cost.py [--rounds 6] [--maps 40]

Each run's figure is its median task; each configuration's, the median over rounds of
those. Last line: ``RESULT plain_task_us=... <config>_pct=...`` (each against plain, in
the same rounds) and ``<config>_pct_lo/_hi`` (the per-round range of that difference).
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
TASK = HERE / "workloads" / "pool_worker_task.py"
RLS = [sys.executable, "-m", "rlscope.cli.prof"]
CONFIGS: dict[str, tuple[list[str], str]] = {
    "plain": ([], "plain"),
    "thread": ([], "thread"),
    "bare": (["--intercept", "none", "--no-sample", "--sample-python", "off"], "plain"),
    "nosampler": (["--no-sample", "--sample-python", "off"], "plain"),
    "full": ([], "plain"),
}


def run(config: str, tmp: Path, maps: int, steps: int) -> float:
    flags, mode = CONFIGS[config]
    out = tmp / f"{config}.json"
    cmd = [sys.executable, str(TASK), mode, str(out), "--maps", str(maps), "--steps", str(steps)]
    if config not in ("plain", "thread"):
        cmd = [*RLS, "-o", str(tmp / f"{config}.rls"), "--force", *flags, "--", *cmd]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"forked_worker_cost: {config} exited {p.returncode}: {p.stderr[-2000:]}")
    return float(statistics.median(json.loads(out.read_text())["task_ns"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--maps", type=int, default=40)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    a = ap.parse_args()
    configs = [c for c in a.configs.split(",") if c]
    bad = [c for c in configs if c not in CONFIGS]
    if bad or "plain" not in configs:
        sys.exit(f"forked_worker_cost: --configs takes plain and any of {', '.join(CONFIGS)}")
    per: dict[str, list[float]] = {c: [] for c in configs}
    with tempfile.TemporaryDirectory(prefix="rls-fwc-") as d:
        for r in range(a.rounds):
            order = configs[r % len(configs):] + configs[:r % len(configs)]  # rotate turns
            for c in order:
                per[c].append(run(c, Path(d), a.maps, a.steps))
            print(f"round {r}: " + "  ".join(f"{c} {per[c][-1] / 1e3:.1f} us" for c in configs),
                  flush=True)
    plain = per["plain"]
    fields = [f"plain_task_us={statistics.median(plain) / 1e3:.1f}"]
    for c in configs:
        if c == "plain":
            continue
        d = [100.0 * (x / p - 1.0) for x, p in zip(per[c], plain, strict=True)]
        print(f"{c:>10}: {statistics.median(d):+.1f}% (rounds {min(d):+.1f}..{max(d):+.1f})")
        fields += [f"{c}_pct={statistics.median(d):+.1f}", f"{c}_pct_lo={min(d):+.1f}",
                   f"{c}_pct_hi={max(d):+.1f}"]
    print("RESULT " + " ".join(fields))


if __name__ == "__main__":
    main()
