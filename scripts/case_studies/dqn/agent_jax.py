"""DQN in JAX: pure functions, ``act`` and the whole update (loss, gradient, Adam) each
one ``jax.jit``-compiled call; parameters and optimizer state are passed in and out.

Dispatch is synchronous (``jax_cpu_enable_async_dispatch`` off): with JAX's default
asynchronous CPU dispatch a jitted call returns before its computation ran, the
computation runs on a JAX thread, and the caller later blocks converting the result —
time rlscope would count as Python (docs/case-studies/dqn-frameworks.md)."""

from __future__ import annotations

import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from common import Config

if os.environ.get("CASE_JAX_ASYNC", "0") != "1":
    jax.config.update("jax_cpu_enable_async_dispatch", False)

Params = list[Any]


def q_values(params: Params, x: Any) -> Any:
    w1, b1, w2, b2, w3, b3 = params
    h = jax.nn.relu(x @ w1 + b1)
    h = jax.nn.relu(h @ w2 + b2)
    return h @ w3 + b3


@jax.jit
def act_fn(params: Params, obs: Any) -> Any:
    return jnp.argmax(q_values(params, obs))


def make_update(cfg: Config) -> Any:
    def loss_fn(params: Params, target_params: Params, obs: Any, action: Any, reward: Any,
                next_obs: Any, done: Any) -> Any:
        best = jnp.max(q_values(target_params, next_obs), axis=1)
        target = jax.lax.stop_gradient(reward + cfg.gamma * (1.0 - done) * best)
        q = jnp.take_along_axis(q_values(params, obs), action[:, None], axis=1)[:, 0]
        d = q - target
        a = jnp.abs(d)
        return jnp.mean(jnp.where(a < 1.0, 0.5 * d * d, a - 0.5))  # Huber

    @jax.jit
    def update(params: Params, target_params: Params, m: Params, v: Params, step: Any,
               obs: Any, action: Any, reward: Any, next_obs: Any, done: Any) -> Any:
        grads = jax.grad(loss_fn)(params, target_params, obs, action, reward, next_obs,
                                  done)
        step = step + 1.0
        bc1, bc2 = 1.0 - cfg.adam_b1 ** step, 1.0 - cfg.adam_b2 ** step
        m = [cfg.adam_b1 * mi + (1.0 - cfg.adam_b1) * g for mi, g in zip(m, grads, strict=True)]
        v = [cfg.adam_b2 * vi + (1.0 - cfg.adam_b2) * g * g for vi, g in zip(v, grads, strict=True)]
        params = [p - (cfg.lr / bc1) * mi / (jnp.sqrt(vi / bc2) + cfg.adam_eps)
                  for p, mi, vi in zip(params, m, v, strict=True)]
        return params, m, v, step

    return update


class JaxAgent:
    def __init__(self, params: list[np.ndarray], cfg: Config) -> None:
        self.p = [jnp.asarray(w) for w in params]
        self.t = list(self.p)
        self.m = [jnp.zeros_like(w) for w in self.p]
        self.v = [jnp.zeros_like(w) for w in self.p]
        self.steps = jnp.zeros((), jnp.float32)
        self._update = make_update(cfg)

    def act(self, obs: np.ndarray) -> int:
        return int(act_fn(self.p, obs))

    def update(self, batch: tuple[np.ndarray, ...]) -> None:
        self.p, self.m, self.v, self.steps = self._update(
            self.p, self.t, self.m, self.v, self.steps, *batch)

    def sync_target(self) -> None:
        self.t = list(self.p)  # arrays are immutable: sharing them is the copy
