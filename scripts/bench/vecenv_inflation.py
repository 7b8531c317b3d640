"""End-to-end inflation of SB3 PPO CartPole on a 4-worker SubprocVecEnv: rlscope fully
instrumented (every worker and the main process recorded, each env's steps with their env
index, each vector step's send and wait parts) vs uninstrumented.

    python scripts/bench/vecenv_inflation.py [--rounds 15] [--timesteps 32768] [--envs 4]

Every run is a fresh process (1 torch thread, OMP_NUM_THREADS=1, fixed seed, SB3's
default start method, forkserver) timing ``model.learn(total_timesteps)`` only (imports,
worker start-up and model construction excluded):

  plain     no profiler (rlscope not started)
  rlscope   under ``rls-prof`` with the defaults: native recorder, every interception,
            the script unchanged

Rounds interleave the two (order alternating). Inflation = median over rounds of the
per-round ratio to ``plain``. Last line:

    RESULT inflation=<rlscope / plain> vector_steps_per_s=<plain>
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
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import SubprocVecEnv
if __name__ == "__main__":
    steps, envs = int(sys.argv[1]), int(sys.argv[2])
    venv = make_vec_env("CartPole-v1", n_envs=envs, seed=0, vec_env_cls=SubprocVecEnv)
    model = PPO("MlpPolicy", venv, seed=0, n_steps=256, batch_size=64, n_epochs=4)
    venv.reset()  # every worker is up (SubprocVecEnv waits only for the first)
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps)
    dt = time.perf_counter() - t0
    venv.close()
    print(json.dumps({"learn_s": dt}))
"""


def run(mode: str, steps: int, envs: int, tmp: str, i: int) -> float:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    script = os.path.join(tmp, "workload.py")  # forkserver workers import __main__ by path
    cmd = [sys.executable, script, str(steps), str(envs)]
    if mode == "rlscope":
        cmd = [sys.executable, "-m", "rlscope.cli.prof", "-q", "-o",
               os.path.join(tmp, f"run{i}"), "--", *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        sys.exit(f"{mode} run failed:\n{r.stderr[-2000:]}")
    return float(json.loads(r.stdout.strip().splitlines()[-1])["learn_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--timesteps", type=int, default=32768)
    ap.add_argument("--envs", type=int, default=4)
    a = ap.parse_args()
    modes = ["plain", "rlscope"]
    times: dict[str, list[float]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "workload.py"), "w") as f:
            f.write(WORKLOAD)
        for r in range(a.rounds):
            for m in (modes if r % 2 == 0 else modes[::-1]):
                times[m].append(run(m, a.timesteps, a.envs, tmp, r))
            print(f"round {r + 1}: " + "  ".join(f"{m} {times[m][-1]:.3f}s" for m in modes),
                  flush=True)
    ratios = [t / p for t, p in zip(times["rlscope"], times["plain"], strict=True)]
    inflation = statistics.median(ratios)
    for m in modes:
        print(f"{m:<8} learn() median {statistics.median(times[m]):.3f} s")
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [inflation] * 3
    print(f"paired ratios: {' '.join(f'{x:.3f}' for x in ratios)}")
    print(f"quartiles of the ratios: {q[0]:.3f} {q[1]:.3f} {q[2]:.3f}")
    rate = a.timesteps / a.envs / statistics.median(times["plain"])
    print(f"RESULT inflation={inflation:.3f} vector_steps_per_s={rate:.0f}")


if __name__ == "__main__":
    main()
