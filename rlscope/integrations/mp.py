"""multiprocessing: what each of its processes is, recorded as process metadata
(docs/multiprocess.md) so the report can name workers, helpers and their parents.

- Every child started through ``multiprocessing.Process`` (fork, spawn, forkserver)
  records, as ``_bootstrap`` starts it, its multiprocessing name, what it runs and its
  role: ``pool worker`` for ``Pool`` / ``ProcessPoolExecutor`` workers, else
  ``multiprocessing process``. A forkserver's children inherit the forkserver's argv, so
  only what runs in them tells them apart.
- The forkserver and the resource tracker record their role when they import
  multiprocessing (their ``python -c`` code says what they are).

Nothing is recorded while no recording is active; a failure here never reaches the
user's program.
"""

from __future__ import annotations

import functools
import sys

from rlscope import annotate
from rlscope.intercept.patch import Patcher, raw_lookup
from rlscope.trace import format as fmt

TYPE_CHECKING = False  # typing is for the type checker: most programs import multiprocessing
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

# (module, qualname) of the functions pools run in their workers -> the pool's kind.
_POOL_TARGETS = {
    ("multiprocessing.pool", "worker"): "multiprocessing.Pool",
    ("concurrent.futures.process", "_process_worker"): "ProcessPoolExecutor",
}


def install(mp: ModuleType, p: Patcher) -> int:
    helper = helper_role(getattr(sys, "orig_argv", sys.argv))
    if helper is not None and annotate.is_active():
        annotate.set_metadata(**{fmt.META_ROLE: helper})
    process = sys.modules.get("multiprocessing.process")
    base = getattr(process, "BaseProcess", None)
    if base is None:
        return 0
    try:
        raw, _ = raw_lookup(base, "_bootstrap")
    except AttributeError:
        return 0
    if getattr(raw, "_rlscope_roles", False):
        return 0
    p.replace(base, "_bootstrap", _recording_bootstrap(raw))
    return 1


def helper_role(argv: list[str]) -> str | None:
    """The forkserver's or resource tracker's role from its ``-c`` code, else None."""
    try:
        code = argv[argv.index("-c") + 1]
    except (ValueError, IndexError):
        return None
    return next((role for start, role in fmt.MP_HELPER_CODE.items()
                 if code.startswith(start)), None)


def _recording_bootstrap(bootstrap: Any) -> Any:
    @functools.wraps(bootstrap)
    def _bootstrap(self: Any, *args: Any, **kwargs: Any) -> Any:
        if annotate.is_active():
            try:
                annotate.set_metadata(**child_metadata(self))
            except Exception:  # never break the child over metadata
                pass
        return bootstrap(self, *args, **kwargs)

    _bootstrap._rlscope_roles = True  # type: ignore[attr-defined]
    return _bootstrap


def child_metadata(process: Any) -> dict[str, str]:
    """Role, name and target of a multiprocessing child, from its Process object."""
    target = getattr(process, "_target", None)
    if target is None:  # a Process subclass that overrides run()
        target = type(process)
    module = getattr(target, "__module__", None) or "?"
    qualname = getattr(target, "__qualname__", None) or type(target).__name__
    out = {fmt.META_MP_NAME: str(process.name), fmt.META_MP_TARGET: f"{module}:{qualname}",
           fmt.META_ROLE: fmt.ROLE_MP_PROCESS}
    pool = _POOL_TARGETS.get((module, qualname))
    if pool is not None:
        out[fmt.META_ROLE] = fmt.ROLE_POOL_WORKER
        out[fmt.META_ROLE_DETAIL] = pool
    return out
