"""Environment switches of calibration runs, applied by ``rlscope._autostart``.

- ``RLSCOPE_ANNOTATIONS=0``: recording runs, but ``rlscope.operation``/``phase`` scopes
  are not recorded (the calibration's *base* configuration: the fixed cost of recording).
- ``RLSCOPE_MAX_PROGRESS=N``: end the process at the script's N-th progress report
  (:mod:`rlscope.calibration.limits`); honoured with or without recording.

Interception is selected by ``RLSCOPE_INTERCEPT`` and the CUDA collector by its preload,
as in any profiled run (docs/rls-prof.md).
"""

from __future__ import annotations

import os
import sys

ENV_ANNOTATIONS = "RLSCOPE_ANNOTATIONS"


def apply_work_limit() -> None:
    from rlscope.calibration.limits import ENV_MAX_PROGRESS, install_progress_limit, parse_limit

    try:
        n = parse_limit(os.environ.get(ENV_MAX_PROGRESS))
    except ValueError as e:
        print(f"rlscope: {e}; running without a work limit", file=sys.stderr)
        return
    if n is not None:
        install_progress_limit(n)


def apply_annotation_switch() -> None:
    """With ``RLSCOPE_ANNOTATIONS=0`` annotations return the pure-Python no-op scopes (the
    native idle ones would record, since a recording is active)."""
    if os.environ.get(ENV_ANNOTATIONS, "1") != "0":
        return
    from rlscope import annotate

    annotate._set_factories(annotate._noop_operation, annotate._noop_phase)
