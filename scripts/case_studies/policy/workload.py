"""One stable-baselines3 training run of case study (a), unannotated but for the phase:
rls-prof's sb3 integration adds inference, simulation and backprop.

    python scripts/case_studies/policy/workload.py --algo sac --env Pendulum-v1 --steps 4096
    python scripts/case_studies/policy/workload.py --algo ppo --env Hopper-v5 --steps 8192 \
        --n-envs 4 --vec subproc

SB3's default hyperparameters for each algorithm (the studies compared algorithms as
their libraries ship them), seeded, on the CPU with one thread. Prints one line:
``policy: algo=... env=... steps=... wall_s=... us_per_step=...`` (the training phase,
timed by the workload itself).
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym
import stable_baselines3 as sb3
import torch

import rlscope

ALGOS = {"ppo": sb3.PPO, "a2c": sb3.A2C, "sac": sb3.SAC, "td3": sb3.TD3, "dqn": sb3.DQN}


def make_env(env_id: str) -> gym.Env:
    if env_id == "LunarLanderContinuous-v3":  # gymnasium 1.x: an option of LunarLander-v3
        return gym.make("LunarLander-v3", continuous=True)
    return gym.make(env_id)


def make_vec_env(env_id: str, n: int, vec: str) -> Any:
    """``n`` copies of the env in SB3's DummyVecEnv (stepped in turn in this process) or
    SubprocVecEnv (one worker process each, stepped in lock-step)."""
    from stable_baselines3.common.env_util import make_vec_env as sb3_make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    cls = SubprocVecEnv if vec == "subproc" else DummyVecEnv
    return sb3_make_vec_env(functools.partial(make_env, env_id), n_envs=n, seed=0,
                            vec_env_cls=cls)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--algo", choices=sorted(ALGOS), required=True)
    ap.add_argument("--env", required=True)
    ap.add_argument("--steps", type=int, required=True, help="environment steps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-envs", type=int, default=1, help="environments stepped together")
    ap.add_argument("--vec", choices=["dummy", "subproc"], default="dummy",
                    help="with --n-envs: in this process, or one worker process each")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rlscope.set_metadata(algo=args.algo, env=args.env, framework="pytorch")
    env = make_env(args.env) if args.n_envs == 1 else make_vec_env(args.env, args.n_envs,
                                                                    args.vec)
    model = ALGOS[args.algo]("MlpPolicy", env, seed=args.seed, device="cpu", verbose=0)
    t0 = time.perf_counter()
    with rlscope.phase("training"):
        model.learn(total_timesteps=args.steps)
    wall = time.perf_counter() - t0
    steps = model.num_timesteps
    print(f"policy: algo={args.algo} env={args.env} steps={steps} wall_s={wall:.3f} "
          f"us_per_step={wall / steps * 1e6:.1f}", flush=True)


if __name__ == "__main__":  # SubprocVecEnv's workers import this file: not at import
    main()
