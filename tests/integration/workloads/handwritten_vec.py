"""A hand-written PPO-style loop on a vector CartPole (our own small code, CPU, fixed seeds),
no rlscope import: what rlscope must break into operations with no annotation. It times
itself with time.perf_counter around the real calls and writes what it measured as JSON.

Usage: handwritten_vec.py OUT.json [--lib envpool|pufferlib] [--mode sync|async]
       [--backend native|serial|multiprocessing] [--updates N] [--steps N] [--envs N]
       [--api gymnasium|gym] [--full-batch] [--no-env] [--c-env cartpole|squared|pong]
       [--workers N] [--slow-env K --slow-ms X] [--first-done]

- sync: ``env.step(actions)`` per vector step (every env);
- async: ``batch_size = envs // 2``; ``recv()`` a batch, act on it, ``send`` its actions;
  --full-batch: every env in each batch (``batch_size = envs``, EnvPool's send/recv API on
  a pool that is not async);
- --lib envpool (default): ``envpool.make_gymnasium`` (or ``make_gym``: --api gym);
- --lib pufferlib: --backend native (default) is PufferLib's C CartPole, one object
  stepping every env (--c-env: another of its C envs; the policy takes its observation
  and action sizes); serial and multiprocessing are ``pufferlib.vector`` over gymnasium's
  CartPole (multiprocessing: --workers, 2 by default; async needs it); --slow-env K:
  env K sleeps --slow-ms (default 2) in each step (its worker lags); --first-done: batches
  of the workers done first (``sync_traj=False``; PufferLib 3 takes them in turn by
  default, so a slow worker delays every other batch instead);
- --no-env: the same loop with the env's calls hidden from rlscope (a plain closure
  around a numpy "env" that rlscope does not know), for the no-env fallback.

Measured (seconds, counts): ``env_s`` (step / recv+send), ``forwards`` (action selections:
one policy forward each), ``backprop_s`` (from the update's bootstrap value to the end of
its last optimizer step), ``vector_steps``; async mode: ``batch_envs``, per env, how many
of the batches ``recv`` returned held it.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--lib", default="envpool", choices=("envpool", "pufferlib"))
ap.add_argument("--mode", default="sync", choices=("sync", "async"))
ap.add_argument("--backend", default="native", choices=("native", "serial", "multiprocessing"))
ap.add_argument("--updates", type=int, default=4)
ap.add_argument("--steps", type=int, default=64)
ap.add_argument("--envs", type=int, default=16)
ap.add_argument("--api", default="gymnasium", choices=("gymnasium", "gym"))
ap.add_argument("--full-batch", action="store_true")
ap.add_argument("--no-env", action="store_true")
ap.add_argument("--c-env", default="cartpole", choices=("cartpole", "squared", "pong"))
ap.add_argument("--workers", type=int, default=2)
ap.add_argument("--slow-env", type=int, default=-1)
ap.add_argument("--slow-ms", type=float, default=2.0)
ap.add_argument("--first-done", action="store_true")
args = ap.parse_args()

torch.set_num_threads(1)
np.random.seed(0)
torch.manual_seed(0)
perf = time.perf_counter

n_envs = args.envs
batch_size = n_envs // 2 if args.mode == "async" and not args.full_batch else n_envs
epochs, minibatches = 4, 4


class Hidden:
    """A CartPole-shaped env rlscope does not recognise (no step/reset to hook)."""

    def __init__(self, n: int) -> None:
        self.rng = np.random.default_rng(0)
        self.n = n

    def __call__(self, actions: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        t = time.perf_counter() + 2e-5  # ~20 us of "env" work per call, Python
        while time.perf_counter() < t:
            pass
        return self.rng.standard_normal((self.n, 4)).astype(np.float32), np.ones(self.n)


def make_cartpole(index: int):  # type: ignore[no-untyped-def]
    """gymnasium's CartPole; env ``--slow-env`` sleeps ``--slow-ms`` in each step."""
    import gymnasium

    env = gymnasium.make("CartPole-v1")
    if index != args.slow_env:
        return env

    class Slow(gymnasium.Wrapper):  # type: ignore[type-arg]
        def step(self, action):  # type: ignore[no-untyped-def]
            time.sleep(args.slow_ms / 1000)
            return self.env.step(action)

    return Slow(env)


def make_pufferlib():  # type: ignore[no-untyped-def]
    if args.backend == "native" and args.c_env == "squared":
        from pufferlib.ocean.squared.squared import Squared

        return Squared(num_envs=n_envs)
    if args.backend == "native" and args.c_env == "pong":
        from pufferlib.ocean.pong.pong import Pong

        return Pong(num_envs=n_envs)
    if args.backend == "native":
        from pufferlib.ocean.cartpole.cartpole import Cartpole

        return Cartpole(num_envs=n_envs, report_interval=args.steps)
    import functools

    import gymnasium
    import pufferlib.emulation
    import pufferlib.vector

    creator = functools.partial(pufferlib.emulation.GymnasiumPufferEnv,
                                env_creator=gymnasium.make, env_args=["CartPole-v1"])
    if args.backend == "serial":
        return pufferlib.vector.make(creator, num_envs=n_envs, backend=pufferlib.vector.Serial)
    creators = [functools.partial(pufferlib.emulation.GymnasiumPufferEnv,
                                  env_creator=make_cartpole, env_args=[i])
                for i in range(n_envs)]
    if args.first_done:  # not through make(), which refuses sync_traj
        return pufferlib.vector.Multiprocessing(
            creators, [[]] * n_envs, [{}] * n_envs, n_envs, num_workers=args.workers,
            batch_size=batch_size, overwork=True, sync_traj=False)
    return pufferlib.vector.make(creators, env_args=[[]] * n_envs,
                                 env_kwargs=[{}] * n_envs, num_envs=n_envs,
                                 num_workers=args.workers, batch_size=batch_size,
                                 overwork=True, backend=pufferlib.vector.Multiprocessing)


