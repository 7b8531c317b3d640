"""A small PPO agent for gymnasium's CartPole-v1, annotated for rlscope.

Plain PyTorch, one thread, on the CPU (or ``--device cuda``). Runs as an ordinary script::

    python examples/ppo_cartpole.py

or under the profiler::

    rls-prof -o runs/ppo -- python examples/ppo_cartpole.py
    rls-analyze report runs/ppo

Annotations:

* ``rlscope.phase("training")`` around the whole training loop,
* ``rlscope.operation("inference")`` around each policy forward pass that
  picks an action (and the one value estimate that bootstraps a rollout),
* ``rlscope.operation("simulation")`` around every ``env.step``/``env.reset``,
* ``rlscope.operation("backprop")`` around each minibatch update (loss,
  backward, optimizer step).

The last line printed is machine readable: the loop's own wall time (measured
with ``time.perf_counter`` around the training phase) and the exact number of
times each operation was entered, e.g.::

    demo: wall_s=18.204 inference_calls=61500 simulation_calls=62310 backprop_calls=3840 ...
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
import torch
from torch import nn

import rlscope

ENV_ID = "CartPole-v1"


def mlp(n_in: int, n_out: int, hidden: int = 64, out_gain: float = 1.0) -> nn.Sequential:
    layers = [
        nn.Linear(n_in, hidden),
        nn.Tanh(),
        nn.Linear(hidden, hidden),
        nn.Tanh(),
        nn.Linear(hidden, n_out),
    ]
    for layer in layers:
        if isinstance(layer, nn.Linear):
            gain = out_gain if layer is layers[-1] else np.sqrt(2.0)
            nn.init.orthogonal_(layer.weight, gain)
            nn.init.zeros_(layer.bias)
    return nn.Sequential(*layers)


class ActorCritic(nn.Module):
    """Separate 64x64 tanh MLPs for the policy logits and the state value."""

    def __init__(self, obs_dim: int, n_actions: int) -> None:
        super().__init__()
        self.actor = mlp(obs_dim, n_actions, out_gain=0.01)
        self.critic = mlp(obs_dim, 1, out_gain=1.0)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)

    def dist(self, obs: torch.Tensor) -> torch.distributions.Categorical:
        return torch.distributions.Categorical(logits=self.actor(obs))


class Counts:
    """How many times each annotated operation was entered."""

    def __init__(self) -> None:
        self.inference = 0
        self.simulation = 0
        self.backprop = 0


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    dones: np.ndarray,
    last_value: float,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalized advantage estimation over one rollout; returns (advantages, returns).

    ``dones[t]`` is 1 where step t ended an episode: the chain is cut there. A
    time-limit truncation is bootstrapped by the caller, which folds
    ``gamma * V(final obs)`` into ``rewards[t]``.
    """
    n = rewards.shape[0]
    adv = np.zeros(n, dtype=np.float32)
    next_value = last_value
    running = 0.0
    for t in range(n - 1, -1, -1):
        not_done = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_value * not_done - values[t]
        running = delta + gamma * lam * not_done * running
        adv[t] = running
        next_value = values[t]
    return adv, adv + values


