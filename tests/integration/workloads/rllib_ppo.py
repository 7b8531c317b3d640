"""RLlib PPO on CartPole, new API stack, no rlscope code: 2 env runners (2 envs each),
a local learner, one small training iteration."""

import sys

import ray
from ray.rllib.algorithms.ppo import PPOConfig

if __name__ == "__main__":
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    config = (PPOConfig().environment("CartPole-v1")
              .env_runners(num_env_runners=2, num_envs_per_env_runner=2,
                           rollout_fragment_length=64)
              .training(train_batch_size=256, minibatch_size=64, num_epochs=1)
              .learners(num_learners=0))
    algo = config.build()
    for _ in range(iterations):
        algo.train()
    algo.stop()
    ray.shutdown()
