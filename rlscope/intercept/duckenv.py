"""Envs rlscope has no integration for: any class of the user's own code with ``step`` and
``reset`` methods that return what envs return (arrays) gets them as the ``simulation``
operation, with no code change (docs/attribution.md#native-vector-envs).

Installed at start (``builtins`` is always imported; this module, in ``intercept`` and not
``integrations``, keeps start-up free of ``typing``). Classes are seen as they are created
(``builtins.__build_class__``, a class statement only: extension types and ``type(...)``
calls are not seen), and only those defined in
files outside the Python installation and its site-packages (the user's code; libraries
have integrations of their own or none) whose step/reset override no library's (a user's
gymnasium.Env or Wrapper is left to the gymnasium integration). A candidate is confirmed
by its first ``step`` or ``reset`` result: a tuple whose first item has a ``shape`` (a
numpy, torch or JAX array: observations, batched or not), or such an array itself. A
class whose first result is anything else gets its methods back (that first call stays a
``simulation``).
"""

from __future__ import annotations

import builtins
import functools
import sys

from rlscope import annotate

TYPE_CHECKING = False  # typing is for the type checker: every profiled process imports this
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any

    from rlscope.intercept.patch import Patcher

OP = "simulation"
_FLAG = "_rlscope_duck"
_user: dict[str, bool] = {}  # file name -> user code


def _function() -> None:
    """Its type is types.FunctionType (no ``types`` import at start-up)."""


_FUNCTION = type(_function)


def _is_user_file(path: str) -> bool:
    hit = _user.get(path)
    if hit is None:
        roots = {sys.prefix, sys.base_prefix, sys.exec_prefix}
        hit = _user[path] = not (
            path.startswith("<") or "site-packages" in path or "dist-packages" in path
            or any(path.startswith(r + "/lib") for r in roots))
    return hit


def _library_env(cls: type) -> bool:
    """Whether ``cls`` overrides a library's step/reset (a gymnasium.Env or Wrapper, an SB3
    VecEnv): that library's integration covers it where it is used (gymnasium.make, the
    vector envs), and a vector env steps it through its plain methods, at no cost per env
    step, which a wrapper here would add back."""
    for k in cls.__mro__[1:]:
        if "step" in vars(k) or "reset" in vars(k):
            mod = sys.modules.get(k.__module__)
            path = getattr(mod, "__file__", None) or "<built-in>"
            if not _is_user_file(path):
                return True
    return False


def looks_like_env_output(result: Any) -> bool:
    """An env's step/reset result: an array, or a tuple (obs, ...) whose obs is one."""
    if isinstance(result, tuple):
        return 2 <= len(result) <= 5 and hasattr(result[0], "shape")
    return hasattr(result, "shape") and not isinstance(result, (int, float))


class _Candidate:
    """A class whose step/reset may be an env's: decided by the first result."""

    __slots__ = ("cls", "env", "originals")

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.env: bool | None = None
        self.originals: dict[str, Any] = {}

    def decide(self, result: Any) -> None:
        self.env = looks_like_env_output(result)
        if not self.env:  # not an env: its own methods back, no cost from now on
            for attr, orig in self.originals.items():
                setattr(self.cls, attr, orig)


def _marked(func: Callable[..., Any], c: _Candidate) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = annotate.active_recorder()
        if rec is None or c.env is False or rec.in_operation(OP):
            return func(self, *args, **kwargs)
        with rec.operation(OP):
            result = func(self, *args, **kwargs)
        if c.env is None:
            c.decide(result)
        return result

    wrapper._rlscope_op = OP  # type: ignore[attr-defined]  # as integrations.marked sets it
    return wrapper


def consider(cls: type, p: Patcher) -> int:
    """Mark ``cls``'s own step/reset if it has both (a class of the user's code)."""
    d = vars(cls)
    # Plain functions only: a staticmethod/classmethod replaced by a function would bind
    # differently.
    if not (isinstance(d.get("step"), _FUNCTION) and isinstance(d.get("reset"), _FUNCTION)):
        return 0
    if any(getattr(d[a], "_rlscope_op", None) or getattr(d[a], _FLAG, False)
           for a in ("step", "reset")):
        return 0
    if _library_env(cls):
        return 0
    c = _Candidate(cls)
    for attr in ("step", "reset"):
        c.originals[attr] = d[attr]
        w = _marked(d[attr], c)
        setattr(w, _FLAG, True)
        p.replace(cls, attr, w)
    return 2


def install(_builtins: ModuleType, p: Patcher) -> int:
    orig = builtins.__build_class__
    if getattr(orig, _FLAG, False):
        return 0

    def __build_class__(func: Any, name: str, *bases: Any, **kw: Any) -> Any:
        cls = orig(func, name, *bases, **kw)
        try:
            if isinstance(cls, type) and _is_user_file(func.__code__.co_filename):
                consider(cls, p)
        except Exception:  # never break a class statement
            pass
        return cls

    setattr(__build_class__, _FLAG, True)
    p.replace(builtins, "__build_class__", __build_class__)
    return 1
