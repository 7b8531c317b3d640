"""The one way to open a run: :func:`open_run` reads each trace file of a run directory
once, removes rlscope's own overhead (when asked and calibrated), infers operations, and
analyses, into a :class:`Run` that holds everything the reporters need.

Three ways through, chosen here and nowhere else:

- **whole**: with a calibration to apply (or when the caller wants the events, as the
  timeline does) every file is read whole, corrected and analysed;
- **streamed**: otherwise a first pass per file collects what the sweep needs and the
  lock-step input (and keeps the events of files that fit in one batch); the sweep then
  takes the events batch by batch (rlscope.analysis.pipeline.stream);
- **fanned out**: ``jobs``/``ray``: one task per process (rlscope.analysis.pipeline.fanout),
  merged into exactly the serial results.

Python stack samples (SAMPLES) are joined to the events as recorded in the same read: on
the whole path before the correction moves them, on the streamed path to the events the
sweep is fed. Only a file too large to keep in one batch (the sweep reads it twice
already) and the fanned-out path read events once more for them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rlscope.analysis import hotspots, inferred
from rlscope.analysis.actors import Iterations
from rlscope.analysis.actors import analyze as analyze_iterations
from rlscope.analysis.engine.overlap import analyze_process
from rlscope.analysis.engine.paths import NameTable, PathTable
from rlscope.analysis.engine.process import ProcessResult
from rlscope.analysis.frames import Analysis, ProcessMeta
from rlscope.analysis.lockstep import Lockstep
from rlscope.analysis.lockstep import analyze as analyze_lockstep
from rlscope.analysis.lockstep import from_trace as lockstep_input
from rlscope.analysis.lockstep.reader import ProcessEvents
from rlscope.analysis.overhead.applied import (
    apply_correction,
    correction_entry,
    scaled_costs,
    withheld_entry,
    withheld_reason,
)
from rlscope.analysis.overhead.correction import CorrectionSummary
from rlscope.analysis.overhead.model import Calibration, find_calibration
from rlscope.analysis.pipeline import fanout
from rlscope.analysis.pipeline.stream import DEFAULT_BATCH, scan_files, sweep
from rlscope.analysis.processes.utilisation import GpuTruth, gpu_truth
from rlscope.trace.data import Events, ProcessTrace, Trace
from rlscope.trace.pystacks_reader import PyStacks, read_stacks, stack_files
from rlscope.trace.reader import read_files, read_progress, trace_files
from rlscope.trace.samples_reader import read_samples, sample_files

ANALYSIS, LOCKSTEP, EVENTS = "analysis", "lockstep", "events"  # what a caller wants
SAMPLES = "samples"  # the Python stack samples joined to the operations (Run.python_samples)
STACKS = "stacks"  # the Python stack samples as recorded, per process (Run.python_stacks)
Progress = Callable[[int], None]


@dataclass(frozen=True)
class RunOptions:
    """How to open a run (docs/rls-analyze.md).

    ``correct``: remove rlscope's own overhead with the directory's calibration.json, if
    there is one (docs/overhead-correction.md). ``infer``: ``inference``/``backprop``
    inferred from the loop's calls where none is recorded ("auto"), never ("off"), or in
    place of the recorded ones ("only"); docs/attribution.md. ``jobs``: analyse one process
    per task on that many local processes (None: one per CPU when the run is big enough;
    1: serial); ``ray``: on Ray instead, at that address ("": as ``ray.init()`` finds
    one). ``batch_events``: events per batch of the streamed sweep (memory bound).
    """

    correct: bool = True
    infer: str = "auto"
    jobs: int | None = 1
    ray: str | None = None
    batch_events: int | None = None

    def __post_init__(self) -> None:
        inferred.check_mode(self.infer)


@dataclass
class Run:
    """An opened run: what was asked for of it."""

    directory: Path
    run: dict[str, Any]  # run.json, with the correction's entry when one was asked for
    analysis: Analysis | None = None
    lockstep: Lockstep | None = None  # None: not asked for
    # Actor/learner training iterations (rlscope.analysis.actors), read with LOCKSTEP's
    # input; None: not asked for, or no driver reported progress
    iterations: Iterations | None = None
    trace: Trace | None = None  # the events, corrected and inferred (EVENTS)
    # Python stack samples joined to the operations (SAMPLES; None: none were taken)
    python_samples: hotspots.Samples | None = None
    # Python stack samples as recorded, one per sampled process (STACKS; the timeline)
    python_stacks: list[PyStacks] | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def corrected(self) -> bool:
        return bool(self.run.get("correction", {}).get("applied"))


def open_run(directory: str | os.PathLike[str], options: RunOptions = RunOptions(),
             want: Collection[str] = (ANALYSIS,), progress: Progress | None = None,
             on_total: Progress | None = None) -> Run:
    """Open a run directory, reading each trace file once. ``want``: any of ANALYSIS (the
    tables), LOCKSTEP (the vector envs' lock-step analysis), EVENTS (the whole trace, for
    the timeline and dump), SAMPLES (the Python stack samples joined to the operations),
    STACKS (those samples as recorded). ``progress(n)`` is called as events are done,
    ``on_total(n)`` once with their number (with ``jobs``/``ray``: trace bytes, a process
    at a time)."""
    out = _open_run(directory, options, want, progress, on_total)
    if STACKS in want:
        out.python_stacks = [read_stacks(f) for f in stack_files(out.directory)]
    return out


def _open_run(directory: str | os.PathLike[str], options: RunOptions,
              want: Collection[str], progress: Progress | None,
              on_total: Progress | None) -> Run:
    d, run, files = trace_files(directory)  # the directory's errors first
    cal = find_calibration(d) if options.correct else None
    if EVENTS not in want and (options.ray is not None or options.jobs != 1):

        units, order = fanout.units(d, run, files)
        n = fanout.workers(options.jobs, units)
        if options.ray is not None or n > 1:
            return _fanned_out(d, run, units, order, n, cal, options, want, progress,
                               on_total)
    if cal is not None or EVENTS in want:
        return _whole(d, run, files, cal, options, want, progress, on_total)
    return _streamed(d, run, files, options, want, progress, on_total)


def _whole(d: Path, run: dict[str, Any], files: list[Path], cal: Calibration | None,
           options: RunOptions, want: Collection[str], progress: Progress | None,
           on_total: Progress | None) -> Run:

    recorded = trace = read_files(d, run, files)
    if options.correct:
        trace = apply_correction(trace, cal)  # marks it not corrected without one
    trace = replace(trace, processes=[inferred.apply(p, options.infer)
                                      for p in trace.processes])
    out = Run(d, trace.run, trace=trace if EVENTS in want else None,
              warnings=list(trace.warnings))
    if SAMPLES in want:  # on the recorded times, the samples' clock
        as_recorded = trace if not out.corrected else replace(
            recorded, processes=[inferred.apply(p, options.infer)
                                 for p in recorded.processes])
        _join_samples(out, as_recorded)
    if ANALYSIS in want:
        if on_total:
            on_total(total_events(trace))
        out.analysis = analyze(trace, progress, options.batch_events)
    if LOCKSTEP in want:
        out.lockstep, out.iterations = _lockstep(lockstep_input(trace, "off"), out.corrected)
    return out


def _streamed(d: Path, run: dict[str, Any], files: list[Path], options: RunOptions,
              want: Collection[str], progress: Progress | None,
              on_total: Progress | None) -> Run:

    batch = options.batch_events or DEFAULT_BATCH
    paths, phases = PathTable(), NameTable()
    sweeping = ANALYSIS in want
    scanned = scan_files(files, run, phases, options.infer, LOCKSTEP in want,
                         batch if sweeping else 0)
    if options.correct:
        run = dict(run, correction={"applied": False})
    out = Run(d, run, warnings=[w for s in scanned for w in s.trace.warnings])
    if LOCKSTEP in want:
        out.lockstep, out.iterations = _lockstep(
            [s.lockstep for s in scanned if s.lockstep is not None], False)
    if not sweeping:
        return out
    if on_total:
        on_total(sum(s.events + 2 * len(s.trace.api_calls) for s in scanned))
    results = []
    fed: list[ProcessTrace] = []  # for SAMPLES: each process's events as the sweep had them
    stacks = stack_files(d) if SAMPLES in want else []
    for s in scanned:
        keep: list[Events] | None = [] if stacks and s.kept is not None else None
        results.append(sweep(s, paths, phases, progress, batch, keep))
        if stacks:
            fed.append(replace(s.trace, events=Events.concat(keep)) if keep is not None
                       else _read_again(d, run, s.trace, options.infer))
        s.kept = None  # the events are done with: free them before the next process
    metas = [ProcessMeta(s.trace.pid, s.trace.header.ppid, s.trace.header.process_name,
                         s.trace.header.recorder, s.complete, s.events, s.trace.metadata,
                         s.trace.progress, s.trace.header, torn_bytes=s.trace.torn_bytes,
                         file=s.trace.path.name, gpu_truth=_truth(s.trace.gpu, r))
             for s, r in zip(scanned, results, strict=True)]
    out.analysis = _analysis(d, run, results, metas, paths, phases, out.warnings)
    if stacks:
        _join_samples(out, Trace(d, run, fed), stacks)
    return out


def _read_again(d: Path, run: dict[str, Any], p: ProcessTrace, infer: str) -> ProcessTrace:
    """A file too large to keep in one batch, read once more for its samples' join."""
    (again,) = [q for q in read_files(d, run, [p.path]).processes if q.pid == p.pid]
    return inferred.apply(again, infer)


