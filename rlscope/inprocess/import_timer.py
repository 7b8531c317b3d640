"""Time the imports a profiled process makes on its recording thread, for the start-up
row of the analysis (docs/analysis.md#start-up).

A finder first on ``sys.meta_path`` sees every import of a module not loaded yet. For one
that is not inside another import of this thread it finds the spec with the other finders
(the search the import system would make anyway), wraps its loader's ``exec_module`` for
that one import, and records ``[begin_ns, end_ns]`` as metadata
``rlscope.import:<module>``: ``import torch`` is one record, with everything torch
imports inside it. Nested imports and other threads' imports cost one comparison; each
recorded import a closure, two clock reads and one metadata record
(scripts/bench/startup.py measures it).
"""

from __future__ import annotations

import sys
import time
from _thread import get_ident

from rlscope import annotate
from rlscope.trace.format import META_IMPORT_PREFIX

TYPE_CHECKING = False  # typing is for the type checker: every profiled process imports this
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any


def _record(name: str, begin: int, end: int) -> None:
    rec = annotate.active_recorder()
    if rec is not None:
        rec.metadata(META_IMPORT_PREFIX + name, f"[{begin}, {end}]")


class ImportTimer:
    def __init__(self) -> None:
        self.thread = get_ident()
        self.depth = 0  # > 0 while this thread finds or executes a timed import

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if self.depth or get_ident() != self.thread:
            return None
        begin = time.monotonic_ns()
        self.depth += 1
        try:
            found, spec = self._find_elsewhere(fullname, path, target)
        finally:
            self.depth -= 1
        if not found:  # a finder of the old protocol: let the import system ask it
            return None
        loader: Any = spec.loader if spec is not None else None
        # Class loaders (built-in, frozen modules) are shared: leave them alone.
        if loader is None or isinstance(loader, type) or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module
        timer = self

        def exec_module(module: ModuleType) -> None:
            timer.depth += 1
            try:
                original(module)
            finally:
                timer.depth -= 1
                try:
                    del loader.exec_module  # back to the class's method
                except AttributeError:
                    pass
                _record(fullname, begin, time.monotonic_ns())

        try:
            loader.exec_module = exec_module
        except (AttributeError, TypeError):  # a loader with __slots__: not timed
            pass
        return spec

    def _find_elsewhere(self, fullname: str, path: Sequence[str] | None,
                        target: ModuleType | None) -> tuple[bool, ModuleSpec | None]:
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                return False, None
            spec = find(fullname, path, target)
            if spec is not None:
                return True, spec
        return True, None


_timer: ImportTimer | None = None


def install() -> None:
    """Time this thread's imports from now on (once per process)."""
    global _timer
    if _timer is None:
        _timer = ImportTimer()
        sys.meta_path.insert(0, _timer)


def uninstall() -> None:
    global _timer
    if _timer is not None:
        try:
            sys.meta_path.remove(_timer)
        except ValueError:
            pass
        _timer = None
