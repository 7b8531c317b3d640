"""SB3 PPO on CartPole with 4 envs in a SubprocVecEnv (the baseline) or a DummyVecEnv (the
remedy rlscope's IPC verdict names), timing ``model.learn`` itself.

    python remedy_vecenv.py subproc|dummy TIMESTEPS
Last line: ``RESULT loop_s=<seconds of learn()>``.
"""

import sys
import time

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

if __name__ == "__main__":
    torch.set_num_threads(1)
    cls = SubprocVecEnv if sys.argv[1] == "subproc" else DummyVecEnv
    env = make_vec_env("CartPole-v1", n_envs=4, vec_env_cls=cls, seed=0)
    model = PPO("MlpPolicy", env, n_steps=128, batch_size=128, n_epochs=1, seed=0,
                device="cpu")
    t = time.perf_counter()
    model.learn(total_timesteps=int(sys.argv[2]))
    loop = time.perf_counter() - t
    env.close()
    print(f"RESULT loop_s={loop:.4f}")
