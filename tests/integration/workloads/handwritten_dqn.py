"""A hand-written DQN on CartPole (our own small code, CPU, fixed seeds): the kind of
single-file training loop rlscope must break into operations with no annotation.

Usage: handwritten_dqn.py [--annotate] [--steps N] [--gym gymnasium|gym]

With ``--annotate`` the same code runs with ``rlscope.operation`` blocks around action
selection (inference), env steps and resets (simulation) and the gradient update
(backprop); without it the blocks are no-op context managers, so both variants execute
the same statements.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--annotate", action="store_true")
ap.add_argument("--steps", type=int, default=3000)
ap.add_argument("--gym", default="gymnasium", choices=("gymnasium", "gym"))
args = ap.parse_args()

if args.annotate:
    import rlscope

    op = rlscope.operation
else:
    _null = contextlib.nullcontext()

    def op(name: str) -> contextlib.nullcontext[None]:
        return _null

gym = importlib.import_module(args.gym)
# gym 0.26's env checker calls np.bool8, gone in NumPy 2.
make_kwargs = {"disable_env_checker": True} if args.gym == "gym" else {}
torch.set_num_threads(1)
random.seed(0)
np.random.seed(0)
torch.manual_seed(0)
rng = np.random.default_rng(0)


class QNetwork(nn.Module):
    def __init__(self, n_obs: int, n_actions: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_obs, 120), nn.ReLU(), nn.Linear(120, 84),
                                 nn.ReLU(), nn.Linear(84, n_actions))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


env = gym.make("CartPole-v1", **make_kwargs)
n_obs = env.observation_space.shape[0]
n_actions = int(env.action_space.n)
env.action_space.seed(0)
q_net = QNetwork(n_obs, n_actions)
target_net = QNetwork(n_obs, n_actions)
target_net.load_state_dict(q_net.state_dict())
optimizer = torch.optim.Adam(q_net.parameters(), lr=2.5e-4)

size, batch_size, gamma = 10_000, 64, 0.99
learning_starts, train_every, target_every = 200, 4, 100
buf_obs = np.zeros((size, n_obs), np.float32)
buf_next = np.zeros((size, n_obs), np.float32)
buf_act = np.zeros(size, np.int64)
buf_rew = np.zeros(size, np.float32)
buf_done = np.zeros(size, np.float32)


def reset(seed: int | None = None) -> np.ndarray:
    with op("simulation"):
        out = env.reset(seed=seed)
    return np.asarray(out[0] if isinstance(out, tuple) else out, np.float32)


obs = reset(seed=0)
n_stored = 0
updates = 0
for step in range(args.steps):
    eps = max(0.05, 1.0 - step / (0.5 * args.steps))
    if rng.random() < eps:
        action = int(env.action_space.sample())  # exploration: no network involved
    else:
        obs_t = torch.as_tensor(obs).unsqueeze(0)
        with op("inference"):
            q_values = q_net(obs_t)
            action = int(q_values.argmax(dim=1).item())
    with op("simulation"):
        out = env.step(action)
    if len(out) == 5:
        next_obs, reward, terminated, truncated, _ = out
    else:  # gym 0.21's four-tuple
        next_obs, reward, terminated, _ = out
        truncated = False
    i = step % size
    buf_obs[i], buf_next[i], buf_act[i] = obs, next_obs, action
    buf_rew[i], buf_done[i] = reward, float(terminated)
    n_stored = step + 1
    obs = np.asarray(next_obs, np.float32)
    if terminated or truncated:
        obs = reset()
    if step >= learning_starts and step % train_every == 0:
        idx = rng.integers(0, min(n_stored, size), batch_size)
        b_obs, b_next = torch.as_tensor(buf_obs[idx]), torch.as_tensor(buf_next[idx])
        b_act = torch.as_tensor(buf_act[idx]).unsqueeze(1)
        b_rew, b_done = torch.as_tensor(buf_rew[idx]), torch.as_tensor(buf_done[idx])
        with op("backprop"):
            with torch.no_grad():
                target_max = target_net(b_next).max(dim=1).values
                td_target = b_rew + gamma * target_max * (1.0 - b_done)
            old_val = q_net(b_obs).gather(1, b_act).squeeze(1)
            loss = F.mse_loss(old_val, td_target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        updates += 1
        if step % target_every == 0:
            target_net.load_state_dict(q_net.state_dict())
print(f"done: {args.steps} steps, {updates} updates")
