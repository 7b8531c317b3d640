"""Vector environments: each env's ``step``/``reset`` with its env index, and each vector
step with its send and wait parts, with no code change (docs/multiprocess.md).

Covered: stable-baselines3 ``DummyVecEnv`` / ``SubprocVecEnv``, gymnasium
``SyncVectorEnv`` / ``AsyncVectorEnv`` and legacy gym's (0.21-0.26) two classes (and
subclasses that call their methods).

- **Per env.** The vector env's ``__init__`` wraps each env factory in an
  :class:`EnvFactory` that knows the env's index. It pickles by reference, so it reaches
  workers started by fork, forkserver and spawn alike. In a worker process the outermost
  env instance the factory returns, user wrappers included, gets instance-level
  ``step``/``reset`` that record ENV_STEP / ENV_RESET events carrying that index (inside
  the ``simulation`` operation, opened there unless already open). A worker also records
  its role (format.META_ROLE and friends) and which vector env it serves
  (format.META_VECENV).
- **Sequential classes** (the envs stepped one after another in the vector env's
  process): recording costs a fixed amount per vector step, whatever the number of envs.
  The envs are stepped as they are (a marked env class costs a native check per step:
  the vector step is the ``simulation`` operation already), nothing is set on them, and
  per-env events are *sampled*: a vector step or reset (the first always) when at least
  ``SAMPLE_NS_PER_ENV`` x num_envs has passed since the last sampled one began has
  recording stand-ins for its envs in the vector env's ``envs`` list for that call only
  (announced as ``"sampled": true``; the lock-step analysis reads the sampled steps).
- **Per vector step**, in the process that holds the vector env: one ENV_STEP event pair
  with index -1, named after the vector env (``SubprocVecEnv#1``), from the start of
  ``step_async`` (the actions are sent) to the end of ``step_wait``; vector resets the
  same as ENV_RESET. For the worker classes ``step_wait`` (``reset_wait``) is also
  recorded as a blocking call (WAIT_CALL): the wait part. With the native recorder these
  wrappers are ``rlscope._native.vec_step`` (no Python frame per vector step); the
  closures here are their twins for the Python recorder.

Nothing is changed while no recording is active when the vector env is made.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import weakref
from collections.abc import Callable, Iterator
from time import perf_counter_ns as _now_ns
from typing import Any

from rlscope import annotate
from rlscope.integrations import wrap_method
from rlscope.intercept.patch import Patcher, is_env_call, native_recorder, recorder_env_call
from rlscope.trace import format as fmt

CALL_WAIT = 2  # the WAIT_CALL category of the call wrappers (native/common/calls.h)
SIMULATION = "simulation"  # the operation the gymnasium and SB3 integrations open
# A sampled vector step costs ~3k instructions per env (stand-ins swapped in, native
# env calls, swapped out; callgrind, scripts/bench/fast_env_instructions.py), ~1 us: one
# every 1 ms per env keeps that to ~100 instructions per env step of a fast env
# (CartPole x16: one vector step in ~30) and ~0.1% of any loop, and samples every step
# of envs slower than 1 ms.
SAMPLE_NS_PER_ENV = 1_000_000

_serial = itertools.count(1)
_factories_running = 0  # > 0 while a vector env's factory makes an env (this thread or not)
_announced: list[dict[str, Any]] = []  # this process's vector envs (format.META_VECENVS)
os.register_at_fork(after_in_child=_announced.clear)  # a child holds none of them


def recorded_method(method: Callable[..., Any], reset: bool, index: int,
                    name: str) -> Callable[..., Any]:
    """``method`` recorded as an env's step (or reset) with ``index``, inside the
    ``simulation`` operation (opened unless open: a user wrapper around a marked env is
    simulation too): what a vector env's envs get (the calibration's microbenchmark
    times it). The recorder's EnvCall: native, no Python frame per call."""
    return recorder_env_call()(method, reset, index, name, SIMULATION)


# On a subclass that marks one env made outside a vector env (the gymnasium integration's
# marked_subclass): the class that env was made as.
MARKED_OF = "_rlscope_marked_of"


def unmark(env: Any) -> None:
    """An env marked on its own (a stand-alone ``gymnasium.make``) put back to its own
    class: handed to a vector env (SB3's ``PPO("MlpPolicy", env)`` wraps it in a
    ``DummyVecEnv``), its steps run inside the vector step, where a marked ``step``
    would pass a call on at each."""
    base = vars(type(env)).get(MARKED_OF)
    if isinstance(base, type):
        try:
            env.__class__ = base
        except TypeError:
            pass


