"""A policy compiled for two batch sizes (torch.compile, jax.jit or tf.function), its
calls inside `inference`; the workload's own estimate of each compile, first call minus
a steady call (time.perf_counter around the calls), written to a JSON file.

    python jit_compiles.py torch|jax|tf OUT.json [BATCH,BATCH,...]
"""

from __future__ import annotations

import json
import os
import sys
import time

import rlscope

FRAMEWORK, OUT = sys.argv[1], sys.argv[2]
BATCHES = tuple(int(b) for b in sys.argv[3].split(",")) if len(sys.argv) > 3 else (4, 8)
STEADY = 5  # calls per batch size after the first


def torch_policy():
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # no compile workers
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 2))
    compiled = torch.compile(model)
    torch.set_grad_enabled(False)
    torch.zeros(1).add_(1)  # eager start-up before the measurement
    return lambda bs: compiled(torch.ones(bs, 8)).sum().item()


def jax_policy():
    import jax
    import jax.numpy as jnp

    w1, w2 = jnp.full((8, 32), 0.01), jnp.full((32, 2), 0.01)
    inputs = {bs: jnp.ones((bs, 8)) for bs in BATCHES}  # eager ops compiled here
    jax.block_until_ready(list(inputs.values()))

    @jax.jit
    def policy(x):
        return jnp.tanh(jnp.tanh(x @ w1) @ w2).sum()

    return lambda bs: float(policy(inputs[bs]))


def tf_policy():
    import tensorflow as tf

    w1, w2 = tf.fill((8, 32), 0.01), tf.fill((32, 2), 0.01)
    inputs = {bs: tf.ones((bs, 8)) for bs in BATCHES}

    @tf.function(reduce_retracing=False)
    def policy(x):
        return tf.reduce_sum(tf.tanh(tf.tanh(x @ w1) @ w2))

    return lambda bs: float(policy(inputs[bs]))


call = {"torch": torch_policy, "jax": jax_policy, "tf": tf_policy}[FRAMEWORK]()
estimates = []
done = 0
for bs in BATCHES:
    times = []
    for _ in range(1 + STEADY):
        with rlscope.operation("inference"):
            t0 = time.perf_counter()
            call(bs)
            times.append(time.perf_counter() - t0)
        done += bs
        rlscope.report_progress(done, 100 * done)
    steady = sorted(times[1:])[len(times[1:]) // 2]
    estimates.append({"batch": bs, "first_s": times[0], "steady_s": steady,
                      "compile_s": times[0] - steady})
with open(OUT, "w") as f:
    json.dump(estimates, f)
