"""Recorder back-ends. Both expose the same module-level functions (see pyrecorder)."""

from __future__ import annotations

from types import ModuleType

RECORDERS = ("native", "python")


def load_recorder(kind: str) -> tuple[ModuleType, str | None]:
    """The recorder module for ``kind``; falls back to the Python one with a reason."""
    if kind not in RECORDERS:
        raise ValueError(f"unknown recorder {kind!r}; choose one of {', '.join(RECORDERS)}")
    if kind == "native":
        try:
            from rlscope import _native
        except ImportError as e:
            from rlscope.recorder import pyrecorder

            return pyrecorder, f"native recorder unavailable ({e}); using the Python recorder"
        return _native, None
    from rlscope.recorder import pyrecorder

    return pyrecorder, None
