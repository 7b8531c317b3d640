"""PufferLib: its native envs and its vector envs as the ``simulation`` operation, the time
inside its C envs as Simulator, with no code change (docs/attribution.md#native-vector-envs).

- **Native envs** (``pufferlib.PufferEnv`` subclasses: the C envs of ``pufferlib.ocean``,
  one object stepping many envs, and users' own). The first instance of each class marks
  its ``step`` and ``reset`` (the base class's ``__init__``, which every PufferEnv calls,
  is wrapped). A C env's calls into its extension module (``binding.vec_step``,
  ``vec_reset``) are SIMULATOR calls named ``pufferlib.<Env>.vec_step``: the envs step
  there, in C.
- **Vector envs** (``pufferlib.vector.Serial``, ``Multiprocessing``, ``Ray``): ``step``,
  ``reset``, ``send``, ``recv`` and ``async_reset`` open ``simulation`` (unless it is open:
  a ``step`` is its ``send`` then ``recv``, one operation). The worker backends' ``recv``
  is a WAIT call: the main process waits there (Multiprocessing spins on shared memory)
  while the workers step their envs, each worker's steps ``simulation`` in its own trace.
  Its workers announce their role (vector-env worker) and envs. Envs a vector env
  makes do not mark their classes (as gymnasium's vector envs': their
  steps are inside the vector step, and a marked class would cost each env step).
- Each vector env and each native env is announced once (format.META_VECENVS: class,
  number of envs, batch size), nothing per env.
- A worker backend in async mode (fewer workers per batch than workers) gets a ``recv``
  of its own that tallies which envs sampled batches held (rlscope.integrations.batches):
  which envs lag.

The cost is fixed per vector step whatever the number of envs (async mode: a Python call
per batch, and a tally on sampled ones).
"""

from __future__ import annotations

import functools
import itertools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from rlscope import annotate
from rlscope.integrations import batches, marked, vecenv, wrap_method
from rlscope.intercept.patch import SIMULATOR, WAIT, Patcher

OP = "simulation"
_VECTOR_METHODS = ("step", "reset", "send", "recv", "async_reset")
_NATIVE_CALLS = ("vec_step", "vec_reset")  # a C env's extension functions stepping its envs
_KEY = "_rlscope_pufferlib"  # instance attribute: the env's name once it was seen
_FLAG = "_rlscope_puffer"  # on our wrappers: never wrapped twice
_serial = itertools.count(1)


def _announce(env: Any, cls: type, num_envs: Any, batch_size: Any, workers: bool) -> None:
    name = f"{cls.__name__}#{next(_serial)}"
    env.__dict__[_KEY] = name
    rec = annotate.active_recorder()
    if rec is not None:
        vecenv.announce(rec, {"name": name, "class": cls.__name__, "library": "pufferlib",
                              "num_envs": _int(num_envs), "batch_size": _int(batch_size),
                              "workers": workers})


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) else None


# -- native envs ------------------------------------------------------------------------

def _first_native(env: Any) -> None:
    n = getattr(env, "num_agents", None)
    _announce(env, type(env), n, n, workers=False)


def _bindings(cls: type) -> list[ModuleType]:
    """The extension modules ``cls``'s module steps its envs through (PufferLib's C envs
    import theirs as ``binding``)."""
    mod = sys.modules.get(cls.__module__)
    return [v for v in vars(mod).values()
            if isinstance(v, ModuleType) and v.__name__.startswith("pufferlib.")
            and v.__name__.endswith(".binding")] if mod is not None else []


class _NativeEnvs:
    """Marks each PufferEnv class at its first instance."""

    def __init__(self, p: Patcher) -> None:
        self.p = p
        self.classes: set[type] = set()
        self.bindings: set[str] = set()

    def seen(self, cls: type) -> None:
        if cls in self.classes:
            return
        self.classes.add(cls)
        for attr in ("step", "reset"):
            wrap_method(self.p, cls, attr,
                        lambda f: marked(f, OP, first_use=_first_native, key=_KEY), flag=_FLAG)
        for b in _bindings(cls):
            if b.__name__ not in self.bindings:
                self.bindings.add(b.__name__)
                n = self.p.patch_all(b, _NATIVE_CALLS, SIMULATOR, f"pufferlib.{cls.__name__}")
                from rlscope import libraries

                libraries.count("pufferlib", n)


