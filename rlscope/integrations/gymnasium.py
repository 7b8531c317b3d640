"""gymnasium: ``step``/``reset`` of environments as the ``simulation`` operation.

Marked: every environment returned by ``gymnasium.make`` / ``make_vec`` (at its outermost
layer, so gymnasium's own wrappers count as simulation) and the vector envs
``SyncVectorEnv`` / ``AsyncVectorEnv`` (whose envs and vector steps are also recorded
with their env index: rlscope.integrations.vecenv). A step inside an open ``simulation``
operation (the user's, or an outer marked env) is not marked again. An env made by a
vector env's factory is left as it is: its steps are taken inside the vector step, and a
marked ``step`` would cost every env step a call passed on (14-95 ns: a call from C into
Python that CPython would otherwise inline). So an env is marked by its class being
swapped for a subclass with the same name and layout whose ``step``/``reset`` are
marked, not by marking its class: a stand-alone env of the same id (an evaluation env,
one made to read the spaces) would mark every env of that class, a vector env's
included. Where an env's class takes no other (an extension type), its class is marked
instead. A marked env pickles and copies as its own class. Environments constructed
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
from rlscope.integrations.vecenv import MARKED_OF, making_vector_env
from rlscope.intercept.patch import Patcher

OP = "simulation"


def mark_env_class(p: Patcher, cls: type) -> int:
    return int(mark_method(p, cls, "step", OP)) + int(mark_method(p, cls, "reset", OP))


def _reduce_as_base(self: Any, protocol: int) -> Any:
    """A marked env pickles (and copies) as an env of the class it was made as: the
    class's own reduction, made with the env switched back to it for the moment. Where
    that is ``copyreg.__newobj__(cls, ...)`` (pickle checks that ``cls`` is the object's
    class, the marked one while it is pickled), the same call as ``cls.__new__(cls,
    ...)``."""
    sub = type(self)
    base = getattr(sub, MARKED_OF)
    self.__class__ = base
    try:
        r = self.__reduce_ex__(protocol)
    finally:
        self.__class__ = sub
    if isinstance(r, tuple) and len(r) >= 2 and getattr(r[0], "__name__", "") == "__newobj__":
        r = (base.__new__, r[1], *r[2:])
    return r


def marked_subclass(p: Patcher, cls: type) -> type:
    """A subclass of ``cls`` with its name, module and layout (no slot or ``__dict__``
    of its own: instances can switch to it), its ``step``/``reset`` marked."""
    import types

    def body(ns: dict[str, Any]) -> None:
        ns.update({"__slots__": (), "__module__": cls.__module__,
                   "__qualname__": cls.__qualname__, "__reduce_ex__": _reduce_as_base,
                   MARKED_OF: cls})

    sub = types.new_class(cls.__name__, (cls,), exec_body=body)
    mark_env_class(p, sub)
    return sub


def marking_make(make: Callable[..., Any], p: Patcher) -> Callable[..., Any]:
    subclasses: dict[type, type | None] = {}  # None: the class itself is marked

    @functools.wraps(make)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        env = make(*args, **kwargs)
        cls = type(env)
        if making_vector_env() or MARKED_OF in vars(cls):
            return env
        if cls not in subclasses:
            try:
                subclasses[cls] = marked_subclass(p, cls)
            except TypeError:  # a class that takes no subclass
                subclasses[cls] = None
                mark_env_class(p, cls)
        sub = subclasses[cls]
        if sub is not None:
            try:
                env.__class__ = sub
            except TypeError:  # a layout that takes no other class: the class marked
                subclasses[cls] = None
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
