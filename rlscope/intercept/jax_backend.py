"""JAX: calls of jitted functions as Backend time.

``jax.jit`` is replaced so that each jitted function it returns is wrapped in a C call
wrapper: a call (C++ dispatch, compilation on a cache miss, execution) is one Backend
interval, whatever Python the trace runs inside counts there too (it is JAX's work).
Attributes (``.lower``, ``.trace``, ``.clear_cache``) are forwarded. A JAX env's jitted
step or reset (gymnax, brax, jumanji, MJX: rlscope.intercept.jax_envs) is a Simulator
call named after its library instead, inside the ``simulation`` operation (opened
unless it is open).

Not covered: functions jitted before the hook ran (including those inside ``jax.numpy``,
so eager ``jnp`` calls outside a user ``jax.jit`` are Python time), and ``jax.pmap``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from rlscope.intercept.jax_envs import env_call
from rlscope.intercept.patch import BACKEND, SIMULATOR, Patcher, recorder_op_wrap

SIMULATION = "simulation"  # the operation a JAX env's step or reset opens


def _wrapping_jit(jit: Callable[..., Any], p: Patcher) -> Callable[..., Any]:
    @functools.wraps(jit)
    def wrapper(fun: Any = None, *args: Any, **kwargs: Any) -> Any:
        if fun is None:  # jax.jit(static_argnums=...) used as a decorator factory
            return functools.partial(wrapper, *args, **kwargs)
        jitted = jit(fun, *args, **kwargs)
        env = env_call(fun)
        if env is not None:
            return recorder_op_wrap()(p.wrapper_for(jitted, SIMULATOR, env), SIMULATION)
        name = getattr(fun, "__qualname__", None) or type(fun).__name__
        return p.wrapper_for(jitted, BACKEND, f"jax.jit.{name}")

    wrapper._rlscope_jit = True  # type: ignore[attr-defined]
    return wrapper


def install(jax: ModuleType, p: Patcher) -> int:
    n = 0
    jit = getattr(jax, "jit", None)
    if jit is None or getattr(jit, "_rlscope_jit", False):
        return 0
    w = _wrapping_jit(jit, p)
    for owner in (jax, sys.modules.get("jax._src.api")):
        if owner is not None and getattr(owner, "jit", None) is jit:
            p.replace(owner, "jit", w)
            n += 1
    return n