if args.no_env:
    hidden = Hidden(n_envs)
    env = None
elif args.lib == "pufferlib":
    env = make_pufferlib()
else:
    import envpool

    make = envpool.make_gymnasium if args.api == "gymnasium" else envpool.make_gym
    env = make("CartPole-v1", num_envs=n_envs, batch_size=batch_size, seed=0,
               num_threads=min(n_envs, 2))


OBS, ACTIONS = 4, 2  # CartPole's
if args.lib == "pufferlib" and args.backend == "native" and not args.no_env:
    OBS = int(np.prod(env.single_observation_space.shape))
    ACTIONS = int(env.single_action_space.n)


class Agent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.critic = nn.Sequential(nn.Linear(OBS, 64), nn.Tanh(), nn.Linear(64, 1))
        self.actor = nn.Sequential(nn.Linear(OBS, 64), nn.Tanh(), nn.Linear(64, ACTIONS))

    def act(self, x: torch.Tensor, action: torch.Tensor | None = None
            ) -> tuple[torch.Tensor, ...]:
        dist = Categorical(logits=self.actor(x))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.critic(x)


agent = Agent()
optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
measured = {"env_s": 0.0, "forwards": 0, "backprop_s": 0.0, "vector_steps": 0,
            "env_calls": 0, "batch_envs": [0] * n_envs}


def env_call(fn, *a):  # type: ignore[no-untyped-def]
    t0 = perf()
    r = fn(*a)
    measured["env_s"] += perf() - t0
    measured["env_calls"] += 1
    return r


if args.no_env:
    obs, _ = env_call(hidden, None)
elif args.mode == "sync":
    obs, _ = env_call(env.reset, 0) if args.lib == "pufferlib" else env_call(env.reset)
else:
    env_call(env.async_reset, 0) if args.lib == "pufferlib" else env_call(env.async_reset)
t_start = perf()
for _update in range(args.updates):
    obs_l, act_l, logp_l, rew_l, val_l = [], [], [], [], []
    for _step in range(args.steps):
        if args.mode == "async" and not args.no_env:
            obs, rew, term, trunc, info, *rest = env_call(env.recv)
            env_id = None if args.lib == "pufferlib" else info["env_id"]
            for i in (rest[0] if args.lib == "pufferlib" else env_id):
                measured["batch_envs"][int(i)] += 1
        # A copy (PufferLib reuses its buffers), one row per env.
        x = torch.tensor(np.asarray(obs, np.float32)).reshape(len(obs), -1)
        with torch.no_grad():
            action, logp, _, value = agent.act(x)
        measured["forwards"] += 1
        a = action.numpy()
        if args.no_env:
            obs, rew = env_call(hidden, a)
        elif args.mode == "sync":
            obs, rew, term, trunc, info = env_call(env.step, a)
        elif args.lib == "pufferlib":
            env_call(env.send, a)
        else:
            env_call(env.send, a, env_id)
        measured["vector_steps"] += 1
        obs_l.append(x)
        act_l.append(action)
        logp_l.append(logp)
        rew_l.append(torch.tensor(np.asarray(rew, np.float32)))
        val_l.append(value.flatten())
    t0 = perf()
    with torch.no_grad():  # bootstrap value, returns, advantages
        last_v = agent.critic(torch.as_tensor(np.asarray(obs, np.float32)).reshape(
            len(obs), -1)).flatten()
        ret = torch.stack(rew_l) + 0.99 * torch.cat([torch.stack(val_l)[1:], last_v[None]])
        adv = ret - torch.stack(val_l)
    b_obs, b_act = torch.cat(obs_l), torch.cat(act_l)
    b_logp, b_adv, b_ret = torch.cat(logp_l), adv.flatten(), ret.flatten()
    n = len(b_obs)
    for _epoch in range(epochs):
        order = torch.randperm(n)
        for k in range(minibatches):
            mb = order[k * n // minibatches:(k + 1) * n // minibatches]
            _, new_logp, ent, new_v = agent.act(b_obs[mb], b_act[mb])
            ratio = (new_logp - b_logp[mb]).exp()
            pg = torch.max(-b_adv[mb] * ratio, -b_adv[mb] * ratio.clamp(0.8, 1.2)).mean()
            loss = pg - 0.01 * ent.mean() + 0.5 * ((new_v.flatten() - b_ret[mb]) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
            optimizer.step()
    measured["backprop_s"] += perf() - t0
measured["loop_s"] = perf() - t_start
if env is not None:
    env.close()
with open(args.out, "w") as f:
    json.dump(measured, f)
