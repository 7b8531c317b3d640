"""The data types a trace is read into: one ``ProcessTrace`` per process, with columnar
numpy arrays. Shared by the readers (``reader``, ``cuda_reader``), synthetic traces and
the analysis; this module reads nothing itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlscope.trace import format as fmt
from rlscope.trace.gpu import CudaApiCalls, GpuActivities
from rlscope.trace.samples import Samples


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

    @staticmethod
    def empty() -> Events:
        z = np.zeros(0, np.int64)
        return Events(z, z.astype(np.uint32), z.astype(np.uint8), z.astype(np.uint32))

    @staticmethod
    def concat(parts: list[Events]) -> Events:
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return Events.empty()
        return Events(np.concatenate([p.time_ns for p in parts]),
                      np.concatenate([p.thread for p in parts]),
                      np.concatenate([p.kind for p in parts]),
                      np.concatenate([p.name for p in parts]))


@dataclass
class Progress:
    time_ns: np.ndarray
    thread: np.ndarray
    timesteps: np.ndarray
    total_timesteps: np.ndarray  # -1: unknown

    @staticmethod
    def empty() -> Progress:
        z = np.zeros(0, np.int64)
        return Progress(z, z.astype(np.uint32), z, z)

    @staticmethod
    def concat(parts: list[Progress]) -> Progress:
        if not parts:
            return Progress.empty()
        return Progress(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                          ("time_ns", "thread", "timesteps", "total_timesteps")))


@dataclass
class EnvEvents:
    """The ENV_STEP/ENV_RESET begin and end events of a process (vector envs), with the env
    index each begin carries (-1 on ends), in file order."""

    time_ns: np.ndarray  # int64
    thread: np.ndarray  # uint32
    kind: np.ndarray  # uint8 fmt.ENV_*
    name: np.ndarray  # uint32 (the env's id)
    index: np.ndarray  # int64 env index of a begin, -1 on an end

    def __len__(self) -> int:
        return len(self.time_ns)

    @staticmethod
    def empty() -> EnvEvents:
        z = np.zeros(0, np.int64)
        return EnvEvents(z, z.astype(np.uint32), z.astype(np.uint8), z.astype(np.uint32), z)

    @staticmethod
    def concat(parts: list[EnvEvents]) -> EnvEvents:
        if not parts:
            return EnvEvents.empty()
        return EnvEvents(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                           ("time_ns", "thread", "kind", "name", "index")))


@dataclass
class Aggregates:
    """A bounded trace's aggregate rows (docs/trace-format.md, "Bounded traces"): per
    (thread, gap, state) the time in the state, the calls entering it and the events
    after which the thread was in it; per (thread, gap, kind) the events aggregated."""

    states: dict[int, tuple[int, int, int]]  # id -> (parent, BEGIN kind, name); 0: empty
    thread: np.ndarray  # uint32
    gap: np.ndarray  # uint32: the thread's k-th AGGREGATED_BEGIN
    state: np.ndarray  # uint32
    ns: np.ndarray  # int64
    calls: np.ndarray  # int64
    events: np.ndarray  # int64
    count_thread: np.ndarray
    count_gap: np.ndarray
    count_kind: np.ndarray
    count_n: np.ndarray  # int64
    # Per row: the time (ns) up to which it was charged when written (every 5 s and at
    # the gap's end); zeros in files written before the field.
    until_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def __len__(self) -> int:
        return len(self.thread) + len(self.count_thread)

    @staticmethod
    def empty() -> Aggregates:
        z = np.zeros(0, np.int64)
        return Aggregates({}, z, z, z, z, z, z, z, z, z, z, z)

    @staticmethod
    def concat(parts: list[Aggregates]) -> Aggregates:
        if not parts:
            return Aggregates.empty()
        states: dict[int, tuple[int, int, int]] = {}
        for a in parts:
            states.update(a.states)
        cols = [np.concatenate([getattr(a, f) for a in parts]) for f in _AGG_COLUMNS]
        return Aggregates(states, *cols)

    def kind_counts(self) -> np.ndarray:
        """Events per kind over every gap (int64[256])."""
        out = np.zeros(256, np.int64)
        np.add.at(out, self.count_kind.astype(np.int64), self.count_n)
        return out


_AGG_COLUMNS = ("thread", "gap", "state", "ns", "calls", "events", "count_thread",
                "count_gap", "count_kind", "count_n", "until_ns")


@dataclass
class ExternalCorrelations:
    """CUPTI external correlation records: ``external_id`` was pushed (e.g. per operation)
    around the API call with ``correlation_id``."""

    kind: np.ndarray  # uint32 CUpti_ExternalCorrelationKind
    external_id: np.ndarray  # uint64
    correlation_id: np.ndarray  # uint64


@dataclass
class CuptiOverhead:
    """CUPTI's own overhead records (buffer flushes, instrumentation, ...)."""

    kind: np.ndarray  # uint32 CUpti_ActivityOverheadKind
    object_id: np.ndarray  # uint64 thread id (or device id)
    start_ns: np.ndarray  # int64
    end_ns: np.ndarray  # int64


@dataclass
class CudaInfo:
    """What the CUDA collector's file says beyond the two tables."""

    path: Path
    header: Header
    cupti_offset_ns: int  # monotonic = cupti time + offset
    cupti_offset_error_ns: int  # bound of the conversion error
    cupti_version: int
    threads: dict[int, ThreadInfo]
    external: ExternalCorrelations
    overhead: CuptiOverhead
    dropped_api_calls: int = 0
    dropped_activity_records: int = 0
    invalid_activity_records: int = 0
    chunks: int = 0
    warnings: list[str] = field(default_factory=list)


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
    env: EnvEvents = field(default_factory=EnvEvents.empty)  # vector env steps and resets
    # Filled from the CUDA collector's file of the same process (source "cuda").
    api_calls: CudaApiCalls = field(default_factory=CudaApiCalls.empty)
    gpu: GpuActivities = field(default_factory=GpuActivities.empty)
    # The CUDA file's own details (clock offset, external correlations, CUPTI overhead
    # records, drop counts); None when the process has no CUDA file.
    cuda: CudaInfo | None = None
    torn_bytes: int = 0  # size of a torn last record (the process was killed): lost
    # A bounded trace's aggregates of the stretches outside detail windows (empty when
    # every event was kept: --trace-budget none, or a file written before budgets).
    aggregates: Aggregates = field(default_factory=Aggregates.empty)
    # The times of its Python stack samples (pystacks.<pid>.rlstacks, CLOCK_MONOTONIC):
    # set by rlscope.analysis.overhead.applied for the correction (None: not read).
    py_samples: np.ndarray | None = None

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
    samples: Samples | None = None  # rls-prof's utilisation samples (None: not sampled)

    @property
    def warnings(self) -> list[str]:
        return [w for p in self.processes for w in p.warnings] + (
            self.samples.warnings if self.samples is not None else [])
