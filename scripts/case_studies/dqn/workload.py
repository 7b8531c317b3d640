"""One DQN training run on CartPole-v1 with one framework, annotated for rlscope.

    python scripts/case_studies/dqn/workload.py --framework torch --steps 3000
    rls-prof -o runs/dqn-torch -- python scripts/case_studies/dqn/workload.py ...

Frameworks: torch (eager), tf-eager, tf-function, jax (jit). Operations:

* ``setup``: imports, building the agent, filling the replay buffer with random steps;
  inside it ``warmup``: the first act/update/target copy (tf.function tracing and JAX
  compilation happen here, so they stay out of the measured operations);
* then per measured step ``inference`` (greedy action from the online net, computed at
  every step so every step does the same work; epsilon-greedy picks it or a random one),
  ``simulation`` (env.step / reset), ``replay`` (buffer add and minibatch sampling,
  numpy: the same in every framework), ``backprop`` (one gradient step on a minibatch:
  loss, gradient, Adam, and every ``target_every`` steps the target copy);
  ``rlscope.report_progress`` after each.

Prints ``dqn: framework=... steps=... wall_s=... us_per_step=... on_cpu=...
warmup_s=... mean_return=...`` last; ``on_cpu``: the process's CPU time over the
training loop's wall time (below 1 when the machine's load took the CPU away from it).
"""

from __future__ import annotations

import argparse
import time

from common import Config, Replay, init_params, pin_threads

import rlscope

FRAMEWORKS = ("torch", "tf-eager", "tf-function", "jax")


def make_agent(framework: str, cfg: Config, seed: int):
    params = init_params(cfg, seed)
    if framework == "torch":
        from agent_torch import TorchAgent
        return TorchAgent(params, cfg)
    if framework in ("tf-eager", "tf-function"):
        from agent_tf import TFAgent
        return TFAgent(params, cfg, function=framework == "tf-function")
    from agent_jax import JaxAgent
    return JaxAgent(params, cfg)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--framework", choices=FRAMEWORKS, required=True)
    ap.add_argument("--steps", type=int, default=3000, help="measured (training) steps")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    pin_threads()
    cfg = Config()
    rlscope.set_metadata(framework=args.framework, algo="DQN", env="CartPole-v1")
    t_setup = time.perf_counter()
    with rlscope.operation("setup"):
        import gymnasium as gym
        import numpy as np

        agent = make_agent(args.framework, cfg, args.seed)
        env = gym.make("CartPole-v1")
        rng = np.random.default_rng(args.seed)
        buf = Replay(cfg.buffer, args.seed)
        obs, _ = env.reset(seed=args.seed)
        for _ in range(cfg.learning_starts):
            a = int(rng.integers(2))
            nxt, r, term, trunc, _ = env.step(a)
            buf.add(obs, a, float(r), nxt, term)
            obs = nxt if not (term or trunc) else env.reset()[0]
        t_warm = time.perf_counter()
        with rlscope.operation("warmup"):
            agent.act(obs)
            agent.update(buf.sample(cfg.batch))
            agent.sync_target()
        warmup_s = time.perf_counter() - t_warm
    setup_s = time.perf_counter() - t_setup

    returns: list[float] = []
    ep_return = 0.0
    decay = max(1, int(cfg.eps_fraction * args.steps))
    t0, c0 = time.perf_counter(), time.process_time()
    with rlscope.phase("training"):
        for t in range(args.steps):
            eps = max(cfg.eps_end, cfg.eps_start - (cfg.eps_start - cfg.eps_end) * t / decay)
            with rlscope.operation("inference"):
                greedy = agent.act(obs)
            a = greedy if rng.random() >= eps else int(rng.integers(2))
            with rlscope.operation("simulation"):
                nxt, r, term, trunc, _ = env.step(a)
            ep_return += float(r)
            with rlscope.operation("replay"):
                buf.add(obs, a, float(r), nxt, term)
                batch = buf.sample(cfg.batch)
            obs = nxt
            if term or trunc:
                returns.append(ep_return)
                ep_return = 0.0
                with rlscope.operation("simulation"):
                    obs, _ = env.reset()
            with rlscope.operation("backprop"):
                agent.update(batch)
                if (t + 1) % cfg.target_every == 0:
                    agent.sync_target()
            rlscope.report_progress(t + 1, args.steps)
    wall = time.perf_counter() - t0
    on_cpu = (time.process_time() - c0) / wall
    last = returns[-10:] or [ep_return]
    print(f"dqn: framework={args.framework} steps={args.steps} wall_s={wall:.3f} "
          f"us_per_step={1e6 * wall / args.steps:.1f} on_cpu={on_cpu:.3f} setup_s={setup_s:.3f} "
          f"warmup_s={warmup_s:.3f} episodes={len(returns)} "
          f"mean_return={sum(last) / len(last):.1f}", flush=True)


if __name__ == "__main__":
    main()
