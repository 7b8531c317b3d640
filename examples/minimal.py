"""The rlscope annotation API in a few lines (random actions, no learning).

    python examples/minimal.py                        # runs; annotations are no-ops
    rls-prof -o runs/minimal -- python examples/minimal.py
    rls-analyze report runs/minimal
"""

import gymnasium as gym

import rlscope

rlscope.set_metadata(algo="random", env="CartPole-v1", framework="none")
env = gym.make("CartPole-v1")
total = 5_000


@rlscope.operation("inference")        # as a decorator
def choose_action(obs):
    return env.action_space.sample()


with rlscope.phase("training"):
    with rlscope.operation("simulation"):   # as a context manager
        obs, _ = env.reset(seed=0)
    for t in range(1, total + 1):
        action = choose_action(obs)
        with rlscope.operation("simulation"):
            obs, reward, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                obs, _ = env.reset()
        if t % 1000 == 0:
            rlscope.report_progress(t, total)
print("done; profiling active:", rlscope.is_active())
