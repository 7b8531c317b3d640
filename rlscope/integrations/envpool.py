"""EnvPool: each vector step as the ``simulation`` operation and the time inside its C++
pool as Simulator, with no code change (docs/attribution.md#native-vector-envs).

EnvPool's Python layer (``envpool.python.envpool.EnvPoolMixin``) is shared by every env
family and by its gym, gymnasium and dm_env APIs: ``step`` is ``send`` then ``recv``,
``reset`` is the native ``_reset`` then ``recv``. Instrumented:

- ``step``, ``reset``, ``async_reset`` of the mixin open ``simulation`` (unless it is
  open). ``send`` and ``recv`` do too on a pool driven by them: one in async mode
  (``batch_size < num_envs``) or one ``async_reset`` was called on (EnvPool's way into
  its send/recv API), a ``recv`` and a ``send`` per batch: two ``simulation`` calls.
  They are set on that instance, not on the mixin: a sync ``step`` calls both, and
  wrappers there would cost two more calls per vector step (~1k instructions, a third
  of rlscope's cost in a 16-env CartPole loop: scripts/bench/fast_env_instructions.py).
  A sync pool driven by ``send``/``recv`` after a plain ``reset`` gets no operation (its
  native calls are still recorded).
- The native ``_send``, ``_recv``, ``_reset`` of each pool class, wrapped the first time
  an instance of it is used (EnvPool imports an env family's module when it makes the
  first env of it), as SIMULATOR calls named ``envpool.<Env>.<method>``: the calling
  thread is blocked there while the pool's threads step the envs. In async mode the
  instance's ``_recv`` is a WAIT call instead: waiting for a batch is Waiting, which
  happens while the envs of the other batch step.
- Each pool is announced once as a vector env (format.META_VECENVS: class, num_envs,
  batch size) with no worker processes.
- In async mode, which envs each batch held (its ``info:env_id``), tallied on sampled
  batches (rlscope.integrations.batches): which envs lag.

Recording costs a fixed amount per vector step whatever the number of envs: nothing is
recorded per env (async mode: a Python call per batch, and a tally on sampled ones).
"""

from __future__ import annotations

import functools
import itertools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from rlscope import annotate
from rlscope.integrations import batches, marked, wrap_method
from rlscope.intercept.patch import SIMULATOR, WAIT, Patcher, native_method, recorder_wrap

OP = "simulation"
_METHODS = ("step", "reset")
_DIRECT = ("send", "recv")  # simulation per instance, on pools driven by them
_NATIVE = ("_send", "_recv", "_reset")
_KEY = "_rlscope_envpool"  # instance attribute: the pool's name once it was seen
_serial = itertools.count(1)


def _env_name(cls: type) -> str:
    """``_CartPoleEnvPool`` -> ``CartPole``."""
    name = cls.__name__.lstrip("_")
    return name[: -len("EnvPool")] if name.endswith("EnvPool") else name


def _native_class(cls: type) -> type | None:
    """The pybind11 class in ``cls``'s bases that holds the native ``_recv``."""
    for k in cls.__mro__:
        if native_method(vars(k).get("_recv")):
            return k
    return None


class _Pools:
    """What the installer set up; wraps each pool class's native methods at its first
    use, and each instance's waiting ``_recv`` in async mode."""

    def __init__(self, p: Patcher, mixin: type) -> None:
        self.p = p
        self.mixin = mixin
        self.classes: set[type] = set()
        self.waits: dict[type, Any] = {}  # native class -> its _recv as a WAIT call

    def direct(self, env: Any) -> None:
        """``env``'s own ``send``/``recv``, each the ``simulation`` operation (once)."""
        d = getattr(env, "__dict__", None)
        if d is None or all(m in d for m in _DIRECT):
            return
        for m in _DIRECT:
            raw = vars(self.mixin).get(m)  # the library's own: not wrapped on the class
            if callable(raw) and m not in d:
                d[m] = marked(raw.__get__(env, type(env)), OP)

    def seen(self, env: Any, rec: Any) -> None:
        cls = type(env)
        native = _native_class(cls)
        if native is None:
            env.__dict__[_KEY] = cls.__name__
            return
        prefix = f"envpool.{_env_name(native)}"
        if native not in self.classes:
            self.classes.add(native)
            n = self.p.patch_all(native, _NATIVE, SIMULATOR, prefix, native_method)
            from rlscope import libraries

            libraries.count("envpool", n)
        name = f"{cls.__name__}#{next(_serial)}"
        env.__dict__[_KEY] = name
        config = _config(env)
        is_async = bool(config.get("batch_size")) and \
            config.get("batch_size") != config.get("num_envs")
        if is_async:
            self.direct(env)
            wait = self.waits.get(native)
            if wait is None:
                raw = vars(native)["_recv"]
                raw = getattr(raw, "__wrapped__", raw)  # the original, not our wrapper
                wait = self.waits[native] = recorder_wrap()(raw, WAIT, f"{prefix}._recv")
            recv = wait.__get__(env, cls)
            keys = getattr(env, "_state_keys", None)
            if isinstance(keys, list) and "info:env_id" in keys and config.get("num_envs"):
                at = keys.index("info:env_id")
                recv = batches.Tally(name, "EnvPool", int(config["num_envs"]),
                                     int(config["batch_size"]), lambda out: out[at]).tap(recv)
            env.__dict__["_recv"] = recv
        from rlscope.integrations import vecenv

        vecenv.announce(rec, {"name": name, "class": cls.__name__, "library": "envpool",
                              "num_envs": config.get("num_envs"),
                              "batch_size": config.get("batch_size") or
                              config.get("num_envs"), "workers": False})


def _config(env: Any) -> dict[str, Any]:
    try:
        c = env.config
    except Exception:  # an env of another version: no sizes known
        return {}
    return c if isinstance(c, dict) else {}


def _simulation(func: Callable[..., Any], pools: _Pools) -> Callable[..., Any]:
    """``func`` as the ``simulation`` operation (the recorder's native wrapper: no Python
    frame per vector step); a pool is seen at its first call while recording."""

    def first_use(env: Any) -> None:
        rec = annotate.active_recorder()
        if rec is not None:
            pools.seen(env, rec)

    return marked(func, OP, first_use=first_use, key=_KEY)


def _async_reset(func: Callable[..., Any], pools: _Pools) -> Callable[..., Any]:
    """``async_reset`` as ``simulation``; the pool's ``send``/``recv`` become operations
    (a Python frame per call: it is called once a run, or once an episode)."""
    op = _simulation(func, pools)

    @functools.wraps(func)
    def async_reset(self: Any, *args: Any, **kwargs: Any) -> Any:
        if annotate.active_recorder() is not None:
            pools.direct(self)
        return op(self, *args, **kwargs)

    return async_reset


def install(envpool: ModuleType, p: Patcher) -> int:
    mod = sys.modules.get("envpool.python.envpool")
    mixin = getattr(mod, "EnvPoolMixin", None) if mod is not None else None
    if not isinstance(mixin, type):
        return 0
    pools = _Pools(p, mixin)
    n = sum(wrap_method(p, mixin, m, lambda f: _simulation(f, pools), flag=_KEY)
            for m in _METHODS)
    return n + wrap_method(p, mixin, "async_reset", lambda f: _async_reset(f, pools),
                           flag=_KEY)
