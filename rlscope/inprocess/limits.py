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


def limited(func: Callable[..., Any], limit: int) -> Callable[..., Any]:
    """``func`` that ends the process once it has returned ``limit`` times (any
    arguments passed on: ``report_progress``'s ``metrics=`` too)."""
    count = 0

    @functools.wraps(func)
    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal count
        out = func(*args, **kwargs)
        count += 1
        if count >= limit:
            print(f"rlscope: stopping after {limit} progress reports ({ENV_MAX_PROGRESS})",
                  file=sys.stderr)
            raise WorkLimitReached(0)
        return out

    counted._rlscope_limited = True  # type: ignore[attr-defined]
    return counted


def install_integration_limit(by: str, limit: int) -> bool:
    """End the process at the ``limit``-th progress report integration ``by`` makes (or
    would make, not recording), counted by its method in libraries.PROGRESS_COUNTED once
    its module is imported: for sb3, SB3's updates of its progress counter; for rllib,
    ``Algorithm.train`` calls; for libraries.OPTIMIZER_STEPS, torch optimizer steps
    (:func:`install_optimizer_limit`). False for anything else."""
    if by == OPTIMIZER_STEPS:
        return install_optimizer_limit(limit)
    where = PROGRESS_COUNTED.get(by)
    if where is None:
        return False
    module, cls_name, method = where
    from rlscope.intercept import importhook

    def install(mod: Any) -> None:
        cls = getattr(mod, cls_name, None)
        if isinstance(cls, type) and callable(getattr(cls, method, None)):
            setattr(cls, method, limited(getattr(cls, method), limit))
        else:
            print(f"rlscope: {module}.{cls_name}.{method} not found; running without a "
                  f"work limit ({ENV_MAX_PROGRESS})", file=sys.stderr)

    importhook.when_imported(module, install)
    return True


def install_optimizer_limit(limit: int) -> bool:
    """End the process after its ``limit``-th torch optimizer step (any optimizer),
    counted by torch's global step post-hook once ``torch.optim.optimizer`` is imported;
    a forked child's steps are not counted (its parent's bound)."""
    from rlscope.intercept import importhook

    pid = os.getpid()
    count = 0

    def hook(_optimizer: Any, _args: Any, _kwargs: Any) -> None:
        nonlocal count
        if os.getpid() != pid:
            return
        count += 1
        if count >= limit:
            print(f"rlscope: stopping after {limit} optimizer steps ({ENV_MAX_PROGRESS})",
                  file=sys.stderr)
            raise WorkLimitReached(0)

    def install(mod: Any) -> None:
        register = getattr(mod, "register_optimizer_step_post_hook", None)
        if callable(register):
            register(hook)
        else:
            print("rlscope: this torch has no global optimizer step hook; running without "
                  f"a work limit ({ENV_MAX_PROGRESS})", file=sys.stderr)

    importhook.when_imported("torch.optim.optimizer", install)
    return True


def install_progress_limit(limit: int) -> None:
    """Replace ``rlscope.report_progress`` by a counting version; done at start-up,
    before the script imports it. ``rlscope.annotate.report_progress`` (what the sb3
    integration calls, only while recording) is left alone so it does not count."""
    import rlscope

    if getattr(rlscope.report_progress, "_rlscope_limited", False):
        return
    rlscope.report_progress = limited(rlscope.report_progress, limit)
