"""A hand-written PPO on CartPole with a synchronous vector env (our own small code, CPU,
fixed seeds): the kind of single-file training loop rlscope must break into operations
with no annotation.

Usage: handwritten_ppo.py [--annotate] [--updates N] [--gym gymnasium|gym]

With ``--annotate`` the same code runs with ``rlscope.operation`` blocks around action
selection (inference), vector env steps and resets (simulation) and the update
(backprop: bootstrap value, advantages, epochs of minibatch gradient steps); without it
the blocks are no-op context managers, so both variants execute the same statements.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import random

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

ap = argparse.ArgumentParser()
ap.add_argument("--annotate", action="store_true")
ap.add_argument("--updates", type=int, default=6)
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

num_envs, num_steps, epochs, minibatches = 4, 128, 4, 4
gamma, lam, clip_coef, ent_coef, vf_coef = 0.99, 0.95, 0.2, 0.01, 0.5
batch = num_envs * num_steps
mb_size = batch // minibatches


def make_env() -> object:
    return gym.make("CartPole-v1", **make_kwargs)


def layer(n_in: int, n_out: int, std: float = np.sqrt(2)) -> nn.Linear:
    lin = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.constant_(lin.bias, 0.0)
    return lin


class Agent(nn.Module):
    def __init__(self, n_obs: int, n_actions: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(layer(n_obs, 64), nn.Tanh(), layer(64, 64), nn.Tanh(),
                                    layer(64, 1, 1.0))
        self.actor = nn.Sequential(layer(n_obs, 64), nn.Tanh(), layer(64, 64), nn.Tanh(),
                                   layer(64, n_actions, 0.01))

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None
                             ) -> tuple[torch.Tensor, ...]:
        logits = self.actor(x)
        dist = Categorical(logits=logits)
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.critic(x)


envs = gym.vector.SyncVectorEnv([make_env for _ in range(num_envs)])
n_obs = envs.single_observation_space.shape[0]
n_actions = int(envs.single_action_space.n)
agent = Agent(n_obs, n_actions)
optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)

obs_buf = torch.zeros((num_steps, num_envs, n_obs))
act_buf = torch.zeros((num_steps, num_envs), dtype=torch.long)
logp_buf = torch.zeros((num_steps, num_envs))
rew_buf = torch.zeros((num_steps, num_envs))
done_buf = torch.zeros((num_steps, num_envs))
val_buf = torch.zeros((num_steps, num_envs))

with op("simulation"):
    out = envs.reset(seed=0)
next_obs = torch.as_tensor(np.asarray(out[0] if isinstance(out, tuple) else out,
                                      np.float32))
next_done = torch.zeros(num_envs)
perm_rng = np.random.default_rng(0)
for _update in range(args.updates):
    for step in range(num_steps):
        obs_buf[step] = next_obs
        done_buf[step] = next_done
        with op("inference"), torch.no_grad():
            action, logprob, _, value = agent.get_action_and_value(next_obs)
        val_buf[step] = value.flatten()
        act_buf[step] = action
        logp_buf[step] = logprob
        with op("simulation"):
            out = envs.step(action.numpy())
        if len(out) == 5:
            o, reward, terminated, truncated, _ = out
            done = np.logical_or(terminated, truncated)
        else:  # gym 0.21's four-tuple
            o, reward, done, _ = out
        rew_buf[step] = torch.as_tensor(np.asarray(reward, np.float32))
        next_obs = torch.as_tensor(np.asarray(o, np.float32))
        next_done = torch.as_tensor(np.asarray(done, np.float32))

    with op("backprop"):
        with torch.no_grad():  # bootstrap value and generalised advantage estimation
            next_value = agent.get_value(next_obs).reshape(1, -1)
            adv = torch.zeros_like(rew_buf)
            last = torch.zeros(num_envs)
            for t in reversed(range(num_steps)):
                if t == num_steps - 1:
                    not_done, nv = 1.0 - next_done, next_value
                else:
                    not_done, nv = 1.0 - done_buf[t + 1], val_buf[t + 1]
                delta = rew_buf[t] + gamma * nv * not_done - val_buf[t]
                last = delta + gamma * lam * not_done * last
                adv[t] = last
            returns = adv + val_buf
        b_obs, b_act = obs_buf.reshape(-1, n_obs), act_buf.reshape(-1)
        b_logp, b_adv = logp_buf.reshape(-1), adv.reshape(-1)
        b_ret, b_val = returns.reshape(-1), val_buf.reshape(-1)
        for _epoch in range(epochs):
            order = perm_rng.permutation(batch)
            for start in range(0, batch, mb_size):
                mb = torch.as_tensor(order[start:start + mb_size])
                _, new_logp, entropy, new_val = agent.get_action_and_value(b_obs[mb],
                                                                            b_act[mb])
                ratio = (new_logp - b_logp[mb]).exp()
                mb_adv = b_adv[mb]
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(-mb_adv * ratio,
                                    -mb_adv * ratio.clamp(1 - clip_coef, 1 + clip_coef)).mean()
                v_loss = 0.5 * ((new_val.view(-1) - b_ret[mb]) ** 2).mean()
                loss = pg_loss - ent_coef * entropy.mean() + vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                optimizer.step()
print(f"done: {args.updates} updates of {batch} steps")
