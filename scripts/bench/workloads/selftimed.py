"""A training-like loop whose operations time themselves (perf_counter around each), so
an uninstrumented run gives the true time per operation (issue 22's per-operation ground
truth). Annotated with rlscope.operation, a no-op unless rls-prof records.

    python scripts/bench/workloads/selftimed.py KIND STEPS OUT.json

KIND:
- ``cartpole``: a fast env step (gymnasium CartPole, ~2-5 µs) and a tiny MLP policy's
  inference each step; a backprop on the last 32 steps every 32 steps;
- ``dqn``: many small backend calls: inference is 12 small torch ops on a 1x4 input, a
  step of CartPole, a 64-sample backprop every 4 steps;
- ``pool``: a multiprocessing Pool(2) (fork) simulates in its workers (each task a few
  hundred CartPole steps, annotated as simulation there); the main process does
  inference on the results. Per-operation truth is the main process's.

OUT.json: {operation: seconds} summed over the run (the main process's own timings).
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym
import numpy as np
import torch

import rlscope

torch.set_num_threads(1)


class Timer:
    def __init__(self) -> None:
        self.total: dict[str, float] = {}

    def op(self, name: str) -> object:
        timer = self

        class _Op:
            def __enter__(self) -> None:
                self.scope = rlscope.operation(name)
                self.scope.__enter__()
                self.t0 = time.perf_counter()

            def __exit__(self, *exc: object) -> None:
                dt = time.perf_counter() - self.t0
                self.scope.__exit__(*exc)
                timer.total[name] = timer.total.get(name, 0.0) + dt
        return _Op()


def _sim_task(seed: int, steps: int = 300) -> float:
    env = gym.make("CartPole-v1")
    env.reset(seed=seed)
    total = 0.0
    with rlscope.operation("simulation"):
        for _ in range(steps):
            _obs, r, term, trunc, _ = env.step(env.action_space.sample())
            total += float(r)
            if term or trunc:
                env.reset()
    return total


def main() -> None:
    kind, steps, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    torch.manual_seed(0)
    t = Timer()
    policy = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh(),
                                 torch.nn.Linear(32, 2))
    opt = torch.optim.SGD(policy.parameters(), lr=1e-3)
    if kind == "pool":
        import multiprocessing as mp

        with mp.get_context("fork").Pool(2) as pool:
            for i in range(steps):
                results = pool.map(_sim_task, [2 * i, 2 * i + 1])
                with t.op("inference"), torch.no_grad():
                    for _ in range(200):
                        policy(torch.tensor([results[:2] + results[:2]], dtype=torch.float32))
        _write(out, t.total)
        return
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    buf: list[np.ndarray] = []
    w = [torch.randn(4, 4) for _ in range(4)]
    for i in range(steps):
        with t.op("inference"), torch.no_grad():
            x = torch.as_tensor(obs, dtype=torch.float32).unsqueeze(0)
            if kind == "dqn":
                for m in w:  # many small backend calls
                    x = torch.tanh(x @ m) + 0.0
            a = int(policy(x).argmax())
        with t.op("simulation"):
            obs, _r, term, trunc, _ = env.step(a)
            if term or trunc:
                obs, _ = env.reset()
        buf.append(obs)
        every = 4 if kind == "dqn" else 32
        if (i + 1) % every == 0:
            with t.op("backprop"):
                batch = torch.as_tensor(np.array(buf[-64:]), dtype=torch.float32)
                loss = policy(batch).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
    _write(out, t.total)


def _write(path: str, totals: dict[str, float]) -> None:
    with open(path, "w") as f:
        json.dump(totals, f)


if __name__ == "__main__":
    main()
