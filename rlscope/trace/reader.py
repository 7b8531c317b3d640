"""Read a trace directory into columnar numpy arrays (:mod:`rlscope.trace.data`).

A torn last record (the writer was killed mid-write) is reported as one warning and
skipped; anything else that does not parse raises :class:`TraceError` with one line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

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
    Trace,
)
from rlscope.trace.records import dropped_warning, iter_chunks, read_header, string_table
from rlscope.trace.rundir import host_directories
from rlscope.trace.samples_reader import read_samples, sample_files


def trace_files(directory: str | os.PathLike[str]) -> tuple[Path, dict[str, Any], list[Path]]:
    """The directory, its run.json and its trace files: those in it, then those of its host
    directories (DIR/<host>/, one per host of a run over several hosts) in name order."""
    d = Path(directory)
    if not d.exists():
        raise TraceError(f"trace directory {d} does not exist; pass the directory given "
                         "to rls-prof -o")
    if not d.is_dir():
        raise TraceError(f"{d} is not a directory; pass the directory given to rls-prof -o")
    run: dict[str, Any] = {}
    run_path = d / fmt.RUN_FILE
    if run_path.exists():
        try:
            run = json.loads(run_path.read_text())
        except (OSError, ValueError) as e:
            raise TraceError(f"{run_path} is not valid JSON ({e}); the run metadata is "
                             "corrupt") from None
    files = sorted(d.glob("*" + fmt.FILE_SUFFIX))
    for h in host_directories(d):  # a run over several hosts: DIR/<host>/ each
        files += sorted((d / h).glob("*" + fmt.FILE_SUFFIX))
    if len(files) > 1:
        from rlscope.trace.stubs import without_exec_stubs

        files = without_exec_stubs(files)
    if not files:
        raise TraceError(f"no rlscope trace files (*{fmt.FILE_SUFFIX}) in {d}; record one "
                         f"with: rls-prof -o {d} -- python your_script.py")
    return d, run, files


def read_trace(directory: str | os.PathLike[str]) -> Trace:
    """Read every process's trace file in ``directory``."""
    return read_files(*trace_files(directory))


def read_files(d: Path, run: dict[str, Any], files: list[Path]) -> Trace:
    """Read the trace files of a run directory (as :func:`trace_files` gives them)."""
    processes = [read_process(f) for f in files]
    processes = merge_cuda(processes)  # cuda.<pid> files join python.<pid> ones
    versions = {p.header.format_version for p in processes}
    if len(versions) > 1:
        raise TraceError(f"{d} mixes trace format versions {sorted(versions)}; analyse the "
                         "files of one rlscope version at a time")
    clock = RunClock.of(run, [p.header for p in processes])  # several hosts: one clock
    processes.sort(key=lambda p: (clock.start(p.header), p.pid))
    return Trace(d, run, processes, read_samples(sample_files(d)))


def read_process(path: str | os.PathLike[str]) -> ProcessTrace:
    """Read one process's trace file."""
    p = Path(path)
    header, raw = read_header(p)
    if header.source == SOURCE_CUDA:
        return read_cuda_process(p, header, raw)
    return _assemble(p, header)


def _assemble(path: Path, header: Header) -> ProcessTrace:
    warnings: list[str] = []
    strings: dict[int, str] = {0: ""}
    threads: dict[int, ThreadInfo] = {}
    metadata: dict[str, Any] = {}
    parts: list[Events] = []
    progress: list[Progress] = []
    env: list[EnvEvents] = []
    aggs: list[Aggregates] = []
    dropped = chunks = 0
    torn: list[int] = []
    for c in iter_chunks(path, warnings, torn):
        strings.update(c.strings)
        threads.update((t.index, t) for t in c.threads)
        metadata.update(c.metadata)
        dropped += c.dropped
        chunks = c.sequence + 1
        if c.aggregates is not None:
            aggs.append(c.aggregates)
        if len(c.events):
            parts.append(c.events)
            progress.append(c.progress)
            env.append(c.env)
    if dropped:
        warnings.append(dropped_warning(path, dropped))
    events = Events.concat(parts)
    string_list = string_table(strings)
    if len(events) and int(events.name.max()) >= len(string_list):
        raise TraceError(f"{path} is corrupt: an event names an undefined string")
    return ProcessTrace(path, header, events, string_list, threads, Progress.concat(progress),
                        metadata, dropped, chunks, warnings, env=EnvEvents.concat(env),
                        torn_bytes=sum(torn), aggregates=Aggregates.concat(aggs))


def read_progress(path: str | os.PathLike[str]) -> np.ndarray:
    """The times (ns) of a Python trace file's progress records, one chunk at a time."""
    parts = [c.progress.time_ns for c in iter_chunks(Path(path)) if len(c.progress.time_ns)]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)
