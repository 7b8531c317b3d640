"""What the sweep takes before the events (:class:`ProcessInfo`: span, the main thread's
phases) and what it gives (:class:`ProcessResult`: a process's aggregated rows)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rlscope.analysis.engine.compiles import Compile
from rlscope.analysis.engine.paths import NameTable
from rlscope.analysis.engine.startup import first_user_time
from rlscope.analysis.engine.summary import ProcessSpan
from rlscope.analysis.engine.threadstate import phase_changes
from rlscope.trace import format as fmt
from rlscope.trace.data import Events


@dataclass
class ThreadInfoOut:
    index: int
    tid: int
    name: str
    main: bool
    events: int


@dataclass
class ProcessResult:
    """Aggregated results of one process; the data API turns these into DataFrames."""

    pid: int
    process: str
    span: tuple[int, int]
    threads: list[ThreadInfoOut]
    # Breakdown rows: thread, phase, path, category, region -> ns (float64 sums).
    thread: np.ndarray
    phase: np.ndarray
    path: np.ndarray
    category: np.ndarray
    region: np.ndarray
    ns: np.ndarray
    # Counts: (thread, phase, path, what) -> n; what = -1 for operation calls, else a
    # category (transitions into the backend, simulator, CUDA API).
    count_rows: np.ndarray  # int64 [k, 4]
    count_n: np.ndarray
    # GPU activity per launching operation: thread, phase, path, category, stream, n, ns.
    gpu_rows: np.ndarray  # int64 [k, 7]
    regions_ns: np.ndarray  # int64 [N_REGIONS]: process-wide partition, instants once
    covered_ns: int
    warnings: list[str] = field(default_factory=list)
    # The main thread's phase changes (times, phase ids: the phase from that time on).
    phase_times: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    phase_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    # CPU time by rlscope's categories (threads active, not waiting), summed over threads,
    # per timebins.BIN_NS bin from span[0]: the "over time" view of the breakdown.
    cpu_bins: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # Start-up (docs/analysis.md#start-up): its length (0: none), the time its imports
    # cover, and each timed import in it (module, ns, clipped to the start-up).
    startup_ns: int = 0
    imports_ns: int = 0
    imports: list[tuple[str, int]] = field(default_factory=list)
    # First begin of each operation path, and first time each phase was innermost.
    first_ns: dict[int, int] = field(default_factory=dict)
    phase_first_ns: dict[int, int] = field(default_factory=dict)
    # JIT compilations with the thread, phase and operation they happened in.
    compiles: list[Compile] = field(default_factory=list)
    # The first calls of each operation (engine.firstcalls): thread, phase, path, begin_ns,
    # duration_ns (inclusive) per row, at most firstcalls.KEEP per (thread, phase, path).
    first_calls: np.ndarray = field(default_factory=lambda: np.zeros((0, 5), np.int64))
    # Trends (engine.trendbins): the buckets' edges (ns) and timesteps at the edges (empty:
    # time-based buckets); self ns per (bucket, phase, path, category), summed over
    # threads; operation calls per (bucket, phase, path) by begin time.
    trend_edges: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    trend_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    trend_rows: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), np.int64))
    trend_ns: np.ndarray = field(default_factory=lambda: np.zeros(0))
    trend_call_rows: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int64))
    trend_call_n: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    calls: list[NamedCall] = field(default_factory=list)


@dataclass(frozen=True)
class NamedCall:
    """One named backend/simulator call (its wrapper's name) within a phase and an
    operation path: outermost calls and the CPU time in that category inside them."""

    category: int
    phase: int
    path: int
    name: str
    calls: int
    ns: float


@dataclass
class ProcessInfo:
    """What the analysis needs before it sees the events: the recorded span, the main
    thread's phase changes (threads without phases inherit them), and which threads have
    phases of their own. One cheap pass over the events gives it (see stream.py)."""

    span: ProcessSpan
    main_phase_times: np.ndarray
    main_phase_ids: np.ndarray
    phase_threads: set[int]
    first_user_ns: int | None = None  # the first user event (startup.USER_KINDS)


def process_info(ev: Events, strings: list[str], phases: NameTable,
                 span: ProcessSpan | None = None) -> ProcessInfo:
    """ProcessInfo from a process's events (or only its phase and process events)."""
    span = span or (_span(ev) if len(ev) else ProcessSpan(0, 0, -1))
    sel = np.flatnonzero((ev.kind == fmt.PHASE_BEGIN) | (ev.kind == fmt.PHASE_END))
    mine = sel[ev.thread[sel] == span.main_thread]
    mine = mine[np.argsort(ev.time_ns[mine], kind="stable")]
    _, times, ids, _ = phase_changes(ev.time_ns[mine], ev.kind[mine], ev.name[mine], strings,
                                     phases)
    return ProcessInfo(span, times, ids, set(np.unique(ev.thread[sel]).tolist()),
                       first_user_time(ev.time_ns, ev.kind))


def _span(ev: Events) -> ProcessSpan:
    from rlscope.analysis.engine.summary import process_span

    class _P:  # process_span only reads .events
        events = ev

    return process_span(_P)  # type: ignore[arg-type]
