"""One run of a vectorized CartPole (N envs as tensors, random actions, auto-reset),
annotated for rlscope.

    python scripts/case_studies/vector/workload.py --impl torch --n 256 --steps 20000
    python scripts/case_studies/vector/workload.py --impl jax-fused --k 32 --n 256 ...

Implementations: ``torch`` (eager PyTorch, one step per call, ~40 tensor operations each),
``jax`` (one ``jax.jit`` call per step), ``jax-fused`` (one jitted call runs ``--k`` steps
with ``lax.scan``). Operations: ``setup`` (imports, building the batch) with ``warmup``
inside it (the first call: JAX compiles here, apart from the measured calls), then one
``simulation`` per call; ``rlscope.report_progress`` after each call counts steps of the
batch (one timestep = N env steps, so ``rls-analyze compare --per-timestep`` reads in
microseconds per step of the batch at every N).

Prints ``vector: impl=... n=... steps=... calls=... wall_s=... us_per_step=... on_cpu=...
compile_s=...`` last (us_per_step: per step of the whole batch; on_cpu: the process's CPU
time over the measured phase's wall time).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import rlscope

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "dqn"))
from common import pin_threads

IMPLS = ("torch", "jax", "jax-fused")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", choices=IMPLS, required=True)
    ap.add_argument("--n", type=int, required=True, help="envs in the batch")
    ap.add_argument("--steps", type=int, default=20000, help="steps of the batch")
    ap.add_argument("--k", type=int, default=32, help="steps per call of jax-fused")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    per_call = args.k if args.impl == "jax-fused" else 1
    if args.steps % per_call:
        ap.error(f"--steps {args.steps} is not a multiple of --k {per_call}")
    pin_threads()
    rlscope.set_metadata(impl=args.impl, n_envs=args.n, k=per_call, env="CartPole-v1")
    with rlscope.operation("setup"):
        if args.impl == "torch":
            from sim_torch import TorchCartPole
            sim = TorchCartPole(args.n, args.seed)
        else:
            from sim_jax import JaxCartPole
            sim = JaxCartPole(args.n, args.seed, per_call)
        t = time.perf_counter()
        with rlscope.operation("warmup"):
            sim.steps(per_call)
            sim.sync()
        compile_s = time.perf_counter() - t
    calls = args.steps // per_call
    t0, c0 = time.perf_counter(), time.process_time()
    with rlscope.phase("simulating"):
        for i in range(calls):
            with rlscope.operation("simulation"):
                sim.steps(per_call)
                if i == calls - 1:
                    sim.sync()
            rlscope.report_progress((i + 1) * per_call, args.steps)
    wall = time.perf_counter() - t0
    on_cpu = (time.process_time() - c0) / wall
    print(f"vector: impl={args.impl} n={args.n} k={per_call} steps={args.steps} "
          f"calls={calls} wall_s={wall:.3f} us_per_step={1e6 * wall / args.steps:.2f} "
          f"on_cpu={on_cpu:.3f} "
          f"compile_s={compile_s:.3f}", flush=True)


if __name__ == "__main__":
    main()
