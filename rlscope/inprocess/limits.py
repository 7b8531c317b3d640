"""Bounding a run's work: ``RLSCOPE_MAX_PROGRESS=N`` ends the process at its N-th
``rlscope.report_progress`` call (docs/overhead-correction.md).

Calibration compares runs that must do the same work. A script with a fixed seed and step
count does; one that trains until a wall-clock limit or a reward threshold does not. The
bound counts the script's own ``report_progress`` calls, which are made (and counted)
whether or not anything is recorded, so the uninstrumented run stops at the same point as
the instrumented ones. Progress reported by the sb3 integration is only made while
recording, so it is not counted; with ``RLSCOPE_PROGRESS_BY=sb3`` the bound counts SB3's
own updates of its progress counter instead (where that integration reports progress),
with or without recording; with ``RLSCOPE_PROGRESS_BY=rllib``, RLlib's training
iterations (``Algorithm.train`` calls: the rllib integration reports after each); with
``RLSCOPE_PROGRESS_BY=torch-optimizer`` (a script that reports no progress), the root
process's torch optimizer steps; ``keras-optimizer``, its Keras 3 optimizer steps;
``jax-jit:NAME``, its calls of the function ``jax.jit`` made of NAME.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from rlscope.envvars import MAX_PROGRESS as ENV_MAX_PROGRESS
from rlscope.libraries import (
    JIT_CALLS,
    KERAS_OPTIMIZER,
    KERAS_STEPS,
    OPTIMIZER_STEPS,
    PROGRESS_COUNTED,
)


class WorkLimitReached(SystemExit):
    """Raised in the process at the N-th progress report: unwinds like ``sys.exit(0)``,
    so atexit handlers (and the trace flush) run."""


def parse_limit(value: str | None) -> int | None:
    if value is None or not value.strip():
        return None
    n = int(value)
    if n < 1:
        raise ValueError(f"{ENV_MAX_PROGRESS} must be a positive integer, not {value!r}")
    return n


OnCount = Callable[[int], None]  # called with n after the n-th unit of work


def _stop_at(limit: int, what: str) -> OnCount:
    """An :data:`OnCount` that ends the process at the ``limit``-th ``what``."""
    def on_count(n: int) -> None:
        if n >= limit:
            print(f"rlscope: stopping after {limit} {what} ({ENV_MAX_PROGRESS})",
                  file=sys.stderr)
            raise WorkLimitReached(0)
    return on_count


def counting(func: Callable[..., Any], on_count: OnCount) -> Callable[..., Any]:
    """``func`` that calls ``on_count(n)`` after it has returned for the n-th time (any
    arguments passed on: ``report_progress``'s ``metrics=`` too)."""
    count = 0

    @functools.wraps(func)
    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal count
        out = func(*args, **kwargs)
        count += 1
        on_count(count)
        return out

    counted._rlscope_limited = True  # type: ignore[attr-defined]
    return counted


def limited(func: Callable[..., Any], limit: int) -> Callable[..., Any]:
    """``func`` that ends the process once it has returned ``limit`` times."""
    return counting(func, _stop_at(limit, "progress reports"))


def install_integration_limit(by: str, limit: int) -> bool:
    """End the process at the ``limit``-th unit of work ``by`` names (RLSCOPE_PROGRESS_BY,
    counted as :func:`count_units` says: an integration's progress reports, or would-be
    reports when not recording; torch or Keras optimizer steps; a jitted function's
    calls). False for anything else."""
    return bool(by) and count_units(by, _stop_at(limit, _units_words(by)))


def _units_words(by: str) -> str:
    """The units ``by`` counts, plural, for the line a bound ends a process with."""
    if by.startswith(JIT_CALLS):
        return f"calls of {by[len(JIT_CALLS):]}"
    return "optimizer steps" if by in (OPTIMIZER_STEPS, KERAS_STEPS) else "progress reports"


def count_integration(by: str, on_count: OnCount) -> bool:
    """Call ``on_count`` after each progress report integration ``by`` makes (or would
    make), counted by its method in libraries.PROGRESS_COUNTED once its module is
    imported: for sb3, SB3's updates of its progress counter; for rllib,
    ``Algorithm.train`` calls. False for an unknown one."""
    where = PROGRESS_COUNTED.get(by)
    if where is None:
        return False
    module, cls_name, method = where
    from rlscope.intercept import importhook

    def install(mod: Any) -> None:
        cls = getattr(mod, cls_name, None)
        if isinstance(cls, type) and callable(getattr(cls, method, None)):
            setattr(cls, method, counting(getattr(cls, method), on_count))
        else:
            print(f"rlscope: {module}.{cls_name}.{method} not found; its progress is not "
                  f"counted ({ENV_MAX_PROGRESS})", file=sys.stderr)

    importhook.when_imported(module, install)
    return True


def count_optimizer_steps(on_count: OnCount) -> bool:
    """Call ``on_count`` after each of this process's torch optimizer steps (any
    optimizer), counted by torch's global step post-hook once ``torch.optim.optimizer`` is
    imported; a forked child's steps are not counted (its parent's bound)."""
    from rlscope.intercept import importhook

    pid = os.getpid()
    count = 0

    def hook(_optimizer: Any, _args: Any, _kwargs: Any) -> None:
        nonlocal count
        if os.getpid() != pid:
            return
        count += 1
        on_count(count)

    def install(mod: Any) -> None:
        register = getattr(mod, "register_optimizer_step_post_hook", None)
        if callable(register):
            register(hook)
        else:
            print("rlscope: this torch has no global optimizer step hook; its steps are "
                  f"not counted ({ENV_MAX_PROGRESS})", file=sys.stderr)

    importhook.when_imported("torch.optim.optimizer", install)
    return True


class _Depth(threading.local):
    """Calls in progress on this thread among those counted together."""

    n = 0


_forked = [False]  # in a forked child: its parent's units, not counted again
os.register_at_fork(after_in_child=lambda: _forked.__setitem__(0, True))


def _outermost(func: Callable[..., Any], depth: _Depth, on_call: Callable[[], None]
               ) -> Callable[..., Any]:
    """``func`` that calls ``on_call()`` after each call of it that no other call wrapped
    with the same ``depth`` encloses on its thread (what the recorder records of nested
    calls: the outermost), not in a forked child (its parent's bound)."""
    @functools.wraps(func)
    def outer(*args: Any, **kwargs: Any) -> Any:
        d = depth.n
        depth.n = d + 1
        try:
            out = func(*args, **kwargs)
        finally:
            depth.n = d
        if not d and not _forked[0]:
            on_call()
        return out

    return outer


def _counter(on_count: OnCount) -> Callable[[], None]:
    count = 0

    def on_call() -> None:
        nonlocal count
        count += 1
        on_count(count)

    return on_call


def count_keras_steps(on_count: OnCount) -> bool:
    """Call ``on_count`` after each of this process's Keras 3 optimizer steps (outermost
    ``BaseOptimizer.apply`` calls: ``apply_gradients`` calls it), once Keras's optimizer
    module is imported."""
    from rlscope.intercept import importhook

    module, cls_name, method = KERAS_OPTIMIZER
    on_call = _counter(on_count)

    def install(mod: Any) -> None:
        cls = getattr(mod, cls_name, None)
        if isinstance(cls, type) and callable(getattr(cls, method, None)):
            setattr(cls, method, _outermost(getattr(cls, method), _Depth(), on_call))
        else:
            print(f"rlscope: {module}.{cls_name}.{method} not found; its steps are not "
                  f"counted ({ENV_MAX_PROGRESS})", file=sys.stderr)

    importhook.when_imported(module, install)
    return True


class _Jitted:
    """A jitted function whose outermost calls (as :func:`_outermost`, inline: one Python
    frame a call) are counted by ``on_call`` (None: only nested in), its attributes
    (``lower``, ``trace``, ``clear_cache``) and method binding forwarded."""

    def __init__(self, f: Any, depth: _Depth, on_call: Callable[[], None] | None) -> None:
        self._rlscope_f = f
        self._rlscope_depth = depth
        self._rlscope_on_call = on_call
        self.__wrapped__ = f

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        depth = self._rlscope_depth
        d = depth.n
        depth.n = d + 1
        try:
            out = self._rlscope_f(*args, **kwargs)
        finally:
            depth.n = d
        if not d and self._rlscope_on_call is not None and not _forked[0]:
            self._rlscope_on_call()
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rlscope_f, name)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)


