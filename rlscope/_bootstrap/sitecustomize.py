"""Started by every Python process launched under ``rls-prof`` (its directory is put first
on PYTHONPATH). Starts recording, then runs the sitecustomize this one shadows, if any."""

import importlib.machinery
import importlib.util
import os
import sys


def _rlscope_autostart() -> None:
    try:
        from rlscope import _autostart
    except ImportError:
        return  # an interpreter without rlscope installed: run unprofiled
    _autostart.autostart()


def _rlscope_chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)


_rlscope_autostart()
_rlscope_chain()
