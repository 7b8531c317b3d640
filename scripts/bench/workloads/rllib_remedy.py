"""RLlib PPO jobs for the actor/learner remedy benchmark (scripts/bench/remedy_actors.py):
one bound by sampling, one by the learner update, on a 2-core machine.

  sampler  CartPole whose every step also waits SLOW_STEP_S (a simulator outside
           Python: a game engine, a robot, a renderer), 1 env per runner, 256-step
           batches, a small update
  learner  CartPole, 2 envs per runner, 512-step batches, a 512x512 network trained 20
           epochs of 64-step minibatches: the update takes most of the iteration

    python rllib_remedy.py profile WORKLOAD RUNNERS LEARNERS ITERATIONS
        ITERATIONS training iterations of one configuration (run it under rls-prof)
    python rllib_remedy.py measure WORKLOAD R0 L0 R1 L1 ROUNDS OUT
        both configurations (R env runners, L learners) built in one Ray session, one
        warm-up iteration each, then ROUNDS rounds of one iteration of each, order
        alternating, each timed with perf_counter around train(); OUT: JSON lists of the
        iteration times {"base": [...], "remedy": [...]}
"""

from __future__ import annotations

import json
import sys
import time

import gymnasium as gym
import ray
from ray.rllib.algorithms.ppo import PPOConfig
from ray.tune.registry import register_env

SLOW_STEP_S = 0.004


class SlowStep(gym.Wrapper):
    """Each step waits SLOW_STEP_S besides CartPole's own (no CPU taken)."""

    def step(self, action):
        time.sleep(SLOW_STEP_S)
        return self.env.step(action)


def _slow_cartpole(_config):
    return SlowStep(gym.make("CartPole-v1"))


def config(workload: str, runners: int, learners: int) -> PPOConfig:
    c = PPOConfig()
    if workload == "sampler":
        register_env("SlowCartPole", _slow_cartpole)
        c = (c.environment("SlowCartPole")
             .env_runners(num_env_runners=runners, num_envs_per_env_runner=1,
                          rollout_fragment_length="auto")
             .training(train_batch_size=256, minibatch_size=128, num_epochs=1))
    elif workload == "learner":
        c = (c.environment("CartPole-v1")
             .env_runners(num_env_runners=runners, num_envs_per_env_runner=2,
                          rollout_fragment_length="auto")
             .training(train_batch_size=512, minibatch_size=64, num_epochs=20)
             .rl_module(model_config={"fcnet_hiddens": [512, 512]}))
    else:
        raise SystemExit(f"unknown workload {workload!r}: sampler or learner")
    return c.learners(num_learners=learners)


def main(argv: list[str]) -> None:
    mode, workload = argv[0], argv[1]
    # Logical CPUs for Ray's scheduling: both configurations' actors exist at once in
    # 'measure' (they take turns; the machine's cores are what they share).
    ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False)
    if mode == "profile":
        runners, learners, iterations = int(argv[2]), int(argv[3]), int(argv[4])
        algo = config(workload, runners, learners).build()
        for _ in range(iterations):
            algo.train()
        algo.stop()
    elif mode == "measure":
        r0, l0, r1, l1, rounds, out = (int(argv[2]), int(argv[3]), int(argv[4]),
                                       int(argv[5]), int(argv[6]), argv[7])
        algos = {"base": config(workload, r0, l0).build(),
                 "remedy": config(workload, r1, l1).build()}
        for a in algos.values():
            a.train()  # warm-up
        times: dict[str, list[float]] = {"base": [], "remedy": []}
        for i in range(rounds):
            for name in (("base", "remedy") if i % 2 == 0 else ("remedy", "base")):
                t0 = time.perf_counter()
                algos[name].train()
                times[name].append(time.perf_counter() - t0)
        for a in algos.values():
            a.stop()
        with open(out, "w") as f:
            json.dump(times, f)
    ray.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
