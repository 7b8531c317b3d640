"""A vector env with a planted straggler, unmodified for rlscope (no rlscope import).

Every env is wrapped in a user wrapper whose ``step`` busy-loops (not sleeps) ~2 ms, and
in env STRAGGLER takes 40 ms in 30% of its steps: the extra 38 ms slept, so the planted
straggler stands out by as much on a loaded machine, where other processes stretch every
env's busy loop by their own share of the cores. Each env measures its own step commands
and writes them to OUT/truth.<index>.json when closed: the ground truth rlscope's
lock-step figures are checked against. A command is what the vector env asks of a worker
once per vector step or reset: SB3's worker resets right after a step that ends an
episode (same command), gymnasium's AsyncVectorEnv on the next step command.

    vecenv_straggler.py async|sync|sb3-subproc|sb3-dummy|ppo OUT [STEPS] [ENVS] [STRAGGLER]

``ppo``: SB3 PPO on CartPole with a SubprocVecEnv of these envs, STEPS total timesteps.
$VECENV_START_METHOD: the worker classes' start method (default: the library's).
"""

from __future__ import annotations

import json
import os
import sys
import time

import gymnasium as gym
import numpy as np

MODE = sys.argv[1]
OUT = sys.argv[2]
STEPS = int(sys.argv[3]) if len(sys.argv) > 3 else 150
ENVS = int(sys.argv[4]) if len(sys.argv) > 4 else 4
STRAGGLER = int(sys.argv[5]) if len(sys.argv) > 5 else 2
BASE_S, SLOW_S, SLOW_P = 0.002, 0.040, 0.3
START = os.environ.get("VECENV_START_METHOD") or None


class Endless(gym.Env):
    """Never ends an episode: every command is one step."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(4, np.float32), {}

    def step(self, action):
        return np.zeros(4, np.float32), 1.0, False, False, {}


class Straggler(gym.Wrapper):
    def __init__(self, env, index: int, sb3: bool):
        super().__init__(env)
        self.index, self.sb3 = index, sb3
        self.rng = np.random.default_rng(index)
        self.commands: list[int] = []  # ns per command, as the env itself measures it
        self.done = False

    @staticmethod
    def busy(seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    def step(self, action):
        t0 = time.perf_counter_ns()
        d = BASE_S * self.rng.uniform(0.75, 1.25)
        self.busy(d)
        if self.index == STRAGGLER and self.rng.random() < SLOW_P:
            time.sleep(SLOW_S - d)
        r = self.env.step(action)
        self.commands.append(time.perf_counter_ns() - t0)
        self.done = bool(r[2] or r[3])
        return r

    def reset(self, **kwargs):
        t0 = time.perf_counter_ns()
        self.busy(BASE_S / 2)
        r = self.env.reset(**kwargs)
        dt = time.perf_counter_ns() - t0
        if self.sb3 and self.done and self.commands:
            self.commands[-1] += dt  # SB3 resets inside the step command
        else:
            self.commands.append(dt)
        self.done = False
        return r

    def close(self):
        with open(os.path.join(OUT, f"truth.{self.index}.json"), "w") as f:
            json.dump(self.commands, f)
        super().close()


class Make:
    """A picklable env factory (spawn and forkserver workers import this module)."""

    def __init__(self, index: int, sb3: bool, inner: str | None = None):
        self.index, self.sb3, self.inner = index, sb3, inner

    def __call__(self):
        env = gym.make(self.inner) if self.inner else Endless()
        return Straggler(env, self.index, self.sb3)


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    if MODE in ("async", "sync"):
        fns = [Make(i, False) for i in range(ENVS)]
        envs = (gym.vector.AsyncVectorEnv(fns, context=START) if MODE == "async"
                else gym.vector.SyncVectorEnv(fns))
        envs.reset(seed=0)
        actions = np.zeros(ENVS, np.int64)
        for _ in range(STEPS):
            envs.step(actions)
        envs.close()
    elif MODE in ("sb3-subproc", "sb3-dummy"):
        from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

        fns = [Make(i, True) for i in range(ENVS)]
        venv = (SubprocVecEnv(fns, start_method=START) if MODE == "sb3-subproc"
                else DummyVecEnv(fns))
        venv.reset()
        actions = np.zeros(ENVS, np.int64)
        for _ in range(STEPS):
            venv.step(actions)
        venv.close()
    elif MODE == "ppo":
        import torch
        from stable_baselines3 import PPO
        from stable_baselines3.common.vec_env import SubprocVecEnv

        torch.set_num_threads(1)
        venv = SubprocVecEnv([Make(i, True, "CartPole-v1") for i in range(ENVS)],
                             start_method=START)
        model = PPO("MlpPolicy", venv, n_steps=32, batch_size=64, n_epochs=2, seed=0)
        model.learn(total_timesteps=STEPS)
        venv.close()
    else:
        sys.exit(f"unknown mode {MODE}")
    print("done")


if __name__ == "__main__":
    main()
