"""SB3's SubprocVecEnv(4) of CartPoles stepped with fixed actions, each vector step timed
by the main process (perf_counter_ns): the ground truth of scripts/bench/subproc_step_cost.py.

    python subproc_steps.py OUT.json [STEPS]

OUT.json: {"median_us", "mean_us"} over STEPS timed vector steps (after 200 untimed).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import SubprocVecEnv

if __name__ == "__main__":
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    venv = make_vec_env("CartPole-v1", n_envs=4, vec_env_cls=SubprocVecEnv, seed=0)
    venv.reset()
    actions = np.zeros(4, dtype=np.int64)
    for _ in range(200):
        venv.step(actions)
    ns = []
    for _ in range(steps):
        t0 = time.perf_counter_ns()
        venv.step(actions)
        ns.append(time.perf_counter_ns() - t0)
    venv.close()
    with open(sys.argv[1], "w") as f:
        json.dump({"median_us": statistics.median(ns) / 1e3,
                   "mean_us": sum(ns) / len(ns) / 1e3}, f)