def _join_samples(out: Run, recorded: Trace, files: list[Path] | None = None) -> None:
    """Run.python_samples from the run's stack files and its events as recorded."""
    files = stack_files(out.directory) if files is None else files
    if not files:
        return
    stacks = [read_stacks(f) for f in files]
    out.warnings += [w for st in stacks for w in st.warnings]
    out.python_samples = hotspots.join(recorded, stacks)


def _fanned_out(d: Path, run: dict[str, Any], units: list[Any], order: list[int], n: int,
                cal: Calibration | None, options: RunOptions, want: Collection[str],
                progress: Progress | None, on_total: Progress | None) -> Run:
    """One process per task (rlscope.analysis.pipeline.fanout)."""

    lockstep = LOCKSTEP in want
    scale = None
    not_applied: dict[str, Any] = {"applied": False}
    if cal is not None and withheld_reason(cal):  # its own check: raw is no worse
        not_applied, cal = withheld_entry(cal), None
    if cal is not None:  # read whole and corrected, as the serial analysis does

        root = units[order[0]] if order else None
        root_progress = None
        if cal.mode == "chunks" and root is not None and root.python is not None:

            root_progress = read_progress(root.python)
        costs, scale = scaled_costs(cal, root_progress)
        opts = fanout.Options(options.batch_events, options.infer, costs, lockstep,
                              siblings=tuple(units))
    else:
        opts = fanout.Options(options.batch_events or DEFAULT_BATCH, options.infer,
                              lockstep=lockstep)
    if on_total:
        on_total(sum(u.bytes for u in units))
    tasks = (fanout.run_ray(units, opts, options.ray, progress) if options.ray is not None
             else fanout.run_local(units, opts, n, progress))
    outs: list[Any] = [None] * len(units)
    for i, o in tasks:
        outs[i] = o
    m = fanout.merge(outs, order)
    if cal is not None:

        run = dict(run, correction=correction_entry(
            run, cal, CorrectionSummary(m.corrections), scale))
    elif options.correct:
        run = dict(run, correction=not_applied)
    metas = [ProcessMeta(o.header.pid, o.header.ppid, o.header.process_name,
                         o.header.recorder, o.complete, o.events, o.metadata, o.progress,
                         o.header, torn_bytes=o.torn_bytes, file=o.file,
                         gpu_truth=o.gpu_truth) for o in m.outs]
    warnings = [w for o in m.outs for w in o.warnings]
    out = Run(d, run, warnings=warnings)
    if lockstep:
        out.lockstep, out.iterations = _lockstep(
            [o.lockstep for o in m.outs if o.lockstep is not None], cal is not None)
    if ANALYSIS in want:
        out.analysis = _analysis(d, run, m.results, metas, m.paths, m.phases, warnings)
    if SAMPLES in want and stack_files(d):  # the tasks keep no events: read them again
        again = read_files(d, run, trace_files(d)[2])
        _join_samples(out, replace(again, processes=[inferred.apply(p, options.infer)
                                                     for p in again.processes]))
    return out


