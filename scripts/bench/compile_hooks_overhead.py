"""What the JIT compile hooks (rlscope.intercept.compilers) cost a steady call: nothing
should run per call, only when a framework compiles.

    python scripts/bench/compile_hooks_overhead.py [--pairs 30] [--calls 2000]

In one process, with a recording active: a jax.jit function and a torch.compile'd module
(backend "eager": the steady call goes through the same dynamo guard check as with
inductor, without a 10 s compile), compiled first, then ``--pairs`` pairs of slices of
``--calls`` calls each, one slice with the hooks installed (``intercept.enable``) and one
without (``intercept.disable``), adjacent, order alternating. Per framework: the median
of the pairs' per-call ratios (hooked / not; the calling thread's CPU time) and their
quartiles, and the compile
records written during the steady slices (0 expected). The hooks' cost when a compile
does happen is in the compile itself (a few µs of bookkeeping per compilation).

Last line:

    RESULT jax_ratio=<median> jax_q1=.. jax_q3=.. torch_ratio=.. torch_q1=.. torch_q3=..
           records_in_steady=<n>
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")


def _slice(call, n: int) -> float:
    """CPU seconds of this thread per call (less disturbed than wall time by the other
    work on a shared machine; a steady jitted call runs on this thread)."""
    t0 = time.thread_time()
    for _ in range(n):
        call()
    return (time.thread_time() - t0) / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=30)
    ap.add_argument("--calls", type=int, default=2000)
    args = ap.parse_args()

    import jax
    import jax.numpy as jnp
    import torch

    import rlscope
    from rlscope import intercept
    from rlscope.intercept import compile_record

    x = jnp.ones((4, 8))
    f = jax.jit(lambda v: jnp.tanh(v).sum())
    model = torch.compile(torch.nn.Linear(8, 2), backend="eager")
    t = torch.ones(4, 8)
    torch.set_grad_enabled(False)
    calls = {"jax": lambda: f(x).block_until_ready(), "torch": lambda: model(t)}

    out = tempfile.mkdtemp(prefix="rlscope-compile-bench-")
    rlscope.start(out)
    intercept.enable("torch-compile,jax-compile")
    for c in calls.values():  # compiled with the hooks on: records written here
        c()
    before = next(compile_record._seq)
    ratios: dict[str, list[float]] = {k: [] for k in calls}
    for i in range(args.pairs):
        for name, c in calls.items():
            times = {}
            for hooked in ((True, False) if i % 2 else (False, True)):
                if hooked:
                    intercept.enable("torch-compile,jax-compile")
                else:
                    intercept.disable()
                times[hooked] = _slice(c, args.calls)
            ratios[name].append(times[True] / times[False])
    intercept.disable()
    records = next(compile_record._seq) - before - 1
    rlscope.stop()
    parts = []
    for name, r in ratios.items():
        q = statistics.quantiles(r, n=4)
        print(f"{name}: hooked/unhooked per call, median {statistics.median(r):.4f} "
              f"(quartiles {q[0]:.4f} .. {q[2]:.4f}) over {len(r)} pairs of {args.calls} "
              "calls", file=sys.stderr)
        parts += [f"{name}_ratio={statistics.median(r):.4f}", f"{name}_q1={q[0]:.4f}",
                  f"{name}_q3={q[2]:.4f}"]
    print(f"compile records written during the steady slices: {records}", file=sys.stderr)
    print("RESULT " + " ".join(parts) + f" records_in_steady={records}")


if __name__ == "__main__":
    main()