def _env_name(env: Any) -> str:
    try:
        sid = getattr(getattr(env, "spec", None), "id", None)
    except Exception:  # a user property may raise anything
        sid = None
    return sid if isinstance(sid, str) and sid else type(env).__name__


def record_env(env: Any, index: int) -> bool:
    """Record ``env``'s own ``step``/``reset`` calls with ``index``; False if it cannot
    take instance attributes."""
    name = _env_name(env)
    try:
        for attr, reset in (("step", False), ("reset", True)):
            method = getattr(env, attr)
            if is_env_call(method):
                continue
            setattr(env, attr, recorded_method(method, reset, index, name))
    except (AttributeError, TypeError):
        return False
    return True


class EnvFactory:
    """An env factory that knows the env's index in its vector env. Called in a worker
    it announces the worker's role and records the env it made; in the process that made
    the vector env it only makes the env (the sequential classes' envs are sampled by the
    vector env: :class:`_Sampled`; the worker classes make a throw-away env there to read
    the spaces)."""

    def __init__(self, fn: Callable[[], Any], index: int, num_envs: int, vec_class: str,
                 vec_name: str, owner_pid: int, in_process: bool) -> None:
        self.fn = fn
        self.index = index
        self.num_envs = num_envs
        self.vec_class = vec_class
        self.vec_name = vec_name
        self.owner_pid = owner_pid
        self.in_process = in_process
        self.__wrapped__ = fn

    def __call__(self) -> Any:
        rec = annotate.active_recorder()
        if rec is None:
            return self.fn()
        worker = os.getpid() != self.owner_pid
        if worker:
            announce_worker(rec, self.vec_class, self.index, self.num_envs,
                            {"pid": self.owner_pid, "name": self.vec_name})
        with making_envs():
            env = self.fn()
        if worker:
            record_env(env, self.index)
        return env

    def __repr__(self) -> str:
        return f"<rlscope env {self.index} of {self.vec_name}: {self.fn!r}>"


@contextlib.contextmanager
def making_envs() -> Iterator[None]:
    """A vector env making its envs (here or in a worker): see :func:`making_vector_env`."""
    global _factories_running
    _factories_running += 1
    try:
        yield
    finally:
        _factories_running -= 1


def making_vector_env() -> bool:
    """Whether a vector env's factory is making an env now: its steps will be taken
    inside the vector step (the ``simulation`` operation already, or recorded per env in
    a worker), so ``gymnasium.make`` need not mark its class for them."""
    return _factories_running > 0


def announce_worker(rec: Any, detail: str, index: int | list[int] | None,
                    num_envs: int | None, vec: dict[str, Any] | None = None) -> None:
    """Record this process's role, a vector-env worker: ``detail`` (the vector env's
    class), the index of the env it steps (or the list of them), how many the vector env
    has, and which vector env it serves (format.META_VECENV: {pid, name}) when known."""
    import json

    meta: dict[str, Any] = {fmt.META_ROLE: fmt.ROLE_VECENV_WORKER,
                            fmt.META_ROLE_DETAIL: detail}
    if index is not None:
        meta[fmt.META_ENV_INDEX] = index
    if num_envs is not None:
        meta[fmt.META_NUM_ENVS] = num_envs
    if vec is not None:
        meta[fmt.META_VECENV] = vec
    for key, value in meta.items():
        annotate.record_metadata(rec, key, json.dumps(value))


# -- the vector env classes, in the process that makes them ---------------------------

class _RecordingEnv:
    """An env standing in its vector env's ``envs`` list for one sampled call: its
    ``step``/``reset`` recorded with the env's index, everything else the env's own."""

    __slots__ = ("env", "reset", "step")

    def __init__(self, env: Any, index: int, name: str) -> None:
        self.env = env
        self.step = recorded_method(env.step, False, index, name)
        self.reset = recorded_method(env.reset, True, index, name)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.env, attr)


