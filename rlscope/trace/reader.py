"""Read a trace directory into columnar numpy arrays.

A torn last record (the writer was killed mid-write) is reported as one warning and
skipped; anything else that does not parse raises :class:`TraceError` with one line.
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rlscope.errors import TraceError
from rlscope.trace import format as fmt
from rlscope.trace.cuda_reader import SOURCE as SOURCE_CUDA
from rlscope.trace.cuda_reader import merge_cuda, read_cuda_records
from rlscope.trace.gpu import CudaApiCalls, GpuActivities

if TYPE_CHECKING:
    from rlscope.trace.cuda_reader import CudaInfo

RUN_FILE = "run.json"


@dataclass(frozen=True)
class Header:
    format_version: int
    source: str
    pid: int
    ppid: int
    host: str
    process_name: str
    argv: tuple[str, ...]
    clock: fmt.ClockPair
    recorder: str
    rlscope_version: str


@dataclass(frozen=True)
class ThreadInfo:
    index: int
    tid: int
    name: str


@dataclass
class Events:
    """One row per event, in file order (grouped by thread within each chunk)."""

    time_ns: np.ndarray  # int64, CLOCK_MONOTONIC
    thread: np.ndarray  # uint32, ThreadInfo.index
    kind: np.ndarray  # uint8, fmt.* event kinds
    name: np.ndarray  # uint32, index into ProcessTrace.strings (0: none)

    def __len__(self) -> int:
        return len(self.time_ns)

    def take(self, index: np.ndarray) -> Events:
        return Events(self.time_ns[index], self.thread[index], self.kind[index],
                      self.name[index])


@dataclass
class Progress:
    time_ns: np.ndarray
    thread: np.ndarray
    timesteps: np.ndarray
    total_timesteps: np.ndarray  # -1: unknown


@dataclass
class ProcessTrace:
    path: Path
    header: Header
    events: Events
    strings: list[str]  # by id; strings[0] == ""
    threads: dict[int, ThreadInfo]
    progress: Progress
    metadata: dict[str, Any]
    dropped_events: int = 0
    chunks: int = 0
    warnings: list[str] = field(default_factory=list)
    # Filled from the CUDA collector's file of the same process (source "cuda").
    api_calls: CudaApiCalls = field(default_factory=CudaApiCalls.empty)
    gpu: GpuActivities = field(default_factory=GpuActivities.empty)
    # The CUDA file's own details (clock offset, external correlations, CUPTI overhead
    # records, drop counts); None when the process has no CUDA file.
    cuda: CudaInfo | None = None

    @property
    def pid(self) -> int:
        return self.header.pid

    @property
    def complete(self) -> bool:
        """Whether recording stopped cleanly (False after a crash or kill)."""
        return bool(np.any(self.events.kind == fmt.PROCESS_END))

    def name_of(self, sid: int) -> str:
        return self.strings[sid] if 0 <= sid < len(self.strings) else f"<string {sid}>"


@dataclass
class Trace:
    directory: Path
    run: dict[str, Any]  # run.json written by rls-prof ({} when absent)
    processes: list[ProcessTrace]

    @property
    def warnings(self) -> list[str]:
        return [w for p in self.processes for w in p.warnings]


def trace_files(directory: str | os.PathLike[str]) -> tuple[Path, dict[str, Any], list[Path]]:
    """The directory, its run.json and its trace files (same errors as read_trace)."""
    d = Path(directory)
    if not d.exists():
        raise TraceError(f"trace directory {d} does not exist; pass the directory given "
                         "to rls-prof -o")
    if not d.is_dir():
        raise TraceError(f"{d} is not a directory; pass the directory given to rls-prof -o")
    run: dict[str, Any] = {}
    run_path = d / RUN_FILE
    if run_path.exists():
        try:
            run = json.loads(run_path.read_text())
        except (OSError, ValueError) as e:
            raise TraceError(f"{run_path} is not valid JSON ({e}); the run metadata is "
                             "corrupt") from None
    files = sorted(d.glob("*" + fmt.FILE_SUFFIX))
    if not files:
        raise TraceError(f"no rlscope trace files (*{fmt.FILE_SUFFIX}) in {d}; record one "
                         f"with: rls-prof -o {d} -- python your_script.py")
    return d, run, files


def read_trace(directory: str | os.PathLike[str]) -> Trace:
    """Read every process's trace file in ``directory``."""
    d, run, files = trace_files(directory)
    processes = [read_process(f) for f in files]
    processes = merge_cuda(processes)  # cuda.<pid> files join python.<pid> ones
    versions = {p.header.format_version for p in processes}
    if len(versions) > 1:
        raise TraceError(f"{d} mixes trace format versions {sorted(versions)}; analyse the "
                         "files of one rlscope version at a time")
    processes.sort(key=lambda p: (p.header.clock.monotonic_ns, p.pid))
    return Trace(d, run, processes)


