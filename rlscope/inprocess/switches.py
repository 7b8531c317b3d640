"""Environment switches of calibration runs, applied by :mod:`rlscope.inprocess.autostart`.

- ``RLSCOPE_ANNOTATIONS=0``: recording runs, but ``rlscope.operation``/``phase`` scopes
  are not recorded (the calibration's *base* configuration: the fixed cost of recording).
- ``RLSCOPE_MAX_PROGRESS=N``: end the process at the script's N-th progress report
  (:mod:`rlscope.inprocess.limits`); honoured with or without recording.

Interception is selected by ``RLSCOPE_INTERCEPT`` and the CUDA collector by its preload,
as in any profiled run (docs/rls-prof.md).
"""

from __future__ import annotations

import os
import sys

from rlscope import envvars


def apply_work_limit() -> None:
    from rlscope.inprocess.limits import install_progress_limit, parse_limit

    try:
        n = parse_limit(os.environ.get(envvars.MAX_PROGRESS))
    except ValueError as e:
        print(f"rlscope: {e}; running without a work limit", file=sys.stderr)
        return
    if n is None:
        return
    by = os.environ.get(envvars.PROGRESS_BY, "")
    if by:
        from rlscope.inprocess.limits import install_integration_limit

        # The bound is this process's: the processes it starts (vector-env workers,
        # Ray's actors, a learner of its own) run unbounded.
        os.environ.pop(envvars.PROGRESS_BY, None)
        os.environ.pop(envvars.MAX_PROGRESS, None)
        if not install_integration_limit(by, n):
            print(f"rlscope: {envvars.PROGRESS_BY}={by!r} cannot bound the work; running "
                  "without a work limit", file=sys.stderr)
        return
    install_progress_limit(n)


def apply_annotation_switch() -> None:
    """With ``RLSCOPE_ANNOTATIONS=0`` annotations are no-op scopes while recording."""
    if os.environ.get(envvars.ANNOTATIONS, "1") != "0":
        return
    from rlscope import annotate

    annotate.record_annotations(False)
