"""Run a callback right after a top-level module has been imported (user code unchanged).

A finder first on ``sys.meta_path`` asks the other finders for the spec of a watched
module and wraps its loader's ``exec_module`` for that one import. Callbacks run after the
module (and everything its ``__init__`` imports) has executed, before the importer sees it.
Shared by :mod:`rlscope.intercept` (``enable``, the waits) and :mod:`rlscope.integrations`
(RLlib's lazily imported parts); it imports nothing from rlscope.
"""

from __future__ import annotations

import sys
import threading

TYPE_CHECKING = False  # typing is for the type checker: every profiled process imports this
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any

    Callback = Callable[[ModuleType], None]


def run_callback(cb: Callback, module: ModuleType) -> None:
    """Interception must never break the user's program: report and go on."""
    try:
        cb(module)
    except Exception:
        import traceback

        print(f"rlscope: could not instrument {module.__name__} (it runs unprofiled):",
              file=sys.stderr)
        traceback.print_exc(limit=3, file=sys.stderr)


class _ThenCall:
    """The loader of one import: ``loader``'s work, then ``after(module)``; anything else
    is asked of ``loader``."""

    def __init__(self, loader: Any, after: Callback) -> None:
        self._loader = loader
        self._after = after

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._after(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class PostImportFinder:
    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callback]] = {}
        self._lock = threading.RLock()
        self._busy: set[str] = set()

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname not in self.callbacks or fullname in self._busy:
            return None
        with self._lock:
            self._busy.add(fullname)
            try:
                spec = self._find_elsewhere(fullname, path, target)
            finally:
                self._busy.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader: Any = spec.loader
        finder = self

        def after(module: ModuleType) -> None:
            for cb in finder.callbacks.pop(fullname, []):
                run_callback(cb, module)

        if isinstance(loader, type):
            # Built-in and frozen modules are loaded by a class whose methods every such
            # import shares (``select`` is built in on Debian's and Ubuntu's Pythons):
            # patching and then deleting its exec_module would leave the class without
            # one, and every later built-in import would recurse forever.
            spec.loader = _ThenCall(loader, after)  # type: ignore[assignment]  # duck-typed
            return spec
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            try:
                original(module)
            finally:
                try:
                    del loader.exec_module  # back to the class's method
                except AttributeError:
                    pass
            after(module)

        try:
            loader.exec_module = exec_module
        except (AttributeError, TypeError):  # a loader with __slots__: cannot hook
            return spec
        return spec

    def _find_elsewhere(self, fullname: str, path: Sequence[str] | None,
                        target: ModuleType | None) -> ModuleSpec | None:
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                return spec
        return None


_finder: PostImportFinder | None = None


def when_imported(name: str, callback: Callback) -> None:
    """Call ``callback(module)`` now if top-level module ``name`` is imported, else right
    after its import."""
    global _finder
    mod = sys.modules.get(name)
    if mod is not None:
        run_callback(callback, mod)
        return
    if _finder is None:
        _finder = PostImportFinder()
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
    _finder.callbacks.setdefault(name, []).append(callback)


def cancel_all() -> None:
    """Forget pending callbacks and remove the finder."""
    global _finder
    if _finder is not None:
        _finder.callbacks.clear()
        try:
            sys.meta_path.remove(_finder)
        except ValueError:
            pass
        _finder = None