def _lockstep(procs: list[ProcessEvents], corrected: bool
              ) -> tuple[Lockstep, Iterations | None]:
    """The lock-step analysis and the training iterations, from the same input."""
    result = analyze_lockstep(procs)
    result.corrected = corrected
    return result, analyze_iterations(procs)


def _analysis(d: Path, run: dict[str, Any], results: list[ProcessResult],
              metas: list[ProcessMeta], paths: PathTable, phases: NameTable,
              warnings: list[str]) -> Analysis:
    """The tables, with rls-prof's utilisation samples when it took them."""
    samples = read_samples(sample_files(d))
    if samples is not None:
        warnings += samples.warnings
    return Analysis(str(d), run, results, metas, paths, phases, warnings, samples)


def _truth(gpu: Any, r: ProcessResult) -> GpuTruth | None:
    return (gpu_truth(gpu, r.span, r.phase_times, r.phase_ids, r.startup_ns) if len(gpu)
            else None)


def total_events(trace: Trace) -> int:
    return sum(len(p.events) + 2 * len(p.api_calls) for p in trace.processes)


def analyze(trace: Trace, progress: Progress | None = None,
            batch_events: int | None = None) -> Analysis:
    """Analyse a trace already read (and corrected and inferred as wanted);
    ``batch_events`` feeds each process's events to the engine in batches of that many
    (as streaming does)."""
    paths, phases = PathTable(), NameTable()
    results, metas = [], []
    for p in trace.processes:  # CUDA files are merged into their Python process already
        results.append(analyze_process(p, paths, phases, progress, batch_events))
        metas.append(ProcessMeta(p.pid, p.header.ppid, p.header.process_name,
                                 p.header.recorder, p.complete, len(p.events), p.metadata,
                                 p.progress, p.header, torn_bytes=p.torn_bytes,
                                 file=p.path.name, gpu_truth=_truth(p.gpu, results[-1])))
    return Analysis(str(trace.directory), trace.run, results, metas, paths, phases,
                    trace.warnings, trace.samples)
