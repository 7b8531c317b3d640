"""RLlib PPO on CartPole (new API stack, no rlscope code): 2 env runners, a local
learner, ITERATIONS training iterations; writes RLlib's own timers of each iteration's
results (``timers``: env_runner_sampling_timer, learner_update_timer, synch_weights) and
the iteration's wall time measured around ``train()`` to OUT (JSON).

    python rllib_timers.py OUT [ITERATIONS] [NUM_ENV_RUNNERS]"""

import json
import sys
import time

import ray
from ray.rllib.algorithms.ppo import PPOConfig

if __name__ == "__main__":
    out = sys.argv[1]
    iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    runners = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    config = (PPOConfig().environment("CartPole-v1")
              .env_runners(num_env_runners=runners, num_envs_per_env_runner=2,
                           rollout_fragment_length="auto")
              .training(train_batch_size=256, minibatch_size=64, num_epochs=1)
              .learners(num_learners=0))
    algo = config.build()
    rows = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        result = algo.train()
        wall = time.perf_counter() - t0
        rows.append({"wall_s": wall, "timers": {k: v for k, v in result["timers"].items()
                                                if isinstance(v, (int, float))}})
    algo.stop()
    ray.shutdown()
    with open(out, "w") as f:
        json.dump(rows, f)
