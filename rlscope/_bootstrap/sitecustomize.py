"""Started by every Python process launched under ``rls-prof`` (its directory is put first
on PYTHONPATH). Starts recording, then runs the sitecustomize this one shadows, if any.
Imports only what it needs: every process under rls-prof pays for it."""

import os
import sys


def _rlscope_autostart() -> None:
    try:
        from rlscope.inprocess import autostart
    except ImportError:
        return  # an interpreter without rlscope installed: run unprofiled
    autostart.autostart()


def _rlscope_chain() -> None:
    from importlib.machinery import PathFinder

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    # What importlib.util.module_from_spec does, without importing importlib.util.
    module = type(sys)("sitecustomize")
    module.__spec__ = spec
    module.__loader__ = spec.loader
    module.__file__ = spec.origin
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_rlscope_autostart()
_rlscope_chain()
