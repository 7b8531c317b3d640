"""Replace attributes of modules and classes by call wrappers, and put them back exactly.

One wrapper per original object (keyed by identity), so every binding of the same
function (``torch.conv2d``, ``torch._VF.conv2d``) shares a wrapper: pickle's identity
check (``getattr(module, name) is obj``) keeps working, and a call is recorded once.
"""

from __future__ import annotations

import types

TYPE_CHECKING = False  # typing is for the type checker: every profiled process imports this
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    # A wait's argument that says a call cannot block (the recorders' wrap): its
    # position (self included for a method), its keyword (None: positional only), and 0
    # (a zero timeout or a false ``block``) or the flag bits (os.WNOHANG).
    Nonblocking = tuple[int, str | None, int]

BACKEND = 0
SIMULATOR = 1
WAIT = 2  # blocking calls: the thread is off the CPU (intercept/waits.py)
MARK = 3  # loop-phase markers (module forward, optimizer step): no CPU category

_FUNCTION_TYPES: tuple[type, ...] = (types.BuiltinFunctionType,)
_wrappable_types: tuple[type, ...] | None = None


def _instancemethod_type() -> type | None:
    # SWIG and pybind11 store C functions in classes as PyInstanceMethod objects.
    try:
        import ctypes

        api = ctypes.pythonapi
        api.PyInstanceMethod_New.restype = ctypes.py_object
        api.PyInstanceMethod_New.argtypes = [ctypes.py_object]
        return type(api.PyInstanceMethod_New(len))
    except (AttributeError, OSError):
        return None


def _wrappable() -> tuple[type, ...]:
    """Types whose instances can be wrapped: native functions and descriptors that bind
    like methods (staticmethod/classmethod/property objects are left alone). Found at the
    first use: the instance-method type needs ctypes, which start-up should not import."""
    global _wrappable_types
    if _wrappable_types is None:
        found: tuple[type, ...] = (
            types.MethodDescriptorType,  # C methods of a type (Tensor.add)
            types.WrapperDescriptorType,  # slot wrappers (Tensor.__getitem__)
            types.FunctionType,
            *_FUNCTION_TYPES,
        )
        im = _instancemethod_type()
        _wrappable_types = found if im is None else (*found, im)
    return _wrappable_types


def _recorder_in_use() -> Any:
    """The recorder module in use: the active one, else native unless it is missing."""
    from rlscope import annotate

    rec = annotate.active_recorder()
    if rec is not None:
        return rec
    try:
        from rlscope import _native

        return _native
    except ImportError:
        from rlscope.recorder import pyrecorder

        return pyrecorder


def recorder_wrap() -> Callable[..., Any]:
    """``wrap(func, category, name, nonblocking=None)`` of the recorder in use (native
    unless the Python recorder is recording)."""
    return _recorder_in_use().wrap


def recorder_op_wrap() -> Callable[..., Any]:
    """``wrap_operation(func, name, first_use=None, key=None)`` of the recorder in use;
    the calls each wrapper passes on (the operation open already) are counted
    (rlscope.intercept.passed_calls)."""
    from rlscope.intercept import passed_calls

    wrap = _recorder_in_use().wrap_operation

    def wrap_operation(func: Callable[..., Any], name: str,
                       first_use: Callable[[Any], Any] | None = None,
                       key: str | None = None) -> Any:
        return passed_calls.register(wrap(func, name, first_use=first_use, key=key))

    return wrap_operation


def recorder_env_call() -> Callable[..., Any]:
    """``env_call(method, reset, index, name, operation)`` of the recorder in use."""
    return _recorder_in_use().env_call


def native_recorder() -> Any | None:
    """The native recorder module when it is the recorder in use, else None (its
    wrapper types then have Python twins elsewhere)."""
    rec = _recorder_in_use()
    return rec if hasattr(rec, "vec_step") else None


def is_env_call(obj: Any) -> bool:
    """Whether ``obj`` is an env method recorded by ``env_call`` (either recorder)."""
    return hasattr(type(obj), "_rlscope_env")


def is_wrapper(obj: Any) -> bool:
    # type(obj), not obj: wrappers forward attribute lookups (and __class__).
    return hasattr(type(obj), "_rlscope_category")


def wrappable(obj: Any) -> bool:
    return isinstance(obj, _wrappable()) and not is_wrapper(obj)


