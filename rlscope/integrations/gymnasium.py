"""gymnasium: ``step``/``reset`` of environments as the ``simulation`` operation.

Marked: the class of every environment returned by ``gymnasium.make`` / ``make_vec`` (the
outermost layer, so gymnasium's own wrappers count as simulation) and the vector envs
``SyncVectorEnv`` / ``AsyncVectorEnv`` (whose envs and vector steps are also recorded
with their env index: rlscope.integrations.vecenv). A step inside an open ``simulation`` operation
(the user's, or an outer marked env) is not marked again. An env made by a vector env's
factory leaves its class unmarked: its steps are taken inside the vector step, and a
marked class would cost every env step a native check (~0.3 µs: a call from C into
Python that CPython would otherwise inline). Environments constructed
directly (``CartPoleEnv()``) are not marked; annotate them, or make them with
``gymnasium.make``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from rlscope.integrations import mark_method
from rlscope.integrations.vecenv import making_vector_env
from rlscope.intercept.patch import Patcher

OP = "simulation"


def mark_env_class(p: Patcher, cls: type) -> int:
    return int(mark_method(p, cls, "step", OP)) + int(mark_method(p, cls, "reset", OP))


def marking_make(make: Callable[..., Any], p: Patcher) -> Callable[..., Any]:
    seen: set[type] = set()

    @functools.wraps(make)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        env = make(*args, **kwargs)
        cls = type(env)
        if cls not in seen and not making_vector_env():
            seen.add(cls)
            mark_env_class(p, cls)
        return env

    wrapper._rlscope_marked = True  # type: ignore[attr-defined]
    return wrapper


def install(gym: ModuleType, p: Patcher) -> int:
    n = 0
    registration = sys.modules.get("gymnasium.envs.registration")
    for fname in ("make", "make_vec"):
        for owner in (gym, registration):
            orig = getattr(owner, fname, None) if owner is not None else None
            if orig is None or getattr(orig, "_rlscope_marked", False):
                continue
            p.replace(owner, fname, marking_make(orig, p))
            n += 1
    vector = sys.modules.get("gymnasium.vector")
    for cname in ("SyncVectorEnv", "AsyncVectorEnv"):
        cls = getattr(vector, cname, None) if vector is not None else None
        if isinstance(cls, type):
            n += mark_env_class(p, cls)
    if vector is not None:  # after marking: the env-index layer goes outside it
        from rlscope.integrations import vecenv

        n += vecenv.install_gymnasium(vector, p)
    return n
