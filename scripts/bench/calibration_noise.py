"""Why calibration compares forked copies in short turns (docs/overhead-correction.md).

    .venv/bin/python scripts/bench/calibration_noise.py [--seconds 60] [--slice 0.002]

1. Machine speed: a fixed pure-Python loop (~20 ms) timed back to back for --seconds;
   the slowest over the fastest is how much the machine's speed changes.
2. Identical copies: the SAC Pendulum workload under the chunk driver with four copies
   per chunk, two uninstrumented and two recording (annotations and progress, no call
   wrappers), taking --slice turns on one CPU. Prints the spread of identical copies
   (std/mean of the two uninstrumented ones plus the two recording ones, per chunk) and
   how much slower the recording copies were.

Last line: RESULT machine_speed_range=<max/min> copy_spread_pct=<median>
recording_excess_pct=<median>
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
WORKLOAD = [str(HERE / "workloads" / "sb3_fixed.py"), "sac", "Pendulum-v1", "3000"]
# Four copies per chunk, every one kept (calibration itself would merge equal ones).
DRIVER = """
import json, os, runpy, sys
from rlscope import intercept
from rlscope.inprocess import chunk_copies as chunks
chunks.distinct = lambda configs, active: configs
intercept.enable("auto")
os.environ[chunks.ENV_CONFIGS] = json.dumps(
    [["u1", False, 0], ["u2", False, 0], ["r1", True, 0], ["r2", True, 0]])
chunks.install_from_env()
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def machine_speed(seconds: float) -> np.ndarray:
    def work() -> int:
        s = 0
        for i in range(300_000):
            s += i * i % 7
        return s

    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.thread_time()
        work()
        out.append(time.thread_time() - t0)
    return np.array(out)


def copies(slice_s: float, chunks: int) -> dict[int, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="rlscope-noise-") as tmp:
        env = dict(os.environ, OMP_NUM_THREADS="1", RLSCOPE_CALIBRATE_CHUNKS=tmp,
                   RLSCOPE_MAX_CHUNKS=str(chunks), RLSCOPE_CHUNK_SLICE_S=repr(slice_s))
        subprocess.run([sys.executable, "-c", DRIVER, *WORKLOAD], env=env, check=True,
                       capture_output=True)
        rows: dict[int, dict[str, float]] = defaultdict(dict)
        for line in (Path(tmp) / "chunks.jsonl").read_text().splitlines():
            r = json.loads(line)
            rows[r["chunk"]][r["config"]] = r["thread_cpu_ns"] / 1e9
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--slice", type=float, default=0.002, help="turn length, seconds")
    ap.add_argument("--chunks", type=int, default=30)
    opts = ap.parse_args()

    t = machine_speed(opts.seconds)
    rng = float(t.max() / t.min())
    print(f"machine: {len(t)} timings of a fixed loop over {opts.seconds:.0f} s: fastest "
          f"{t.min() * 1e3:.1f} ms, median {np.median(t) * 1e3:.1f} ms, slowest "
          f"{t.max() * 1e3:.1f} ms ({rng:.2f}x)")

    rows = copies(opts.slice, opts.chunks)
    spread, excess = [], []
    for v in rows.values():
        if min(v.values()) < 0.05:  # the first, tiny chunks
            continue
        for a, b in (("u1", "u2"), ("r1", "r2")):
            spread.append(100 * abs(v[a] - v[b]) / (v[a] + v[b]))  # std/mean of a pair
        excess.append(100 * ((v["r1"] + v["r2"]) / (v["u1"] + v["u2"]) - 1))
    print(f"copies: {len(excess)} chunks, {opts.slice * 1e3:g} ms turns: identical copies "
          f"differ by {np.median(spread):.2f}% (median std/mean), up to "
          f"{np.max(spread):.2f}%; recording copies {np.median(excess):+.2f}% (median) "
          "over uninstrumented ones")
    print(f"RESULT machine_speed_range={rng:.2f} copy_spread_pct={np.median(spread):.2f} "
          f"recording_excess_pct={np.median(excess):.2f}")


if __name__ == "__main__":
    main()