def native_method(obj: Any) -> bool:
    """A method of a native binding (C, pybind11, nanobind): what :func:`wrappable`
    takes, or a callable that binds through ``__get__`` and is not Python code
    (nanobind's method objects are neither C method descriptors nor pybind11's instance
    methods)."""
    t = type(obj)
    return wrappable(obj) or (callable(obj) and hasattr(t, "__get__")
                              and t.__module__ not in ("builtins", "functools")
                              and not hasattr(obj, "__code__") and not is_wrapper(obj))


_PLAIN_TYPES = (types.BuiltinFunctionType, types.FunctionType, types.MethodDescriptorType,
                types.WrapperDescriptorType)


def plain_wrappable(obj: Any) -> bool:
    """:func:`wrappable` without SWIG/pybind11 instance methods, which need ctypes to
    recognise: for the standard library, patched at start-up (no ctypes import)."""
    return isinstance(obj, _PLAIN_TYPES) and not is_wrapper(obj)


class Patch:
    """One replaced attribute, and how to undo it."""

    __slots__ = ("attr", "had_own", "original", "owner")

    def __init__(self, owner: Any, attr: str, had_own: bool, original: Any) -> None:
        self.owner = owner
        self.attr = attr
        self.had_own = had_own  # attr was in owner.__dict__ (restore it) or inherited
        self.original = original


def raw_lookup(owner: Any, attr: str) -> tuple[Any, bool]:
    """(the stored object, whether owner holds it itself), without binding descriptors."""
    if isinstance(owner, type):
        for k in owner.__mro__:
            if attr in k.__dict__:
                return k.__dict__[attr], k is owner
        raise AttributeError(attr)
    d = vars(owner)
    if attr in d:
        return d[attr], True
    raise AttributeError(attr)


class Patcher:
    """Installs wrappers and remembers how to undo each replacement."""

    def __init__(self) -> None:
        self.patches: list[Patch] = []
        self._wrappers: dict[int, tuple[Any, Any]] = {}  # id(original) -> (original, wrapper)
        self._wrap: Callable[..., Any] | None = None

    def wrapper_for(self, func: Any, category: int, name: str,
                    nonblocking: Nonblocking | None = None) -> Any:
        hit = self._wrappers.get(id(func))
        if hit is not None and hit[0] is func:
            return hit[1]
        if self._wrap is None:
            self._wrap = recorder_wrap()
        w = self._wrap(func, category, name, nonblocking)
        self._wrappers[id(func)] = (func, w)
        return w

    def patch(self, owner: Any, attr: str, category: int, name: str,
              check: Callable[[Any], bool] = wrappable,
              nonblocking: Nonblocking | None = None) -> bool:
        """Wrap ``owner.attr``; False (nothing changed) if absent or not wrappable."""
        try:
            raw, own = raw_lookup(owner, attr)
        except (AttributeError, TypeError):
            return False
        if not check(raw):
            return False
        w = self.wrapper_for(raw, category, name, nonblocking)
        try:
            setattr(owner, attr, w)
        except (AttributeError, TypeError):  # immutable type / read-only module
            return False
        self.patches.append(Patch(owner, attr, own, raw))
        return True

    def patch_all(self, owner: Any, names: Iterable[str], category: int, prefix: str,
                  check: Callable[[Any], bool] = wrappable) -> int:
        return sum(self.patch(owner, n, category, f"{prefix}.{n}", check) for n in names)

    def replace(self, owner: Any, attr: str, value: Any) -> None:
        """Set ``owner.attr`` to any value (a proxy), undone like a wrapper."""
        raw, own = raw_lookup(owner, attr)
        setattr(owner, attr, value)
        self.patches.append(Patch(owner, attr, own, raw))

    def add(self, owner: Any, attr: str, value: Any) -> None:
        """Set ``owner.attr``, which ``owner`` does not have yet; undone by deleting it."""
        setattr(owner, attr, value)
        self.patches.append(Patch(owner, attr, False, None))

    def undo(self) -> None:
        """Restore every replaced attribute (latest first) exactly."""
        while self.patches:
            p = self.patches.pop()
            try:
                if p.had_own:
                    setattr(p.owner, p.attr, p.original)
                else:
                    delattr(p.owner, p.attr)
            except (AttributeError, TypeError):
                pass
        self._wrappers.clear()
        self._wrap = None


def public_builtins(module: types.ModuleType | Any,
                    names: Iterable[str] | None = None) -> list[str]:
    """Attribute names of ``module`` holding native functions (no dunders)."""
    d = vars(module) if isinstance(module, types.ModuleType) else {
        n: getattr(module, n, None) for n in dir(module)}
    names = d.keys() if names is None else names
    return [n for n in names if not n.startswith("__")
            and isinstance(d.get(n), _FUNCTION_TYPES)]
