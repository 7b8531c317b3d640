"""An unannotated loop on a gymnasium 1.x vector env of CartPoles with a small torch policy,
timing its env calls itself (time.perf_counter) and writing what it measured as JSON.

Usage: gym_vector_loop.py OUT.json CLASS MODE [STEPS] [ENVS]
  CLASS: sync (SyncVectorEnv) | async (AsyncVectorEnv, fork workers) | duck (a vector env
         of our own that subclasses nothing: step/reset returning batched arrays)
  MODE:  next | same | disabled (gymnasium's AutoresetMode; disabled: the loop resets the
         finished envs itself through reset(options={"reset_mask": ...}))
"""

from __future__ import annotations

import json
import os
import sys
import time

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

out, cls, mode = sys.argv[1], sys.argv[2], sys.argv[3]
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 300
n = int(sys.argv[5]) if len(sys.argv) > 5 else 8
torch.set_num_threads(1)
torch.manual_seed(0)
perf = time.perf_counter


class DuckVectorEnv:
    """Any object with batched step/reset: n CartPoles stepped in a list comprehension."""

    def __init__(self, k: int) -> None:
        self.envs = [gym.make("CartPole-v1") for _ in range(k)]

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict]:
        obs = [e.reset(seed=None if seed is None else seed + i)[0]
               for i, e in enumerate(self.envs)]
        return np.stack(obs), {}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, ...]:
        rows = []
        for e, a in zip(self.envs, actions, strict=True):
            o, r, term, trunc, _ = e.step(int(a))
            if term or trunc:
                o, _ = e.reset()
            rows.append((o, r, term, trunc))
        o, r, term, trunc = (np.array(c) for c in zip(*rows, strict=True))
        return o, r, term, trunc, {}

    def close(self) -> None:
        for e in self.envs:
            e.close()


if __name__ == "__main__":
    fns = [lambda: gym.make("CartPole-v1") for _ in range(n)]
    autoreset = {"next": AutoresetMode.NEXT_STEP, "same": AutoresetMode.SAME_STEP,
                 "disabled": AutoresetMode.DISABLED}[mode]
    if cls == "sync":
        env = gym.vector.SyncVectorEnv(fns, autoreset_mode=autoreset)
    elif cls == "async":
        env = gym.vector.AsyncVectorEnv(fns, autoreset_mode=autoreset, context="fork")
    else:
        env = DuckVectorEnv(n)
    policy = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh(),
                                 torch.nn.Linear(64, 2))
    m = {"env_s": 0.0, "env_calls": 0, "forwards": 0, "vector_steps": 0, "resets": 0,
         "pid": os.getpid()}

    def timed(fn, *a, **k):  # type: ignore[no-untyped-def]
        t0 = perf()
        r = fn(*a, **k)
        m["env_s"] += perf() - t0
        m["env_calls"] += 1
        return r

    obs, _ = timed(env.reset, seed=0)
    m["resets"] += 1
    for _ in range(steps):
        with torch.no_grad():
            a = policy(torch.as_tensor(obs, dtype=torch.float32)).argmax(1).numpy()
        m["forwards"] += 1
        obs, _r, term, trunc, _info = timed(env.step, a)
        m["vector_steps"] += 1
        done = np.logical_or(term, trunc)
        if mode == "disabled" and cls != "duck" and done.any():
            obs, _ = timed(env.reset, options={"reset_mask": done})
            m["resets"] += 1
    env.close()
    with open(out, "w") as f:
        json.dump(m, f)
