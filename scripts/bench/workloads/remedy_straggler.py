"""A rollout loop over SB3's SubprocVecEnv(2) on CartPole in which env 1 sleeps DELAY
seconds per step (a planted straggler: a slow reset, a slow simulator instance, a busy
core); ``fixed`` removes the delay (the remedy rlscope's lock-step verdict names); ``dummy`` keeps
it and steps both envs in the main process (DummyVecEnv: the oversubscription remedy).

    python remedy_straggler.py planted|fixed|dummy STEPS [DELAY]
Last line: ``RESULT loop_s=<seconds of the stepping loop>``.
"""

import sys
import time

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv


class Slow(gym.Wrapper):
    def __init__(self, env: gym.Env, delay: float) -> None:
        super().__init__(env)
        self.delay = delay

    def step(self, action):
        time.sleep(self.delay)
        return self.env.step(action)


def make(rank: int, delay: float):
    def thunk():
        env = gym.make("CartPole-v1")
        return Slow(env, delay) if rank == 1 and delay > 0 else env
    return thunk


if __name__ == "__main__":
    mode, steps = sys.argv[1], int(sys.argv[2])
    delay = float(sys.argv[3]) if len(sys.argv) > 3 else 0.004
    cls = DummyVecEnv if mode == "dummy" else SubprocVecEnv
    vec = cls([make(i, 0.0 if mode == "fixed" else delay) for i in range(2)])
    vec.seed(0)
    vec.reset()
    actions = np.zeros(2, dtype=np.int64)
    t = time.perf_counter()
    for i in range(steps):
        actions[:] = i % 2
        vec.step(actions)
    loop = time.perf_counter() - t
    vec.close()
    print(f"RESULT loop_s={loop:.4f}")
