"""Is the env stepped first after the policy slower because of its place? (the caveat the
lock-step report adds for sequential vector envs, docs/multiprocess.md)

Eight CartPole envs stepped one after another, as DummyVecEnv / SyncVectorEnv do, with a
small torch policy (64-64 MLP, 1 thread) run before every vector step; no profiler. Each
env's step is timed with perf_counter_ns. Three passes of --steps vector steps: envs in
order 0..7, in order 7..0, and 0..7 with no policy in between. The ratio is the mean
step time of the env stepped first over the median of the other envs' means.

    python scripts/bench/first_env_cache.py [--steps 2000] [--envs 8]

Last line:

    RESULT first_ratio_forward=<x> first_ratio_reversed=<x> first_ratio_no_policy=<x>
    vector_step_us=<mean time of a vector step's env steps, forward pass>
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
import torch


def run(envs: list, net: torch.nn.Module | None, order: list[int], steps: int
        ) -> np.ndarray:
    """Mean step time (µs) of each env."""
    n = len(envs)
    total = np.zeros(n)
    obs = torch.zeros(n, 4)
    for _ in range(steps):
        if net is not None:
            with torch.no_grad():
                actions = net(obs).argmax(1).tolist()
        else:
            actions = [0] * n
        for i in order:
            t0 = time.perf_counter_ns()
            _o, _r, term, trunc, _ = envs[i].step(int(actions[i]))
            total[i] += time.perf_counter_ns() - t0
            if term or trunc:
                envs[i].reset()
    return total / steps / 1e3


def ratio(means: np.ndarray, first: int) -> float:
    return float(means[first] / np.median(np.delete(means, first)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--envs", type=int, default=8)
    a = ap.parse_args()
    torch.set_num_threads(1)
    envs = [gym.make("CartPole-v1") for _ in range(a.envs)]
    for i, e in enumerate(envs):
        e.reset(seed=i)
    net = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64),
                              torch.nn.Tanh(), torch.nn.Linear(64, 2))
    forward = list(range(a.envs))
    fwd = run(envs, net, forward, a.steps)
    rev = run(envs, net, forward[::-1], a.steps)
    bare = run(envs, None, forward, a.steps)
    for name, m in (("policy, 0..n-1", fwd), ("policy, n-1..0", rev), ("no policy", bare)):
        print(f"{name:15} mean step µs per env: {' '.join(f'{x:.1f}' for x in m)}")
    print(f"RESULT first_ratio_forward={ratio(fwd, 0):.2f} "
          f"first_ratio_reversed={ratio(rev, a.envs - 1):.2f} "
          f"first_ratio_no_policy={ratio(bare, 0):.2f} vector_step_us={fwd.sum():.1f}")


if __name__ == "__main__":
    main()