def train(args: argparse.Namespace) -> None:
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    rng = torch.Generator().manual_seed(args.seed)

    env = gym.make(ENV_ID)
    obs_dim = env.observation_space.shape[0]
    n_actions = env.action_space.n
    dev = torch.device(args.device)
    model = ActorCritic(obs_dim, n_actions).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, eps=1e-5)

    rlscope.set_metadata(algo="PPO", env=ENV_ID, framework="pytorch")

    n = args.rollout_steps
    total = args.total_steps
    n_rollouts = max(1, total // n)
    total = n_rollouts * n
    counts = Counts()

    obs_buf = torch.zeros(n, obs_dim, device=dev)
    act_buf = torch.zeros(n, dtype=torch.long, device=dev)
    logp_buf = torch.zeros(n, device=dev)
    val_buf = torch.zeros(n, device=dev)
    rew_buf = torch.zeros(n)  # rewards and dones stay on the host: GAE runs in numpy
    done_buf = torch.zeros(n)

    episode_returns: list[float] = []
    ep_ret = 0.0
    print_every = max(1, n_rollouts // args.log_lines)

    t0 = time.perf_counter()
    with rlscope.phase("training"):
        with rlscope.operation("simulation"):
            obs, _ = env.reset(seed=args.seed)
        counts.simulation += 1
        obs_t = torch.as_tensor(obs, dtype=torch.float32, device=dev)
        steps = 0

        for rollout in range(n_rollouts):
            # Linearly decaying learning rate keeps late updates from undoing the
            # policy once it balances well.
            for group in opt.param_groups:
                group["lr"] = args.lr * (1.0 - rollout / n_rollouts)

            # ---- collect n steps with the current policy ----
            for t in range(n):
                with rlscope.operation("inference"), torch.no_grad():
                    d = model.dist(obs_t)
                    action = d.sample()
                    logp = d.log_prob(action)
                    value = model.value(obs_t)
                    a = int(action.item())
                counts.inference += 1

                with rlscope.operation("simulation"):
                    next_obs, reward, terminated, truncated, _ = env.step(a)
                counts.simulation += 1

                obs_buf[t] = obs_t
                act_buf[t] = action
                logp_buf[t] = logp
                val_buf[t] = value
                rew_buf[t] = float(reward)
                done_buf[t] = float(terminated or truncated)
                ep_ret += float(reward)

                if terminated or truncated:
                    if truncated and not terminated:
                        # Time limit, not failure: bootstrap from the state we were
                        # cut off in.
                        with rlscope.operation("inference"), torch.no_grad():
                            v_final = model.value(
                                torch.as_tensor(next_obs, dtype=torch.float32, device=dev)
                            ).item()
                        counts.inference += 1
                        rew_buf[t] += args.gamma * v_final
                    episode_returns.append(ep_ret)
                    ep_ret = 0.0
                    with rlscope.operation("simulation"):
                        next_obs, _ = env.reset()
                    counts.simulation += 1
                obs_t = torch.as_tensor(next_obs, dtype=torch.float32, device=dev)

            steps += n
            with rlscope.operation("inference"), torch.no_grad():
                last_value = model.value(obs_t).item()
            counts.inference += 1

            adv_np, ret_np = gae(
                rew_buf.numpy(), val_buf.cpu().numpy(), done_buf.numpy(),
                last_value, args.gamma, args.lam,
            )
            adv, ret = torch.from_numpy(adv_np).to(dev), torch.from_numpy(ret_np).to(dev)

            # ---- PPO update: a few epochs of shuffled minibatches ----
            for _epoch in range(args.epochs):
                perm = torch.randperm(n, generator=rng)
                for start in range(0, n, args.minibatch):
                    idx = perm[start : start + args.minibatch].to(dev)
                    with rlscope.operation("backprop"):
                        mb_adv = adv[idx]
                        mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                        d = model.dist(obs_buf[idx])
                        logp = d.log_prob(act_buf[idx])
                        ratio = torch.exp(logp - logp_buf[idx])
                        clipped = torch.clamp(ratio, 1 - args.clip, 1 + args.clip)
                        pg_loss = -torch.min(ratio * mb_adv, clipped * mb_adv).mean()
                        v_loss = 0.5 * ((model.value(obs_buf[idx]) - ret[idx]) ** 2).mean()
                        entropy = d.entropy().mean()
                        loss = pg_loss + args.vf_coef * v_loss - args.ent_coef * entropy
                        opt.zero_grad(set_to_none=True)
                        loss.backward()
                        nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                        opt.step()
                    counts.backprop += 1

            rlscope.report_progress(steps, total)
            if (rollout + 1) % print_every == 0 or rollout + 1 == n_rollouts:
                recent = episode_returns[-20:]
                mean_ret = sum(recent) / len(recent) if recent else float("nan")
                print(
                    f"demo: progress steps={steps} episodes={len(episode_returns)} "
                    f"mean_return_last20={mean_ret:.1f} elapsed_s={time.perf_counter() - t0:.1f}",
                    flush=True,
                )
    wall = time.perf_counter() - t0
    env.close()

    recent = episode_returns[-20:]
    final = sum(recent) / len(recent) if recent else float("nan")
    print(
        f"demo: wall_s={wall:.3f} inference_calls={counts.inference} "
        f"simulation_calls={counts.simulation} backprop_calls={counts.backprop} "
        f"steps={steps} episodes={len(episode_returns)} final_mean_return={final:.1f}",
        flush=True,
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--total-steps", type=int, default=80_000,
                   help="environment steps (rounded down to whole rollouts)")
    p.add_argument("--rollout-steps", type=int, default=512, help="steps per rollout")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=4, help="update epochs per rollout")
    p.add_argument("--minibatch", type=int, default=128, help="minibatch size")
    p.add_argument("--lr", type=float, default=2.5e-4, help="initial learning rate (decays to 0)")
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--lam", type=float, default=0.95)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--ent-coef", type=float, default=0.0)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--device", default="cpu",
                   help="where the policy and the update run (cpu, cuda, cuda:1)")
    p.add_argument("--log-lines", type=int, default=8,
                   help="about how many progress lines to print")
    args = p.parse_args(argv)
    if args.rollout_steps <= 0 or args.total_steps <= 0 or args.minibatch <= 0:
        p.error("--total-steps, --rollout-steps and --minibatch must be positive")
    return args


def main(argv: list[str] | None = None) -> None:
    torch.set_num_threads(1)
    train(parse_args(argv))


if __name__ == "__main__":
    main()
