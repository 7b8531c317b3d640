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
process's torch optimizer steps.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

from rlscope.envvars import MAX_PROGRESS as ENV_MAX_PROGRESS
from rlscope.libraries import OPTIMIZER_STEPS, PROGRESS_COUNTED


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
    """End the process at the ``limit``-th progress report integration ``by`` makes (or
    would make, not recording), counted by its method in libraries.PROGRESS_COUNTED once
    its module is imported: for sb3, SB3's updates of its progress counter; for rllib,
    ``Algorithm.train`` calls; for libraries.OPTIMIZER_STEPS, torch optimizer steps
    (:func:`install_optimizer_limit`). False for anything else."""
    if by == OPTIMIZER_STEPS:
        return install_optimizer_limit(limit)
    return count_integration(by, _stop_at(limit, "progress reports"))


def count_integration(by: str, on_count: OnCount) -> bool:
    """Call ``on_count`` after each progress report integration ``by`` makes (or would
    make), counted as :func:`install_integration_limit` says; False for an unknown one."""
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


def install_optimizer_limit(limit: int) -> bool:
    """End the process after its ``limit``-th torch optimizer step (any optimizer),
    counted by torch's global step post-hook once ``torch.optim.optimizer`` is imported;
    a forked child's steps are not counted (its parent's bound)."""
    return count_optimizer_steps(_stop_at(limit, "optimizer steps"))


def count_optimizer_steps(on_count: OnCount) -> bool:
    """Call ``on_count`` after each of this process's torch optimizer steps (see
    :func:`install_optimizer_limit`)."""
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


def install_tally(by: str, path: str) -> bool:
    """Count this process's units of work (by ``""``: the script's own
    ``rlscope.report_progress`` calls; an integration's progress reports; or
    libraries.OPTIMIZER_STEPS: torch optimizer steps) and write how many there were to
    ``path`` when it exits (``{"count": n}``). The calibration's runs without rlscope do
    this, so that its check can tell whether they did the profiled run's work. False
    where ``by`` cannot be counted."""
    import atexit
    import json

    done = [0]

    def on_count(n: int) -> None:
        done[0] = n

    if by == OPTIMIZER_STEPS:
        count_optimizer_steps(on_count)
    elif by:
        if not count_integration(by, on_count):
            return False
    else:
        import rlscope

        rlscope.report_progress = counting(rlscope.report_progress, on_count)
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
