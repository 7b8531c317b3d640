"""Which functions handed to ``jax.jit`` are a JAX env's step or reset (gymnax, brax,
jumanji, MuJoCo MJX): their jitted calls are the ``simulation`` operation and their time
the simulator's, named after the library (docs/attribution.md#jax-envs).

Recognised, following ``__wrapped__`` (``jax.vmap``, ``functools.wraps``) and
``functools.partial``:

- a function defined in a class of one of the libraries whose name is an env method
  (gymnax jits ``Environment.step``/``reset`` at class creation, ``self`` static);
- a bound method of an instance of such a class (``jax.jit(env.step)``, brax's way);
- MJX's module-level ``step``/``forward`` (``jax.jit(mjx.step)``).

A user function that calls the env inside its own jitted body (a whole rollout under
``lax.scan``) is one XLA program: nothing to cut it at, and it stays Backend.
"""

from __future__ import annotations

import functools
from typing import Any

_LIBRARIES = frozenset({"gymnax", "brax", "jumanji"})  # top-level packages (and MJX)
_ENV_METHODS = frozenset({"step", "reset", "step_env", "reset_env"})
_MJX_FUNCTIONS = frozenset({"step", "forward"})
_MAX_UNWRAP = 8


def _library(module: str) -> str | None:
    top = module.partition(".")[0]
    if top == "mujoco":
        return "mjx" if ".mjx" in module else None
    return top if top in _LIBRARIES else None


def _method_name(f: Any) -> str | None:
    name = getattr(f, "__name__", None)
    return name if isinstance(name, str) and name in _ENV_METHODS else None


def env_call(fun: Any) -> str | None:
    """``library.Class.method`` (``mjx.step``) when ``fun`` is a JAX env's step or
    reset, else None."""
    f = fun
    for _ in range(_MAX_UNWRAP):
        if f is None:
            return None
        owner = getattr(f, "__self__", None)
        method = _method_name(f)
        if owner is not None and method is not None:
            for k in type(owner).__mro__:
                lib = _library(getattr(k, "__module__", "") or "")
                if lib is not None and lib != "mjx":
                    return f"{lib}.{type(owner).__name__}.{method}"
        module = getattr(f, "__module__", None)
        lib = _library(module) if isinstance(module, str) else None
        qual = getattr(f, "__qualname__", None)
        if lib == "mjx" and getattr(f, "__name__", None) in _MJX_FUNCTIONS:
            return f"mjx.{f.__name__}"
        if lib is not None and method is not None and isinstance(qual, str) and "." in qual:
            return f"{lib}.{qual}"
        f = (f.func if isinstance(f, functools.partial)
             else getattr(f, "__wrapped__", None))
    return None