def count_jit_calls(name: str, on_count: OnCount) -> bool:
    """Call ``on_count`` after each outermost call (no other jitted function's call
    around it) of the functions ``jax.jit`` makes of a function whose qualified name is
    ``name``, once JAX is imported (functions jitted before are not seen)."""
    from rlscope.intercept import importhook

    depth = _Depth()
    on_call = _counter(on_count)

    def jit_counting(jit: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(jit)
        def counted_jit(fun: Any = None, *args: Any, **kwargs: Any) -> Any:
            if fun is None:  # jax.jit(static_argnums=...) as a decorator factory
                return functools.partial(counted_jit, *args, **kwargs)
            jitted = jit(fun, *args, **kwargs)
            mine = (getattr(fun, "__qualname__", None) or type(fun).__name__) == name
            return _Jitted(jitted, depth, on_call if mine else None)

        return counted_jit

    def install(jax: Any) -> None:
        jit = getattr(jax, "jit", None)
        if callable(jit):
            jax.jit = jit_counting(jit)

    importhook.when_imported("jax", install)
    return True


def count_units(by: str, on_count: OnCount) -> bool:
    """Call ``on_count(n)`` after this process's n-th unit of work: by ``""`` the script's
    own ``rlscope.report_progress`` calls; an integration's progress reports
    (libraries.PROGRESS_COUNTED); torch or Keras optimizer steps; a jitted JAX
    function's calls (libraries.JIT_CALLS + its name). False where ``by`` names none."""
    if by == OPTIMIZER_STEPS:
        return count_optimizer_steps(on_count)
    if by == KERAS_STEPS:
        return count_keras_steps(on_count)
    if by.startswith(JIT_CALLS):
        return bool(by[len(JIT_CALLS):]) and count_jit_calls(by[len(JIT_CALLS):], on_count)
    if by:
        return count_integration(by, on_count)
    import rlscope

    rlscope.report_progress = counting(rlscope.report_progress, on_count)
    return True


def install_tally(by: str, path: str) -> bool:
    """Count this process's units of work (:func:`count_units`) and write how many there
    were to ``path`` when it exits (``{"count": n}``). The calibration's runs without rlscope do
    this, so that its check can tell whether they did the profiled run's work. False
    where ``by`` cannot be counted."""
    import atexit
    import json

    done = [0]

    def on_count(n: int) -> None:
        done[0] = n

    if not count_units(by, on_count):
        return False
    pid = os.getpid()

    def write() -> None:
        if os.getpid() != pid:  # a forked child's exit: the count is its parent's
            return
        try:
            with open(path, "w") as f:
                json.dump({"count": done[0]}, f)
        except OSError:  # no tally: the check goes without it
            pass

    atexit.register(write)
    return True


def install_progress_limit(limit: int) -> None:
    """Replace ``rlscope.report_progress`` by a counting version; done at start-up,
    before the script imports it. ``rlscope.annotate.report_progress`` (what the sb3
    integration calls, only while recording) is left alone so it does not count."""
    import rlscope

    if getattr(rlscope.report_progress, "_rlscope_limited", False):
        return
    rlscope.report_progress = limited(rlscope.report_progress, limit)