_MAX_RECORD = 1 << 30  # far above any chunk a writer produces


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int] | None:
    """(value, next position), or None if the buffer ends inside the varint; raises
    ValueError for a varint longer than 10 bytes (not written by any writer)."""
    result = shift = 0
    while pos < end:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("overlong varint")
    return None


def iter_records(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """(offset, Record) of every intact record of a trace file, header first.

    The file is memory-mapped, so memory stays bounded by one record. A torn last record
    (the writer was killed) ends the iteration with ``(offset, None)``; a foreign or
    damaged file raises :class:`TraceError` with one line.
    """
    from rlscope.trace import messages  # imports protobuf; only reading needs it

    p = Path(path)
    try:
        f = open(p, "rb")  # noqa: SIM115 (closed by the with below)
    except OSError as e:
        raise TraceError(f"cannot read {p}: {e.strerror}") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if size < len(fmt.MAGIC):
            head = f.read()
            if fmt.MAGIC.startswith(head):
                raise TraceError(f"{p} is empty or truncated before its header; the process "
                                 "died as it started, delete the file")
            raise TraceError(f"{p} is not an rlscope trace (unknown file signature); "
                             "remove it from the trace directory")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            data = memoryview(m)
            try:
                if bytes(data[:len(fmt.MAGIC)]) != fmt.MAGIC:
                    raise TraceError(f"{p} is not an rlscope trace (unknown file "
                                     "signature); remove it from the trace directory")
                pos = len(fmt.MAGIC)
                while pos < size:
                    try:
                        got = _varint(m, pos, size)
                        if got is not None and got[0] > _MAX_RECORD:
                            raise ValueError("record too large")
                    except ValueError:
                        raise TraceError(f"{p} is corrupt: bad record length at offset "
                                         f"{pos}; the file was modified or damaged") from None
                    if got is None or got[1] + got[0] > size:
                        yield pos, None
                        return
                    n, start = got
                    try:
                        rec = messages.parse_record(data[start:start + n])
                    except Exception:
                        if start + n == size:
                            yield start, None
                            return
                        raise TraceError(f"{p} is corrupt: record at offset {start} does "
                                         "not parse; the file was modified or damaged"
                                         ) from None
                    yield start, rec
                    pos = start + n
            finally:
                data.release()


def torn_warning(path: Path, offset: int) -> str:
    return (f"{path.name}: last record is torn (at offset {offset}, the process was "
            "probably killed); skipped it")


def header_of(path: Path, rec: Any) -> Header:
    """The Header of a file's first record; checks it is one and its format version."""
    if rec is None or not rec.HasField("header"):
        raise TraceError(f"{path} has no header record; the file is truncated or not an "
                         "rlscope trace")
    h = rec.header
    if h.format_version != fmt.FORMAT_VERSION:
        raise TraceError(f"{path} has trace format version {h.format_version}, this rlscope "
                         f"reads version {fmt.FORMAT_VERSION}; use the matching rlscope")
    return Header(h.format_version, h.source, h.pid, h.ppid, h.host, h.process_name,
                  tuple(h.argv), fmt.ClockPair(h.clock.monotonic_ns, h.clock.realtime_ns,
                                               h.clock.uncertainty_ns),
                  h.recorder, h.rlscope_version)


def read_process(path: str | os.PathLike[str]) -> ProcessTrace:
    """Read one process's trace file."""
    p = Path(path)
    warnings: list[str] = []
    records: list[Any] = []
    for offset, rec in iter_records(p):
        if rec is None:
            warnings.append(torn_warning(p, offset))
            break
        records.append(rec)
    header = header_of(p, records[0] if records else None)
    h = records[0].header
    if h.source == SOURCE_CUDA:
        return _cuda_process(p, header, h, records[1:], warnings)
    return _assemble(p, header, records[1:], warnings)


def _cuda_process(path: Path, header: Header, h: Any, records: list[Any],
                  warnings: list[str]) -> ProcessTrace:
    """A CUDA collector file as a process of its own (no Python events); read_trace
    merges it into the Python file of the same process."""
    api, gpu, info = read_cuda_records(path, header, h, records, warnings)
    empty = Events(np.zeros(0, np.int64), np.zeros(0, np.uint32), np.zeros(0, np.uint8),
                   np.zeros(0, np.uint32))
    z = np.zeros(0, np.int64)
    return ProcessTrace(path, header, empty, [""], dict(info.threads), Progress(z, z, z, z), {},
                        0, info.chunks, warnings, api_calls=api, gpu=gpu, cuda=info)


def add_definitions(c: Any, strings: dict[int, str], threads: dict[int, ThreadInfo],
                    metadata: dict[str, Any]) -> int:
    """Take a chunk's string, thread and metadata definitions; returns its dropped count."""
    for s in c.strings:
        strings[s.id] = s.value
    for t in c.threads:
        threads[t.index] = ThreadInfo(t.index, t.tid, t.name)
    for m in c.metadata:
        try:
            metadata[m.key] = json.loads(m.json_value)
        except ValueError:
            metadata[m.key] = m.json_value
    return int(c.dropped_events)


def _assemble(path: Path, header: Header, records: list[Any],
              warnings: list[str]) -> ProcessTrace:
    strings: dict[int, str] = {0: ""}
    threads: dict[int, ThreadInfo] = {}
    metadata: dict[str, Any] = {}
    times, thread_cols, kinds, names, args = [], [], [], [], []
    dropped = 0
    expected_seq = 0
    for rec in records:
        if not rec.HasField("chunk"):
            raise TraceError(f"{path} is corrupt: a second header in the middle of the file")
        c = rec.chunk
        if c.sequence != expected_seq:
            warnings.append(f"{path.name}: chunk {expected_seq} is missing (found "
                            f"{c.sequence}); events were lost")
        expected_seq = c.sequence + 1
        dropped += add_definitions(c, strings, threads, metadata)
        n = len(c.kind)
        if len(c.time_delta_ns) != n or len(c.thread) != n or len(c.name) != n:
            raise TraceError(f"{path} is corrupt: chunk {c.sequence} has columns of "
                             "different lengths")
        if n:
            deltas = np.array(c.time_delta_ns, dtype=np.int64)
            deltas[0] += c.base_time_ns
            times.append(np.cumsum(deltas))
            thread_cols.append(np.array(c.thread, dtype=np.uint32))
            kinds.append(np.array(c.kind, dtype=np.uint8))
            names.append(np.array(c.name, dtype=np.uint32))
            args.append(np.array(c.args, dtype=np.int64))
    if dropped:
        warnings.append(f"{path.name}: {dropped} events were dropped because the recorder's "
                        "memory bound was reached; raise it or flush more often")
    events = Events(_cat(times, np.int64), _cat(thread_cols, np.uint32),
                    _cat(kinds, np.uint8), _cat(names, np.uint32))
    n_strings = max(strings) + 1
    string_list = [strings.get(i, f"<string {i}>") for i in range(n_strings)]
    if len(events) and int(events.name.max()) >= n_strings:
        raise TraceError(f"{path} is corrupt: an event names an undefined string")
    prog_idx = np.flatnonzero(events.kind == fmt.PROGRESS)
    all_args = _cat(args, np.int64)
    if len(all_args) != 2 * len(prog_idx):
        raise TraceError(f"{path} is corrupt: {len(all_args)} event arguments for "
                         f"{len(prog_idx)} progress events")
    progress = Progress(events.time_ns[prog_idx], events.thread[prog_idx],
                        all_args[0::2].copy(), all_args[1::2].copy())
    return ProcessTrace(path, header, events, string_list, threads, progress, metadata,
                        dropped, expected_seq, warnings)


def _cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)
