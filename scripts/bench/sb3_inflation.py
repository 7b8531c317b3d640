"""End-to-end inflation of SB3 PPO CartPole: rlscope fully instrumented vs uninstrumented
vs torch.profiler (CPU activities).

    python scripts/bench/sb3_inflation.py [--rounds 5] [--timesteps 4096] [--no-sample-mode]

Every run is a fresh process (1 torch thread, OMP_NUM_THREADS=1, fixed seed) timing
``model.learn(total_timesteps)`` only (imports and model construction excluded):

  plain     no profiler (rlscope not started)
  rlscope   under ``rls-prof`` with the defaults: native recorder, every interception
            (torch backend calls, gymnasium/SB3 operations), utilisation sampling at
            10 Hz, the script unchanged
  nosample  (with --no-sample-mode) the same with ``rls-prof --no-sample``: what the
            sampler adds is rlscope / nosample
  torch     ``torch.profiler.profile(activities=[CPU])`` around learn(); its exit
            (event collection/post-processing) is NOT timed, in torch's favour

Rounds interleave the modes (order rotated each round). Inflation = median over rounds
of the per-round ratio to ``plain``. Last line:

    RESULT inflation=<rlscope / plain> torch_profiler_inflation=<torch / plain>
           [sampling_inflation=<rlscope / nosample>]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

WORKLOAD = r"""
import json, sys, time
import torch
torch.set_num_threads(1)
from stable_baselines3 import PPO
mode, steps = sys.argv[1], int(sys.argv[2])
model = PPO("MlpPolicy", "CartPole-v1", seed=0, n_steps=512, batch_size=64, n_epochs=4)
if mode == "torch":
    from torch.profiler import ProfilerActivity, profile
    prof = profile(activities=[ProfilerActivity.CPU])
    prof.__enter__()
t0 = time.perf_counter()
model.learn(total_timesteps=steps)
dt = time.perf_counter() - t0
if mode == "torch":
    prof.__exit__(None, None, None)
print(json.dumps({"learn_s": dt}))
"""


def run(mode: str, steps: int, tmp: str, i: int) -> float:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [sys.executable, "-c", WORKLOAD, "rlscope" if mode == "nosample" else mode, str(steps)]
    if mode in ("rlscope", "nosample"):
        cmd = [sys.executable, "-m", "rlscope.cli.prof", "-q", "-o",
               os.path.join(tmp, f"{mode}{i}"), *(["--no-sample"] if mode == "nosample" else []),
               "--", *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0:
        sys.exit(f"{mode} run failed:\n{r.stderr[-2000:]}")
    return float(json.loads(r.stdout.strip().splitlines()[-1])["learn_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--timesteps", type=int, default=4096)
    ap.add_argument("--no-sample-mode", action="store_true",
                    help="also run rls-prof --no-sample (the sampler's share)")
    ap.add_argument("--no-torch", action="store_true", help="skip the torch.profiler mode")
    a = ap.parse_args()
    modes = ["plain", "rlscope", *(["nosample"] if a.no_sample_mode else []),
             *([] if a.no_torch else ["torch"])]
    times: dict[str, list[float]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            k = r % len(modes)
            order = modes[k:] + modes[:k]
            for m in order:
                times[m].append(run(m, a.timesteps, tmp, len(times[m]) + 100 * r))
            print(f"round {r + 1}: " + "  ".join(f"{m} {times[m][-1]:.3f}s" for m in modes),
                  flush=True)
    ratio = {m: statistics.median(t / p for t, p in zip(times[m], times["plain"], strict=True))
             for m in modes}
    for m in modes:
        print(f"{m:<8} learn() median {statistics.median(times[m]):.3f} s   "
              f"inflation {ratio[m]:.3f}x")
    line = f"RESULT inflation={ratio['rlscope']:.3f}"
    if "torch" in ratio:
        line += f" torch_profiler_inflation={ratio['torch']:.3f}"
    if "nosample" in ratio:
        paired = [t / n for t, n in zip(times["rlscope"], times["nosample"], strict=True)]
        q = statistics.quantiles(paired, n=4) if len(paired) > 1 else paired * 3
        print(f"sampling: rlscope / nosample median {statistics.median(paired):.4f} "
              f"(quartiles {q[0]:.4f} / {q[2]:.4f})")
        line += f" sampling_inflation={statistics.median(paired):.4f}"
    print(line)


if __name__ == "__main__":
    main()
