"""Environment switches of calibration runs, applied by :mod:`rlscope.inprocess.autostart`.

- ``RLSCOPE_ANNOTATIONS=0``: recording runs, but ``rlscope.operation``/``phase`` scopes
  are not recorded (the calibration's *base* configuration: the fixed cost of recording).
- ``RLSCOPE_MAX_PROGRESS=N``: end the process at the script's N-th progress report
  (:mod:`rlscope.inprocess.limits`); honoured with or without recording.
- ``RLSCOPE_WORK_TALLY=FILE``: count the process's progress reports (or optimizer steps)
  and write the count to FILE at exit; a run without rlscope does this for the check.

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


def apply_work_tally() -> None:
    """``RLSCOPE_WORK_TALLY=FILE`` (with ``RLSCOPE_PROGRESS_BY`` for an integration's
    progress or torch optimizer steps): this process counts its units of work and writes
    the count to FILE at exit (:func:`rlscope.inprocess.limits.install_tally`). Its own
    only: the processes it starts run without rlscope's bootstrap at all."""
    from rlscope.inprocess.limits import install_tally

    path = os.environ.pop(envvars.WORK_TALLY, "")
    by = os.environ.pop(envvars.PROGRESS_BY, "")
    _drop_bootstrap()
    if path and not install_tally(by, path):
        print(f"rlscope: {envvars.PROGRESS_BY}={by!r} cannot be counted; no tally",
              file=sys.stderr)


def _drop_bootstrap() -> None:
    """Take rlscope's bootstrap off the PYTHONPATH the processes started from now on
    inherit."""
    here = os.environ.pop(envvars.BOOTSTRAP_DIR, "")
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    kept = [p for p in paths if p and p != here]
    if kept:
        os.environ["PYTHONPATH"] = os.pathsep.join(kept)
    else:
        os.environ.pop("PYTHONPATH", None)


def apply_annotation_switch() -> None:
    """With ``RLSCOPE_ANNOTATIONS=0`` annotations are no-op scopes while recording."""
    if os.environ.get(envvars.ANNOTATIONS, "1") != "0":
        return
    from rlscope import annotate

    annotate.record_annotations(False)
