"""Zero-code annotations for RL libraries (gymnasium, gym, stable-baselines3, RLlib) and
process roles (multiprocessing, Ray): operations are opened around library methods unless
the user already opened one of that name. Each module's ``install(module, patcher)`` is
named in :data:`rlscope.libraries.LIBRARIES`; this package uses ``rlscope.intercept``'s
patcher and import hook, never its ``enable``/``disable`` (that package's ``__init__``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from rlscope import annotate
from rlscope.intercept.patch import Patcher, raw_lookup


def marked(func: Callable[..., Any], op: str) -> Callable[..., Any]:
    """``func`` run inside operation ``op``, unless ``op`` is already open on this thread
    (the user annotated it, or an outer marked call did) or nothing is recorded."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        rec = annotate.active_recorder()
        if rec is None or rec.in_operation(op):
            return func(*args, **kwargs)
        with rec.operation(op):
            return func(*args, **kwargs)

    wrapper._rlscope_op = op  # type: ignore[attr-defined]
    return wrapper


def mark_method(p: Patcher, cls: type, attr: str, op: str) -> bool:
    """Replace ``cls.attr`` (a plain function, possibly inherited) by a marked one."""
    try:
        raw, _own = raw_lookup(cls, attr)
    except AttributeError:
        return False
    if not callable(raw) or getattr(raw, "_rlscope_op", None) == op:
        return False
    p.replace(cls, attr, marked(raw, op))
    return True


def wrap_method(p: Patcher, cls: type, attr: str,
                make: Callable[[Callable[..., Any]], Callable[..., Any]],
                flag: str = "_rlscope_wrapped") -> int:
    """Replace ``cls.attr`` (possibly inherited) by ``make(original)``, marked with
    ``flag`` so that it is never wrapped twice; 1 if replaced, else 0."""
    try:
        raw, _own = raw_lookup(cls, attr)
    except AttributeError:
        return 0
    if not callable(raw) or getattr(raw, flag, False):
        return 0
    w = make(raw)
    setattr(w, flag, True)
    p.replace(cls, attr, w)
    return 1
