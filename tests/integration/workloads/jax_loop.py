"""A hand-written JAX training loop with no rlscope code, no progress reports and no
torch: ``python jax_loop.py N [M]`` (N calls of a jitted ``update`` of a small MLP on a
fixed batch; M instead when rlscope records the process: a command whose work is not the
same in every run; prints "done" at the end)."""

import os
import sys

import jax
import jax.numpy as jnp


def loss(params, x, y):
    (w1, b1), (w2, b2) = params
    h = jnp.tanh(x @ w1 + b1)
    return jnp.mean((h @ w2 + b2 - y) ** 2)


@jax.jit
def update(params, x, y):
    grads = jax.grad(loss)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, params, grads)


if __name__ == "__main__":
    n = int(sys.argv[1])
    if len(sys.argv) > 2 and os.environ.get("RLSCOPE_OUTPUT_DIR"):
        n = int(sys.argv[2])
    k1, k2, k3, k4 = jax.random.split(jax.random.PRNGKey(0), 4)
    params = ((jax.random.normal(k1, (8, 64)) * 0.1, jnp.zeros(64)),
              (jax.random.normal(k2, (64, 1)) * 0.1, jnp.zeros(1)))
    x, y = jax.random.normal(k3, (256, 8)), jax.random.normal(k4, (256, 1))
    for _ in range(n):
        params = update(params, x, y)
    print("done", float(loss(params, x, y)))
