"""A batch of N CartPoles as JAX arrays: one step, or k steps fused with ``lax.scan``,
compiled by XLA (``jax.jit``) into one call. Dispatch is synchronous (see
dqn/agent_jax.py): the computation runs inside the jitted call, where rlscope sees it."""

from __future__ import annotations

import os
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import physics as P

if os.environ.get("CASE_JAX_ASYNC", "0") != "1":
    jax.config.update("jax_cpu_enable_async_dispatch", False)

State = tuple[Any, Any, Any]  # (n x 4 state, n steps in episode, PRNG key)


def _step(carry: State, _: Any = None) -> tuple[State, tuple[Any, Any]]:
    state, t, key = carry
    key, k_act, k_reset = jax.random.split(key, 3)
    n = state.shape[0]
    action = jax.random.randint(k_act, (n,), 0, 2)
    x, x_dot, theta, theta_dot = state[:, 0], state[:, 1], state[:, 2], state[:, 3]
    force = (action * 2 - 1) * P.FORCE_MAG
    cos, sin = jnp.cos(theta), jnp.sin(theta)
    temp = (force + P.POLEMASS_LENGTH * theta_dot * theta_dot * sin) / P.TOTAL_MASS
    theta_acc = (P.GRAVITY * sin - cos * temp) / (
        P.LENGTH * (4.0 / 3.0 - P.MASS_POLE * cos * cos / P.TOTAL_MASS))
    x_acc = temp - P.POLEMASS_LENGTH * theta_acc * cos / P.TOTAL_MASS
    x = x + P.TAU * x_dot
    x_dot = x_dot + P.TAU * x_acc
    theta = theta + P.TAU * theta_dot
    theta_dot = theta_dot + P.TAU * theta_acc
    new = jnp.stack((x, x_dot, theta, theta_dot), 1)
    t = t + 1
    terminated = (jnp.abs(x) > P.X_LIMIT) | (jnp.abs(theta) > P.THETA_LIMIT)
    done = terminated | (t >= P.MAX_STEPS)
    fresh = jax.random.uniform(k_reset, (n, 4), minval=P.RESET_LOW, maxval=P.RESET_HIGH)
    new = jnp.where(done[:, None], fresh, new)
    t = jnp.where(done, 0, t)
    return (new, t, key), (jnp.ones(n), done)


@jax.jit
def step1(carry: State) -> tuple[State, tuple[Any, Any]]:
    return _step(carry)


@partial(jax.jit, static_argnums=1)
def step_k(carry: State, k: int) -> tuple[State, tuple[Any, Any]]:
    """k steps in one call; rewards and dones of every step come back stacked (k x n)."""
    return jax.lax.scan(_step, carry, None, length=k)


class JaxCartPole:
    def __init__(self, n: int, seed: int, fused: int = 1) -> None:
        key, k0 = jax.random.split(jax.random.PRNGKey(seed))
        state = jax.random.uniform(k0, (n, 4), minval=P.RESET_LOW, maxval=P.RESET_HIGH)
        self.carry: State = (state, jnp.zeros(n, jnp.int32), key)
        self.fused = fused

    def steps(self, k: int) -> None:
        """k env steps: k calls of the one-step function, or k / fused calls of the fused
        one (k a multiple of ``fused``)."""
        if self.fused == 1:
            for _ in range(k):
                self.carry, _ = step1(self.carry)
        else:
            for _ in range(k // self.fused):
                self.carry, _ = step_k(self.carry, self.fused)

    def sync(self) -> None:
        jax.block_until_ready(self.carry)
