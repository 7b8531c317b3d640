"""End-to-end inflation of Ray and RLlib work under rls-prof: every process of the job
recorded (driver, actors, task workers, Ray's services), RLlib's operations, env
runners' barrier, the workers' exit hook, vs uninstrumented.

    python scripts/bench/ray_inflation.py [--rounds 3] [--steps 200] [--iterations 2]

Every run is a fresh local Ray instance (num_cpus=2, no dashboard), timing only the work
(Ray start-up, actor creation, ``algo.build()`` and 8 s of the same work as warm-up
excluded: Ray's services finish starting in the background meanwhile):

  actors   the driver steps two actors together (``ray.get`` on both) ``--steps`` times;
           each step is 2 ms of busy loop inside ``rlscope.operation("actor_step")``
  ppo      ``algo.train()`` of RLlib PPO CartPole, 2 env runners x 2 envs, 1,024 env
           steps per iteration, local learner, ``--iterations`` iterations

each plain (no profiler) and under ``rls-prof`` with the defaults. Rounds interleave the
two (order alternating); inflation = median over rounds of the per-round ratio. Last line:

    RESULT actors_inflation=<x> ppo_inflation=<x> actor_step_ms=<plain> ppo_iter_s=<plain>
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
import ray
import rlscope

# Ray's services (dashboard agent, runtime env agent) finish starting in the background
# after ray.init() returns, taking the CPU from whatever runs then: work for this long
# before timing.
WARMUP_S = 8.0

@ray.remote
class Worker:
    def step(self, i):
        with rlscope.operation("actor_step"):
            end = time.perf_counter() + 0.002
            while time.perf_counter() < end:
                pass
        return i

def actors(steps):
    ws = [Worker.remote() for _ in range(2)]
    settle = time.perf_counter() + WARMUP_S
    while time.perf_counter() < settle:
        ray.get([w.step.remote(-1) for w in ws])
    t0 = time.perf_counter()
    for i in range(steps):
        ray.get([w.step.remote(i) for w in ws])
    return (time.perf_counter() - t0) / steps

def ppo(iterations):
    from ray.rllib.algorithms.ppo import PPOConfig
    config = (PPOConfig().environment("CartPole-v1")
              .env_runners(num_env_runners=2, num_envs_per_env_runner=2,
                           rollout_fragment_length=256)
              .training(train_batch_size=1024, minibatch_size=128, num_epochs=2)
              .learners(num_learners=0))
    algo = config.build()
    settle = time.perf_counter() + WARMUP_S
    while time.perf_counter() < settle:
        algo.train()  # warm-up iterations, not timed
    t0 = time.perf_counter()
    for _ in range(iterations):
        algo.train()
    dt = (time.perf_counter() - t0) / iterations
    algo.stop()
    return dt

if __name__ == "__main__":
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    what, n = sys.argv[1], int(sys.argv[2])
    dt = actors(n) if what == "actors" else ppo(n)
    ray.shutdown()
    print(json.dumps({"seconds": dt}))
"""


def run(what: str, mode: str, n: int, tmp: str, i: int) -> float:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [sys.executable, os.path.join(tmp, "workload.py"), what, str(n)]
    if mode == "rlscope":
        cmd = [sys.executable, "-m", "rlscope.cli.prof", "-q", "-o",
               os.path.join(tmp, f"{what}{i}"), "--", *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        sys.exit(f"{what} {mode} run failed:\n{r.stderr[-2000:]}")
    return float(json.loads(r.stdout.strip().splitlines()[-1])["seconds"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--iterations", type=int, default=2)
    a = ap.parse_args()
    modes = ["plain", "rlscope"]
    out: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "workload.py"), "w") as f:
            f.write(WORKLOAD)
        for what, n in (("actors", a.steps), ("ppo", a.iterations)):
            times: dict[str, list[float]] = {m: [] for m in modes}
            for r in range(a.rounds):
                for m in (modes if r % 2 == 0 else modes[::-1]):
                    times[m].append(run(what, m, n, tmp, r))
                print(f"{what} round {r + 1}: " + "  ".join(
                    f"{m} {times[m][-1] * 1e3:.2f} ms" for m in modes), flush=True)
            ratios = [t / p for t, p in zip(times["rlscope"], times["plain"], strict=True)]
            print(f"{what} paired ratios: {' '.join(f'{x:.3f}' for x in ratios)}")
            out[what] = (statistics.median(ratios), statistics.median(times["plain"]))
    print(f"RESULT actors_inflation={out['actors'][0]:.3f} ppo_inflation={out['ppo'][0]:.3f} "
          f"actor_step_ms={out['actors'][1] * 1e3:.2f} ppo_iter_s={out['ppo'][1]:.2f}")


if __name__ == "__main__":
    main()
