"""rlscope's own cost per vector step, and whether it grows with the number of envs: a
vector step over trivial envs (``step`` returns constants: almost no env time, so the
difference is rlscope's book-keeping and little else), instrumented vs plain, in one
process (paired chunks, order alternating; each chunk a fresh vector env after 200
warm-up steps, timed by the thread's CPU clock so that time descheduled on a loaded
machine is left out).

    python scripts/bench/vector_step_cost.py [--pairs 15] [--steps 3000] [--envs 4,16,64]

Loops: gymnasium ``SyncVectorEnv`` of trivial gymnasium envs (made by ``gymnasium.make``,
as users make them) and SB3 ``DummyVecEnv`` of the same; EnvPool CartPole (its native
pool: env time included, the same in both). Instrumented = ``rlscope.start`` +
``rlscope.intercept.enable("auto")``, what rls-prof does in a profiled process. Last line:

    RESULT <loop>_<envs>_added_ns_per_vector_step=<median> ... (per loop and size)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np


def trivial_env_class() -> type:
    import gymnasium as gym

    class Trivial(gym.Env):  # type: ignore[type-arg]
        observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        action_space = gym.spaces.Discrete(2)
        obs = np.zeros(4, np.float32)

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            return self.obs, {}

        def step(self, action: Any) -> Any:
            return self.obs, 1.0, False, False, {}

    return Trivial


def make(kind: str, n: int) -> Any:
    import gymnasium as gym

    if "Trivial-v0" not in gym.registry:
        gym.register("Trivial-v0", entry_point=trivial_env_class())
    if kind == "envpool":
        import envpool

        env = envpool.make_gymnasium("CartPole-v1", num_envs=n, seed=0, num_threads=1)
        env.reset()
        return env
    fns = [lambda: gym.make("Trivial-v0", disable_env_checker=True) for _ in range(n)]
    if kind == "sync":
        env = gym.vector.SyncVectorEnv(fns)
        env.reset(seed=0)
        return env
    from stable_baselines3.common.vec_env import DummyVecEnv

    env = DummyVecEnv(fns)
    env.reset()
    return env


def chunk(kind: str, n: int, steps: int) -> float:
    env = make(kind, n)
    a = np.zeros(n, np.int64)
    for _ in range(200):
        env.step(a)
    t0 = time.thread_time_ns()
    for _ in range(steps):
        env.step(a)
    dt = (time.thread_time_ns() - t0) / steps
    env.close()
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=15)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--envs", default="4,16,64")
    ap.add_argument("--loops", default="sync,dummy,envpool")
    a = ap.parse_args()
    import torch

    import rlscope
    from rlscope import intercept

    torch.set_num_threads(1)
    result = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in a.loops.split(","):
            for n in (int(x) for x in a.envs.split(",")):
                plain: list[float] = []
                inst: list[float] = []
                for r in range(a.pairs):
                    for m in (("plain", "rl") if r % 2 == 0 else ("rl", "plain")):
                        if m == "rl":
                            rlscope.start(os.path.join(tmp, f"{kind}{n}_{r}"))
                            intercept.enable("auto")
                            inst.append(chunk(kind, n, a.steps))
                            intercept.disable()
                            rlscope.stop()
                        else:
                            plain.append(chunk(kind, n, a.steps))
                d = [y - x for x, y in zip(plain, inst, strict=True)]
                q = statistics.quantiles(d, n=4)
                print(f"{kind} {n} envs: plain {statistics.median(plain):.0f} ns/vector step; "
                      f"added {q[1]:.0f} ns/vector step (quartiles {q[0]:.0f} {q[2]:.0f}), "
                      f"{q[1] / n:.0f} ns/env step", flush=True)
                result.append(f"{kind}_{n}_added_ns_per_vector_step={q[1]:.0f}")
    print("RESULT " + " ".join(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
