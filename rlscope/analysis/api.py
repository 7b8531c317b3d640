"""The Python API of the analysis: ``rlscope.analysis.load(dir)`` and ``analyze(trace)``,
both through the one pipeline (rlscope.analysis.pipeline.run)."""

from __future__ import annotations

import os
from collections.abc import Callable

from rlscope.analysis import inferred
from rlscope.analysis.frames import Analysis
from rlscope.analysis.lockstep import Lockstep
from rlscope.analysis.pipeline import run as pipeline
from rlscope.trace.data import Trace


def load(directory: str | os.PathLike[str],
         progress: Callable[[int], None] | None = None, correct: bool = True,
         batch_events: int | None = None,
         on_total: Callable[[int], None] | None = None, infer: str = "auto",
         jobs: int | None = 1, ray: str | None = None) -> Analysis:
    """Read and analyse a trace directory: :func:`rlscope.analysis.pipeline.run.open_run`
    with these options (:class:`~rlscope.analysis.pipeline.run.RunOptions`), its tables.
    ``progress(n)`` is called as events are done, ``on_total(n)`` once with their number.

    With ``correct`` and a calibration.json in the directory, rlscope's own overhead is
    removed first (docs/overhead-correction.md); that reads the whole trace. Otherwise the
    analysis streams: memory is bounded by ``batch_events`` (default 1M events), not by
    the trace (docs/analysis.md).
    """
    opts = pipeline.RunOptions(correct, infer, jobs, ray, batch_events)
    run = pipeline.open_run(directory, opts, (pipeline.ANALYSIS,), progress, on_total)
    assert run.analysis is not None
    return run.analysis


def analyze(trace: Trace, progress: Callable[[int], None] | None = None,
            batch_events: int | None = None, infer: str = "auto") -> Analysis:
    """Analyse a trace already read, with operations inferred as ``infer`` says."""
    inferred.check_mode(infer)
    procs = [inferred.apply(p, infer) for p in trace.processes]
    return pipeline.analyze(Trace(trace.directory, trace.run, procs, trace.samples),
                            progress, batch_events)


def load_lockstep(directory: str | os.PathLike[str], correct: bool = True,
                  infer: str = "auto") -> Lockstep:
    """The lock-step analysis of a run directory (vector envs; docs/multiprocess.md),
    through the same pipeline: with ``correct`` and a calibration.json, overhead-corrected
    (that reads the whole trace); otherwise one pass over each file."""
    run = pipeline.open_run(directory, pipeline.RunOptions(correct, infer),
                            (pipeline.LOCKSTEP,))
    assert run.lockstep is not None
    return run.lockstep
