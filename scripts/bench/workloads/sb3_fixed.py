"""A stable-baselines3 training run with fixed work (seeded, fixed step count, one
thread), unannotated: rls-prof's sb3/gym integrations add the operations.

    python scripts/bench/workloads/sb3_fixed.py ppo CartPole-v1 4096
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch
from stable_baselines3 import DQN, PPO, SAC

torch.set_num_threads(1)
algo, env_id, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
kwargs: dict = {"seed": 0, "device": "cpu", "verbose": 0}
if algo == "ppo":
    model = PPO("MlpPolicy", env_id, n_steps=1024, batch_size=64, n_epochs=4, **kwargs)
elif algo == "dqn":
    model = DQN("MlpPolicy", env_id, learning_starts=500, train_freq=4, buffer_size=10_000,
                **kwargs)
elif algo == "sac":
    model = SAC("MlpPolicy", env_id, learning_starts=200, buffer_size=10_000,
                policy_kwargs={"net_arch": [64, 64]}, **kwargs)
else:
    raise SystemExit(f"unknown algorithm {algo}")
model.learn(total_timesteps=steps)