def _marking_init(orig: Callable[..., Any], envs: _NativeEnvs) -> Callable[..., Any]:
    @functools.wraps(orig)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> Any:
        envs.seen(type(self))
        return orig(self, *args, **kwargs)

    return __init__


def install(pufferlib: ModuleType, p: Patcher) -> int:
    base = getattr(pufferlib, "PufferEnv", None)
    if not isinstance(base, type):
        return 0
    envs = _NativeEnvs(p)
    return wrap_method(p, base, "__init__", lambda f: _marking_init(f, envs), flag=_FLAG)


# -- vector envs ------------------------------------------------------------------------

def _first_vector(vec: Any, workers: bool) -> None:
    cls = type(vec)
    n = getattr(vec, "num_environments", None)  # the worker backends'
    if n is None:
        envs = getattr(vec, "envs", None)  # Serial's
        n = len(envs) if isinstance(envs, list) else None
    per_batch, per_worker = (getattr(vec, a, None) for a in ("workers_per_batch",
                                                              "envs_per_worker"))
    batch = per_batch * per_worker if isinstance(per_batch, int) and \
        isinstance(per_worker, int) else n
    _announce(vec, cls, n, batch, workers)
    num_workers = getattr(vec, "num_workers", None)
    if workers and isinstance(per_batch, int) and isinstance(num_workers, int) \
            and per_batch < num_workers:
        _tally_batches(vec)


def _tally_batches(vec: Any) -> None:
    """An async worker backend's ``recv`` on this instance, its batches' env ids (the
    agent ids it returns, ``recv()[5]``) tallied: which envs lag."""
    agents, per_batch = (getattr(vec, a, None) for a in ("num_agents", "agents_per_batch"))
    if not (isinstance(agents, int) and isinstance(per_batch, int) and agents > 0):
        return
    recv = vec.recv  # the class's (wrapped) method, bound
    tally = batches.Tally(vec.__dict__[_KEY], "PufferLib", agents, per_batch,
                          lambda out: out[5])
    vec.__dict__["recv"] = tally.tap(recv)


def _making_envs(orig: Callable[..., Any]) -> Callable[..., Any]:
    """The vector env's ``__init__``, whose envs (made by the user's creators, here or in
    the workers) leave their classes unmarked."""

    @functools.wraps(orig)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> Any:
        with vecenv.making_envs():
            return orig(self, *args, **kwargs)

    return __init__


def _worker_role(orig: Callable[..., Any]) -> Callable[..., Any]:
    """``pufferlib.vector._worker_process`` (a Multiprocessing worker's target) announcing
    the worker's role and its envs. Keeps the original's module and name, so it pickles
    by reference under spawn too."""

    @functools.wraps(orig)
    def _worker_process(*args: Any, **kwargs: Any) -> Any:
        rec = annotate.active_recorder()
        if rec is not None:
            try:
                per, workers, idx = (int(args[i]) for i in (7, 9, 10))
            except (IndexError, TypeError, ValueError):  # another version's arguments
                per = workers = idx = -1
            envs = list(range(idx * per, (idx + 1) * per)) if idx >= 0 else None
            vecenv.announce_worker(rec, "pufferlib.Multiprocessing", envs,
                                   per * workers if idx >= 0 else None)
        return orig(*args, **kwargs)

    return _worker_process


def install_vector(vector: ModuleType, p: Patcher) -> int:
    n = 0
    worker = getattr(vector, "_worker_process", None)
    if callable(worker) and not getattr(worker, _FLAG, False):
        w = _worker_role(worker)
        setattr(w, _FLAG, True)
        p.replace(vector, "_worker_process", w)
        n += 1
    for cname, workers in (("Serial", False), ("Multiprocessing", True), ("Ray", True)):
        cls = getattr(vector, cname, None)
        if not isinstance(cls, type):
            continue
        n += wrap_method(p, cls, "__init__", _making_envs, flag=_FLAG)
        first_use = functools.partial(_first_vector, workers=workers)
        for m in _VECTOR_METHODS:
            def make(f: Callable[..., Any], wait: bool = workers and m == "recv",
                     label: str = f"pufferlib.{cname}.{m}",
                     first: Callable[[Any], None] = first_use) -> Callable[..., Any]:
                if wait:  # the worker backends' recv: waiting for the workers' batch
                    f = p.wrapper_for(f, WAIT, label)
                return marked(f, OP, first_use=first, key=_KEY)

            n += wrap_method(p, cls, m, make, flag=_FLAG)
    return n
