"""Where rlscope's cost per vector step goes in the fast-env loop of
``fast_env_inflation.py`` (a 16-env CartPole vector env with a small torch policy): each
part of the loop timed apart, in one process, plain and recording blocks in turns.

    python scripts/bench/fast_env_parts.py [--vec envpool|dummy] [--parts policy,env,both]
        [--libs auto] [--pairs 150] [--steps 300]

Parts: ``policy`` (the policy's forward alone, on a fixed observation), ``env`` (the
vector env stepped with a fixed action), ``both`` (the loop). A recording block is a
session of its own: ``rlscope.start`` + ``intercept.enable(LIBS)`` (``none``: recording
without interception) before the vector env is made, ``disable`` + ``stop`` after it,
outside the timed part; 20 warm-up steps are not timed; the main thread's CPU clock
(``time.thread_time``). Per part: the median of the paired differences per vector step
and its standard error (from the quartiles). Last line:

    RESULT <part>_added_ns_per_vector_step=<ns> <part>_se_ns=<ns> ... (per part)
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vec", default="envpool", choices=("envpool", "dummy"))
    ap.add_argument("--parts", default="policy,env,both")
    ap.add_argument("--libs", default="auto")
    ap.add_argument("--pairs", type=int, default=150)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--envs", type=int, default=16)
    a = ap.parse_args()
    import torch

    import rlscope
    from rlscope import intercept

    torch.set_num_threads(1)
    torch.manual_seed(0)
    policy = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh(),
                                 torch.nn.Linear(64, 2))
    fixed_obs = np.random.default_rng(0).random((a.envs, 4), dtype=np.float32)
    fixed_action = np.zeros(a.envs, np.int64)

    def make():  # type: ignore[no-untyped-def]
        if a.vec == "envpool":
            import envpool

            env = envpool.make_gymnasium("CartPole-v1", num_envs=a.envs, seed=0,
                                         num_threads=1)
            return env, env.reset()[0]
        import gymnasium as gym
        from stable_baselines3.common import vec_env

        env = vec_env.DummyVecEnv([lambda: gym.make("CartPole-v1")] * a.envs)
        env.seed(0)
        return env, env.reset()

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return policy(torch.as_tensor(obs, dtype=torch.float32)).argmax(1).numpy()

    def block(part: str) -> float:
        env, obs = make()
        t0 = 0.0
        for i in range(20 + a.steps):
            if i == 20:
                t0 = time.thread_time()
            if part == "policy":
                act(fixed_obs)
            elif part == "env":
                obs = env.step(fixed_action)[0]
            else:
                obs = env.step(act(obs))[0]
        dt = (time.thread_time() - t0) / a.steps * 1e9
        env.close()
        return dt

    parts = a.parts.split(",")
    res: dict[tuple[str, str], list[float]] = {(p, m): [] for p in parts
                                                for m in ("plain", "rlscope")}
    with tempfile.TemporaryDirectory(prefix="rlscope-parts-") as tmp:
        for r in range(a.pairs):
            for p in parts:
                for m in ("plain", "rlscope") if r % 2 == 0 else ("rlscope", "plain"):
                    if m == "rlscope":
                        rlscope.start(os.path.join(tmp, f"{p}{r}"))
                        if a.libs != "none":
                            intercept.enable(a.libs)
                    res[p, m].append(block(p))
                    if m == "rlscope":
                        if a.libs != "none":
                            intercept.disable()
                        rlscope.stop()
    out = []
    for p in parts:
        d = [b - x for x, b in zip(res[p, "plain"], res[p, "rlscope"], strict=True)]
        q = statistics.quantiles(d, n=4)
        se = (q[2] - q[0]) / 1.35 * 1.25 / len(d) ** 0.5
        med = statistics.median(d)
        print(f"{p}: plain {statistics.median(res[p, 'plain']):.0f} ns per vector step; "
              f"added {med:.0f} ns (quartiles {q[0]:.0f} / {q[1]:.0f} / {q[2]:.0f}; "
              f"standard error ~{se:.0f}; {len(d)} pairs)")
        out.append(f"{p}_added_ns_per_vector_step={med:.0f} {p}_se_ns={se:.0f}")
    print("RESULT " + " ".join(out))


if __name__ == "__main__":
    main()