class _Sampled:
    """The envs of a sequential vector env, stepped as they are, with per-env recording
    for the sampled vector steps (module docstring): for those calls only, each env in
    the vector env's ``envs`` list is a :class:`_RecordingEnv` (made once per env).
    Nothing is set on the envs themselves: an attribute added to an instance's
    ``__dict__`` (even removed again) costs every later attribute access on it CPython's
    specialised paths, ~1.7k instructions per env step of a gymnasium CartPole
    (callgrind)."""

    __slots__ = ("__weakref__", "envs", "interval", "last", "names", "real", "stand_ins")

    def __init__(self, envs: list[Any]) -> None:
        self.envs, self.real = envs, list(envs)
        self.names = [_env_name(e) for e in envs]
        self.stand_ins: list[_RecordingEnv | None] = [None] * len(envs)
        self.interval = SAMPLE_NS_PER_ENV * len(envs)
        self.last = -(1 << 62)

    @classmethod
    def of(cls, envs: Any) -> _Sampled | None:
        """None when ``envs`` is not a list (its envs are then recorded at every step)."""
        if not isinstance(envs, list) or not envs:
            return None
        return cls(envs)

    def start(self, now: int) -> bool:
        """Whether this call (at ``now``, perf_counter_ns) is sampled; if so, its envs
        record until :meth:`stop`. The caller checked the interval."""
        if len(self.envs) != len(self.real):
            return False
        self.last = now
        envs, real, stand_ins = self.envs, self.real, self.stand_ins
        for i, env in enumerate(envs):
            s = stand_ins[i]
            if s is None or s.env is not env:  # new, or the vector env replaced it
                s = stand_ins[i] = _RecordingEnv(env, i, self.names[i])
            real[i] = env
            envs[i] = s
        return True

    def stop(self) -> None:
        self.envs[:] = self.real


class _Vec:
    """What rlscope keeps of a vector env (by ``id``, never on the instance: see
    :class:`_Sampled`; dropped with it)."""

    __slots__ = ("__weakref__", "name", "sampled")

    def __init__(self, name: str) -> None:
        self.name = name
        self.sampled: _Sampled | None = None


# Kept across fork, as the instance attribute was: a forked copy (the calibration's
# chunk copies) steps the same vector env and records it the same way.
_vecs: dict[int, _Vec] = {}


def _vec(self: Any) -> _Vec | None:
    return _vecs.get(id(self))


def _sample(v: _Vec) -> _Sampled | None:
    """The vector env's sampler when this call is sampled (inlined checks: a vector step
    of 16 CartPoles takes ~0.5 ms, and each Python call here ~0.1 us)."""
    smp = v.sampled
    if smp is None:
        return None
    now = _now_ns()
    return smp if now - smp.last >= smp.interval and smp.start(now) else None


def announce(rec: Any, entry: dict[str, Any]) -> None:
    """Add a vector env (or another barrier over workers: rlscope.integrations.rllib) to
    this process's format.META_VECENVS. ``entry``: name, class, num_envs, workers, and
    optionally key, the format.META_VECENV its workers record (default: this pid and
    the name)."""
    import json

    _announced.append(entry)
    annotate.record_metadata(rec, fmt.META_VECENVS, json.dumps(_announced))


def _init(orig: Callable[..., Any], in_process: bool) -> Callable[..., Any]:
    @functools.wraps(orig)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = annotate.active_recorder()
        key = "env_fns" if "env_fns" in kwargs else None
        fns = kwargs[key] if key else (args[0] if args else None)
        if rec is None or fns is None or _vec(self) is not None:
            return orig(self, *args, **kwargs)
        fns = list(fns)
        cls = type(self).__name__
        name = f"{cls}#{next(_serial)}"
        wrapped = [EnvFactory(fn, i, len(fns), cls, name, os.getpid(), in_process)
                   for i, fn in enumerate(fns)]
        if key:
            kwargs[key] = wrapped
        else:
            args = (wrapped, *args[1:])
        try:
            weakref.finalize(self, _vecs.pop, id(self), None)
        except TypeError:  # not weak-referenceable: not recorded
            return orig(self, *args, **kwargs)
        v = _vecs[id(self)] = _Vec(name)
        result = orig(self, *args, **kwargs)
        entry = {"name": name, "class": cls, "num_envs": len(fns), "workers": not in_process}
        envs = getattr(self, "envs", None)
        if in_process and isinstance(envs, list):
            for env in envs:
                unmark(env)
        v.sampled = _Sampled.of(envs) if in_process else None
        if v.sampled is not None:
            entry["sampled"] = True
        elif in_process and isinstance(envs, list):  # every step of every env, as before
            for i, env in enumerate(envs):
                record_env(env, i)
        announce(rec, entry)
        return result

    return __init__


# Parts of a vector step for the native wrapper (rlscope._native.vec_step): no Python
# frame per vector step; the closures below are its twins for the Python recorder.
WHOLE, BEGIN, END = 0, 1, 2


