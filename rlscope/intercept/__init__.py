"""Cross-stack attribution: wrap the native entry points of ML backends and simulators so
that time inside them is recorded as Backend / Simulator (docs/attribution.md).

    import rlscope.intercept
    rlscope.intercept.enable("torch,gym")    # or "auto" (everything), "none"
    ...
    rlscope.intercept.disable()              # every original restored

Each library is instrumented right after it is imported (an import hook), or at once if
it already is, so user code needs no change. Wrappers record only while a recording is
active; otherwise they cost a flag test per call. ``rls-prof`` calls :func:`enable` in
every profiled process (``--intercept``/``--no-intercept``).
"""

from __future__ import annotations

import gc
import threading
import time

from rlscope import libraries
from rlscope.intercept import importhook
from rlscope.intercept.patch import BACKEND, SIMULATOR, WAIT, Patcher
from rlscope.libraries import (
    ALIASES,
    ANNOTATING,
    BACKENDS,
    LIBRARIES,
    SIMULATORS,
    WAITS,
    counts,
    parse,
)
from rlscope.trace.format import META_INSTALL_PREFIX

TYPE_CHECKING = False  # typing is for the type checker: every profiled process imports this
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from types import ModuleType

__all__ = ["ALIASES", "ANNOTATING", "BACKEND", "BACKENDS", "LIBRARIES", "SIMULATOR",
           "SIMULATORS", "WAIT", "WAITS", "counts", "disable", "enable", "enabled", "parse",
           "when_imported"]
# Which libraries there are, their groups and installers: rlscope.libraries (a table this
# package shares with rlscope.integrations; neither package imports the other).

_lock = threading.Lock()
_patcher: Patcher | None = None
_enabled: list[str] = []


def enable(spec: str | Iterable[str] | None = "auto") -> list[str]:
    """Instrument the chosen libraries now if imported, else when they are imported.
    Returns the library names now enabled."""
    global _patcher
    names = parse(spec)
    with _lock:
        if _patcher is None:
            _patcher = Patcher()
        for name in names:
            if name in _enabled:
                continue
            _enabled.append(name)
            _hook_library(name, _patcher)
        return list(_enabled)


def _hook_library(name: str, p: Patcher) -> None:
    def callback(module: ModuleType) -> None:
        # The collector paused: right after a large import (torch) the few thousand
        # wrappers an installer makes would set off full collections that were due
        # anyway (2 x ~40 ms after `import torch`, against ~9 ms of wrapping), and the
        # cost model would count them as this install's.
        collecting = gc.isenabled()
        gc.disable()
        try:
            t0 = time.thread_time_ns()
            n = libraries.installer(name)(module, p)
            libraries.count(name, int(n))  # after: an installer may count its own hooks
            _note_install(name, time.thread_time_ns() - t0)
        finally:
            if collecting:
                gc.enable()

    importhook.when_imported(LIBRARIES[name][0], callback)


def _note_install(name: str, cpu_ns: int) -> None:
    """What setting up ``name``'s wrappers cost this process (wrapping torch: ~0.1-0.2 s
    of CPU), as metadata: the correction counts it in the process's fixed cost."""
    from rlscope import annotate

    rec = annotate.active_recorder()
    if rec is not None:
        rec.metadata(META_INSTALL_PREFIX + name, str(cpu_ns))


def disable() -> None:
    """Remove the import hook and restore every wrapped attribute exactly."""
    global _patcher
    with _lock:
        importhook.cancel_all()
        if _patcher is not None:
            _patcher.undo()
        _patcher = None
        _enabled.clear()
        counts.clear()


def enabled() -> list[str]:
    return list(_enabled)


def when_imported(module: str, callback: Callable[[ModuleType], None]) -> None:
    """Call ``callback(module)`` now if ``module`` (dotted names too) is imported, else
    right after its import (integrations whose library imports its parts lazily)."""
    importhook.when_imported(module, callback)
