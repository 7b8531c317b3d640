"""gymnasium's AsyncVectorEnv stepping CartPole with random actions.
Usage: gym_async.py [N_ENVS] [STEPS] [CONTEXT]"""

import sys

import gymnasium as gym

if __name__ == "__main__":
    n_envs = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    context = sys.argv[3] if len(sys.argv) > 3 else None
    envs = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * n_envs,
                                     context=context)
    envs.reset(seed=0)
    for _ in range(steps):
        envs.step(envs.action_space.sample())
    envs.close()
    print("done")