def _begins(orig: Callable[..., Any], reset: bool) -> Callable[..., Any]:
    """Opens the vector step (or reset): the actions go out in ``orig``."""
    native = native_recorder()
    if native is not None:
        return native.vec_step(orig, reset, BEGIN, _vecs)

    @functools.wraps(orig)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = annotate.active_recorder()
        v = _vecs.get(id(self))
        if rec is None or v is None:
            return orig(self, *args, **kwargs)
        rec.env_begin(reset, fmt.VECTOR_ENV_INDEX, v.name)
        try:
            return orig(self, *args, **kwargs)
        except BaseException:
            rec.env_end(reset, v.name)  # nothing was sent: no wait will close it
            raise

    return wrapper


def _ends(orig: Callable[..., Any], waiting: Any, reset: bool) -> Callable[..., Any]:
    """Closes the vector step (or reset) opened by :func:`_begins`; ``waiting`` is
    ``orig`` recorded as a blocking call, or ``orig`` itself (sequential classes)."""
    native = native_recorder()
    if native is not None:
        return native.vec_step(waiting, reset, END, _vecs)

    @functools.wraps(orig)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = annotate.active_recorder()
        v = _vecs.get(id(self))
        if rec is None or v is None:
            return orig(self, *args, **kwargs)
        smp = _sample(v)
        try:
            return waiting(self, *args, **kwargs)
        finally:
            if smp is not None:
                smp.stop()
            rec.env_end(reset, v.name)

    return wrapper


def _whole(orig: Callable[..., Any], reset: bool) -> Callable[..., Any]:
    """A vector step (or reset) done in one method."""
    native = native_recorder()
    if native is not None:
        return native.vec_step(orig, reset, WHOLE, _vecs)

    @functools.wraps(orig)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = annotate.active_recorder()
        v = _vecs.get(id(self))
        if rec is None or v is None:
            return orig(self, *args, **kwargs)
        rec.env_begin(reset, fmt.VECTOR_ENV_INDEX, v.name)
        smp = _sample(v)
        try:
            return orig(self, *args, **kwargs)
        finally:
            if smp is not None:
                smp.stop()
            rec.env_end(reset, v.name)

    return wrapper


def _replace(p: Patcher, cls: type, attr: str,
             make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> int:
    return wrap_method(p, cls, attr, make, flag="_rlscope_vecenv")


def _split(p: Patcher, cls: type, send: str, wait: str, reset: bool, workers: bool) -> int:
    n = _replace(p, cls, send, lambda f: _begins(f, reset))
    label = f"{cls.__name__}.{wait}"
    return n + _replace(p, cls, wait, lambda f: _ends(
        f, p.wrapper_for(f, CALL_WAIT, label) if workers else f, reset))


def instrument(p: Patcher, cls: type, *, workers: bool, step: tuple[str, ...],
               reset: tuple[str, ...]) -> int:
    """Instrument a vector env class. ``step``/``reset``: the method doing a whole vector
    step (reset), or the (send, wait) pair of methods."""
    n = _replace(p, cls, "__init__", lambda f: _init(f, in_process=not workers))
    for methods, is_reset in ((step, False), (reset, True)):
        if len(methods) == 2:
            n += _split(p, cls, methods[0], methods[1], is_reset, workers)
        else:
            n += _replace(p, cls, methods[0], functools.partial(_whole, reset=is_reset))
    return n


def install_sb3(vec_env: Any, p: Patcher) -> int:
    n = 0
    if isinstance(getattr(vec_env, "SubprocVecEnv", None), type):
        n += instrument(p, vec_env.SubprocVecEnv, workers=True,
                        step=("step_async", "step_wait"), reset=("reset",))
    if isinstance(getattr(vec_env, "DummyVecEnv", None), type):
        n += instrument(p, vec_env.DummyVecEnv, workers=False,
                        step=("step_async", "step_wait"), reset=("reset",))
    return n


def install_gym_legacy(vector: Any, p: Patcher) -> int:
    """gym 0.21-0.26: both classes step and reset through the async/wait pairs."""
    n = 0
    for cname, workers in (("AsyncVectorEnv", True), ("SyncVectorEnv", False)):
        cls = getattr(vector, cname, None)
        if isinstance(cls, type):
            n += instrument(p, cls, workers=workers, step=("step_async", "step_wait"),
                            reset=("reset_async", "reset_wait"))
    return n


def install_gymnasium(vector: Any, p: Patcher) -> int:
    n = 0
    if isinstance(getattr(vector, "AsyncVectorEnv", None), type):
        n += instrument(p, vector.AsyncVectorEnv, workers=True,
                        step=("step_async", "step_wait"), reset=("reset_async", "reset_wait"))
    if isinstance(getattr(vector, "SyncVectorEnv", None), type):
        n += instrument(p, vector.SyncVectorEnv, workers=False, step=("step",),
                        reset=("reset",))
    return n
