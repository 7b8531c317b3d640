"""Streaming analysis of a trace directory: memory bounded by the batch size, not the
trace size.

Each Python trace file is read one chunk at a time. A first pass collects what the sweep
needs up front (strings, threads, metadata, progress, the recorded span, the main thread's
phases, the markers operations are inferred from, what the lock-step analysis reads) and
validates the file; it keeps the events too while they fit in one batch, so a file of up
to ``batch_events`` events is read once. Only a larger file is read a second time, a batch
at a time, to feed :class:`~rlscope.analysis.engine.overlap.ProcessAnalyzer` with memory
bounded by the batch, not by the trace. The file is memory-mapped, so its bytes are not
copied. CUDA collector files (smaller, columnar) are read whole by the reader and merged
as usual.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlscope.analysis import inferred, inferred_events
from rlscope.analysis.engine.overlap import ProcessAnalyzer
from rlscope.analysis.engine.paths import NameTable, PathTable
from rlscope.analysis.engine.process import ProcessInfo, ProcessResult, process_info
from rlscope.analysis.engine.startup import first_user_time
from rlscope.analysis.engine.summary import ProcessSpan
from rlscope.analysis.engine.threadstate import phase_changes
from rlscope.analysis.lockstep.reader import Collector as LockstepCollector
from rlscope.analysis.lockstep.reader import ProcessEvents
from rlscope.errors import TraceError
from rlscope.trace import format as fmt
from rlscope.trace.clocks import RunClock
from rlscope.trace.cuda_reader import SOURCE as SOURCE_CUDA
from rlscope.trace.cuda_reader import merge_cuda, read_cuda_process
from rlscope.trace.data import (
    Aggregates,
    EnvEvents,
    Events,
    Header,
    ProcessTrace,
    Progress,
    ThreadInfo,
)
from rlscope.trace.records import dropped_warning, iter_chunks, read_header, string_table

DEFAULT_BATCH = 1 << 20  # events per batch fed to the sweep


@dataclass
class ScannedProcess:
    trace: ProcessTrace  # header, strings, threads, metadata, progress; no events
    info: ProcessInfo
    events: int
    complete: bool
    inferred: inferred.InferredOps | None = None  # operations inferred from the loop's markers
    lockstep: ProcessEvents | None = None  # what the lock-step analysis needs of it
    kept: Events | None = None  # all its events, when they fit in one batch


def scan(path: Path, header: Header, phases: NameTable, infer: str = "auto",
         lockstep: bool = False, keep_events: int = 0) -> ScannedProcess:
    """First pass: everything but the events, the ProcessInfo for the sweep, and the
    operations inferred where none is recorded (rlscope.analysis.inferred); with
    ``lockstep``, the lock-step analysis's input; the events themselves while there are
    at most ``keep_events`` (then no second pass is needed)."""
    strings: dict[int, str] = {0: ""}
    threads: dict[int, ThreadInfo] = {}
    metadata: dict[str, Any] = {}
    warnings: list[str] = []
    progress: list[Progress] = []
    env: list[EnvEvents] = []
    ph_rows: list[np.ndarray] = []
    n_events = dropped = 0
    expected = 0
    t_min, t_max = None, None
    start = end = None
    start_thread = first_thread = None
    first_user: int | None = None
    max_name = 0
    torn: list[int] = []
    collector = inferred_events.Collector(path)
    lockstep_in = LockstepCollector() if lockstep else None
    kept: list[Events] | None = [] if keep_events > 0 else None
    aggs: list[Aggregates] = []
    for c in iter_chunks(path, warnings, torn):
        expected = c.sequence + 1
        strings.update(c.strings)
        if c.aggregates is not None:
            aggs.append(c.aggregates)
        if infer != "off":
            collector.add(c.events, c.strings)
        if lockstep_in is not None:
            lockstep_in.add(c.events, c.strings)
        threads.update((t.index, t) for t in c.threads)
        metadata.update(c.metadata)
        dropped += c.dropped
        ev = c.events
        n = len(ev)
        if not n:
            continue
        n_events += n
        if kept is not None:
            if n_events <= keep_events:
                kept.append(ev)
            else:
                kept = None  # over the batch: the sweep reads the file again
        if first_thread is None:
            first_thread = int(ev.thread[0])
        lo, hi = int(ev.time_ns.min()), int(ev.time_ns.max())
        t_min = lo if t_min is None else min(t_min, lo)
        t_max = hi if t_max is None else max(t_max, hi)
        max_name = max(max_name, int(ev.name.max()))
        special = np.flatnonzero(ev.kind <= fmt.ENV_RESET_END)  # not the calls
        k = ev.kind[special]
        u = first_user_time(ev.time_ns[special], k)
        if u is not None and (first_user is None or u < first_user):
            first_user = u
        for i in special[k == fmt.PROCESS_START][:1].tolist():
            if start is None:
                start, start_thread = int(ev.time_ns[i]), int(ev.thread[i])
        ends = special[k == fmt.PROCESS_END]
        if len(ends):
            end = int(ev.time_ns[ends[-1]])
        ph = special[(k == fmt.PHASE_BEGIN) | (k == fmt.PHASE_END)]
        if len(ph):
            ph_rows.append(np.stack([ev.time_ns[ph], ev.thread[ph], ev.kind[ph],
                                     ev.name[ph]], 1).astype(np.int64))
        progress.append(c.progress)
        env.append(c.env)
    if dropped:
        warnings.append(dropped_warning(path, dropped))
    string_list = string_table(strings)
    if n_events and max_name >= len(string_list):
        raise TraceError(f"{path} is corrupt: an event names an undefined string")
    if n_events:
        assert t_min is not None and t_max is not None and first_thread is not None
        s0 = start if start is not None else t_min
        e0 = end if end is not None else t_max
        main = start_thread if start_thread is not None else first_thread
        span = ProcessSpan(s0, max(e0, s0), main)
    else:
        span = ProcessSpan(0, 0, -1)
    ph = np.concatenate(ph_rows) if ph_rows else np.zeros((0, 4), np.int64)
    mine = ph[ph[:, 1] == span.main_thread]
    mine = mine[np.argsort(mine[:, 0], kind="stable")]
    _, p_times, p_ids, _ = phase_changes(mine[:, 0], mine[:, 2], mine[:, 3], string_list,
                                         phases)
    info = ProcessInfo(span, p_times, p_ids, set(np.unique(ph[:, 1]).tolist()), first_user)
    plan = inferred.infer_ops(collector, string_list, infer)
    if plan is not None:
        string_list = plan.strings
        warnings += plan.note(inferred.process_label(header.pid, path))
    pt = ProcessTrace(path, header, Events.empty(), string_list, threads,
                      Progress.concat(progress), metadata, dropped, expected, warnings,
                      env=EnvEvents.concat(env), torn_bytes=sum(torn),
                      aggregates=Aggregates.concat(aggs))
    steps = (lockstep_in.finish(header, string_list, metadata, pt.env, plan,
                                pt.progress.time_ns)
             if lockstep_in is not None else None)
    return ScannedProcess(pt, info, n_events, end is not None, plan, steps,
                          Events.concat(kept) if kept is not None else None)


def events_of(s: ScannedProcess, batch_events: int) -> Iterator[Events]:
    """The process's events in batches of about ``batch_events``: those the first pass
    kept, else a second pass over its file."""
    if s.kept is not None:
        if len(s.kept):
            yield s.kept
        return
    yield from batches(s.trace.path, batch_events)


def batches(path: Path, batch_events: int) -> Iterator[Events]:
    """Second pass: the events in batches of about ``batch_events``."""
    parts: list[Events] = []
    n = 0
    for c in iter_chunks(path):
        if len(c.events):
            parts.append(c.events)
            n += len(c.events)
        if n >= batch_events:
            # The chunks let go before the batch is swept: else they double its memory.
            batch, parts, n = Events.concat(parts), [], 0
            yield batch
            del batch
    if parts:
        batch, parts = Events.concat(parts), []
        yield batch


def scan_files(files: list[Path], run: dict[str, Any], phases: NameTable, infer: str,
               lockstep: bool, keep_events: int) -> list[ScannedProcess]:
    """The first pass over every file of a run: Python files scanned, CUDA files read whole
    and merged into their processes, in run order (start on the run clock, then pid)."""
    scanned: list[ScannedProcess] = []
    cuda: list[ProcessTrace] = []
    for f in files:
        header, raw = read_header(f)
        if header.source == SOURCE_CUDA:
            cuda.append(read_cuda_process(f, header, raw))
        else:
            scanned.append(scan(f, header, phases, infer, lockstep, keep_events))
    merged = merge_cuda([s.trace for s in scanned] + cuda)
    by_id = {id(s.trace): s for s in scanned}
    out: list[ScannedProcess] = []
    for p in merged:
        s = by_id.get(id(p))
        if s is None:  # a CUDA file with no Python process

            s = ScannedProcess(p, process_info(p.events, p.strings, phases), 0, False)
        out.append(s)
    clock = RunClock.of(run, [s.trace.header for s in out])  # hosts on one clock
    out.sort(key=lambda s: (clock.start(s.trace.header), s.trace.pid))
    return out


def sweep(s: ScannedProcess, paths: PathTable, phases: NameTable,
          progress: Callable[[int], None] | None, batch_events: int,
          fed: list[Events] | None = None) -> ProcessResult:
    """The second stage: the process's events, batch by batch, through the sweep;
    ``fed`` collects them as fed (inferred operations merged in)."""
    a = ProcessAnalyzer(s.trace, s.info, paths, phases, progress)
    plan = s.inferred

    def feed(ev: Events) -> None:
        a.feed(ev)
        if fed is not None:
            fed.append(ev)

    if s.events:
        for ev in events_of(s, batch_events):
            feed(ev if plan is None else plan.batch(ev))
        if plan is not None:
            feed(plan.rest())
    return a.finish()
