"""What rls-prof's utilisation sampler costs.

    python scripts/bench/sampler_overhead.py [--rounds 10] [--seconds 3] [--hz 10]
                                             [--nvml fake|real|none] [--gpm-hz HZ]

1. Its own CPU time, as a share of one core at the steady rate (after its start: loading
   NVML and a first tick that reads every process once, reported apart, in ms): the
   sampler (rlscope.launch.sampler, the thread rls-prof runs) samples a run of 1 and of
   8 processes (children that sleep) for
   ``--seconds`` at ``--hz``, reading GPUs through the fake libnvidia-ml of tests/cuda
   (one GPU; the default, when a C compiler is there), the driver's (``--nvml real``, on
   a GPU machine) or none; its thread CPU time over wall time, median over rounds.
   ``--gpm-hz``: NVML GPM samples per second where the GPU offers them (default: the
   sampler's, rlscope.launch.sampler.GPM_HZ; 0: none; the tick rate: every tick).
2. Inflation: a fixed CPU-bound Python loop (timed inside the workload) under
   ``rls-prof --no-sample`` and under ``rls-prof`` (sampling at ``--hz``), interleaved
   (order alternating per round); the median of per-round ratios sampled / not sampled.

Last line:

    RESULT sampler_core_pct=<1 process> sampler_core_pct_8proc=<8 processes>
           sampler_start_ms=<start> inflation=<ratio>
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOOP = r"""
import json, sys, time
t0 = time.perf_counter()
x = 0
for i in range(int(sys.argv[1])):
    x += i % 7
print(json.dumps({"loop_s": time.perf_counter() - t0}))
"""


def fake_nvml(tmp: str) -> str | None:
    sys.path.insert(0, str(REPO / "tests" / "cuda"))
    try:
        from fake_build import build_nvml

        return str(build_nvml(Path(tmp) / "nvml"))
    except (ImportError, RuntimeError):
        return None


def sampler_cost(n_procs: int, seconds: float, hz: float, out: str, nvml: str | None,
                 gpm_hz: float) -> tuple[float, float]:
    """(% of one core the sampler thread used at its steady rate while sampling n_procs
    processes, ms of CPU its start took)."""
    from rlscope.launch.descendants import children
    from rlscope.launch.sampler import Sampler

    before = set(children(os.getpid()))
    s = Sampler(out, hz, before, nvml_library=nvml, gpm_hz=gpm_hz)
    kids = [subprocess.Popen(["sleep", str(seconds + 5)]) for _ in range(n_procs)]
    try:
        s.start()
        time.sleep(seconds)
        summary = s.stop()
    finally:
        for k in kids:
            k.kill()
            k.wait()
    assert summary.processes == n_procs, summary
    return summary.steady_core_pct, 1e3 * summary.start_cpu_s


def loop_s(sample: bool, hz: float, iters: int, out: str) -> float:
    cmd = [sys.executable, "-m", "rlscope.cli.prof", "-q", "-o", out, "--force",
           *(["--sample-hz", str(hz)] if sample else ["--no-sample"]), "--",
           sys.executable, "-c", LOOP, str(iters)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"run failed:\n{r.stderr[-2000:]}")
    return float(json.loads(r.stdout.strip().splitlines()[-1])["loop_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--hz", type=float, default=10.0)
    ap.add_argument("--iters", type=int, default=20_000_000)
    ap.add_argument("--nvml", choices=["fake", "real", "none"], default="fake")
    ap.add_argument("--gpm-hz", type=float, default=None)
    a = ap.parse_args()
    from rlscope.launch.sampler import GPM_HZ

    gpm_hz = GPM_HZ if a.gpm_hz is None else a.gpm_hz
    with tempfile.TemporaryDirectory() as tmp:
        if a.nvml == "real":
            from rlscope.launch.nvml import LIBRARY as nvml
        else:
            nvml = fake_nvml(tmp) if a.nvml == "fake" else os.path.join(tmp, "none.so")
        print(f"GPU readings: {a.nvml} ({nvml})")
        cost: dict[int, list[float]] = {1: [], 8: []}
        start_ms: list[float] = []
        ratios: list[float] = []
        for r in range(a.rounds):
            for n in cost:
                d = os.path.join(tmp, f"s{r}-{n}")
                os.makedirs(d)
                pct, ms = sampler_cost(n, a.seconds, a.hz, d, nvml, gpm_hz)
                cost[n].append(pct)
                start_ms.append(ms)
            order = [False, True] if r % 2 == 0 else [True, False]
            t = {s: loop_s(s, a.hz, a.iters, os.path.join(tmp, f"l{r}-{s}")) for s in order}
            ratios.append(t[True] / t[False])
            print(f"round {r + 1}: sampler {cost[1][-1]:.3f}% (1 process), "
                  f"{cost[8][-1]:.3f}% (8); loop sampled {t[True]:.3f} s, not {t[False]:.3f} s",
                  flush=True)
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    c1, c8, infl = (statistics.median(cost[1]), statistics.median(cost[8]),
                    statistics.median(ratios))
    print(f"sampler at {a.hz:g} Hz: {c1:.3f}% of a core (1 process), {c8:.3f}% (8 processes); "
          f"start {statistics.median(start_ms):.1f} ms CPU")
    print(f"loop inflation by sampling: {infl:.4f} (quartiles {q[0]:.4f} / {q[2]:.4f})")
    print(f"RESULT sampler_core_pct={c1:.3f} sampler_core_pct_8proc={c8:.3f} "
          f"sampler_start_ms={statistics.median(start_ms):.1f} inflation={infl:.4f} "
          f"gpm_hz={gpm_hz:g}")


if __name__ == "__main__":
    main()
