"""An unmodified SB3 script: PPO on CartPole with a chosen vector env class (SubprocVecEnv
workers or DummyVecEnv in-process), for the run-level diagnosis.
Usage: sb3_vec_cls.py subproc|dummy [N_ENVS] [TIMESTEPS]"""

import sys

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

if __name__ == "__main__":
    torch.set_num_threads(1)
    cls = SubprocVecEnv if sys.argv[1] == "subproc" else DummyVecEnv
    n_envs = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 512
    env = make_vec_env("CartPole-v1", n_envs=n_envs, vec_env_cls=cls, seed=0)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=64, n_epochs=1, seed=0)
    model.learn(total_timesteps=steps)
    env.close()
    print("done")
