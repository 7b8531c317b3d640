"""Recorder back-ends: the native extension (``rlscope._native``) and its pure-Python twin
(``rlscope.recorder.pyrecorder``). Both are modules with the functions of
:class:`rlscope.recorder.protocol.Recorder`; ``rlscope.annotate`` uses whichever
:func:`load_recorder` returns."""

from __future__ import annotations

RECORDERS = ("native", "python")

TYPE_CHECKING = False
if TYPE_CHECKING:
    from rlscope.recorder.protocol import Recorder


def load_recorder(kind: str) -> tuple[Recorder, str | None]:
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
