"""Zero-code annotations for RL libraries (gymnasium, gym, stable-baselines3, RLlib) and
process roles (multiprocessing, Ray): operations are opened around library methods unless
the user already opened one of that name. Each module's ``install(module, patcher)`` is
named in :data:`rlscope.libraries.LIBRARIES`; this package uses ``rlscope.intercept``'s
patcher and import hook, never its ``enable``/``disable`` (that package's ``__init__``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlscope.intercept.patch import Patcher, raw_lookup, recorder_op_wrap


def marked(func: Callable[..., Any], op: str,
           first_use: Callable[[Any], Any] | None = None,
           key: str | None = None) -> Callable[..., Any]:
    """``func`` run inside operation ``op``, unless ``op`` is already open on this thread
    (the user annotated it, or an outer marked call did) or nothing is recorded; with
    ``first_use``, ``first_use(self)`` runs once per instance while recording (it sets
    ``key`` in ``self.__dict__``). The recorder's own wrapper: the native one adds no
    Python frame to the call."""
    return recorder_op_wrap()(func, op, first_use=first_use, key=key)


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
