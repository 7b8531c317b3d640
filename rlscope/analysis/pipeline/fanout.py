"""Analysis that scales out: one task per process (its Python trace file and its CUDA
collector file), run in local processes or on Ray, merged into exactly what the serial
analysis gives (docs/analysis.md#parallel-analysis).

A process is the natural unit: the sweep (overlap.ProcessAnalyzer) and the overhead
correction (correct_process) only ever look at one process's events. What processes share
is the interning of operation paths and phase names (analysis.paths). Each task interns
into tables of its own; the merge re-interns every task's names into one table in the
order the serial analysis would have met them (phases seen by the first pass over the
files, in file order; then paths and phases as the processes are analysed, in run
order), renumbers the task's rows and sorts them as the serial aggregation does. The
sums themselves are computed in the same order as in the serial analysis, so the numbers
are bit for bit the same. The one run-wide input of the correction, the run's speed
(from the root process's progress times), is computed before the tasks start.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from rlscope.analysis import inferred
from rlscope.analysis.engine.overlap import analyze_process
from rlscope.analysis.engine.paths import FIRST_OPERATION_ID, NameTable, PathTable
from rlscope.analysis.engine.process import ProcessResult, process_info
from rlscope.analysis.lockstep import from_trace
from rlscope.analysis.overhead.correction import (
    Replies,
    correct_holder,
    correct_process,
    serves_others,
    waits_on_workers,
    worker_replies,
)
from rlscope.analysis.pipeline.stream import DEFAULT_BATCH, ScannedProcess, scan, sweep
from rlscope.analysis.processes.utilisation import gpu_truth
from rlscope.errors import RLScopeError
from rlscope.trace import format as fmt
from rlscope.trace.clocks import RunClock
from rlscope.trace.cuda_reader import SOURCE as SOURCE_CUDA
from rlscope.trace.cuda_reader import merge_cuda, read_cuda_process
from rlscope.trace.data import Header, Progress, Trace
from rlscope.trace.reader import read_process
from rlscope.trace.records import read_header

# Below this much trace data the default analysis stays serial: starting worker processes
# costs more than it saves. --jobs N always fans out.
MIN_PARALLEL_BYTES = 16 << 20


@dataclass(frozen=True)
class Unit:
    """One process of the run: its Python trace file and its CUDA collector file."""

    python: Path | None
    cuda: Path | None
    header: Header  # the Python file's (the CUDA file's for a CUDA-only process)

    @property
    def bytes(self) -> int:
        return sum(os.path.getsize(p) for p in (self.python, self.cuda) if p is not None)


@dataclass(frozen=True)
class Options:
    """What every task is told: how to read (streaming, or whole with the correction's
    costs), the batch size and the inference mode."""

    batch_events: int | None  # None: a process's events in one batch (read whole)
    infer: str
    costs: dict[str, Any] | None = None  # overhead correction: KindCost per kind
    lockstep: bool = False  # also the lock-step analysis's input of the process
    # With costs: every process of the run. A process that waits on vector-env workers or
    # pool tasks reads and corrects theirs too, one at a time (correction.correct_holder),
    # as the serial analysis does.
    siblings: tuple[Unit, ...] = ()


@dataclass
class UnitOut:
    """A task's result: the process's result with ids into the task's own tables, what
    the data API keeps of the process, and the task's tables."""

    result: ProcessResult
    header: Header
    complete: bool
    events: int
    metadata: dict[str, Any]
    progress: Progress
    torn_bytes: int
    file: str
    warnings: list[str]
    path_parent: list[int]
    path_name: list[str]
    phase_names: list[str]
    scan_phases: int  # phases interned by the first pass (streaming), the rest later
    correction: Any = None  # overhead.correction.ProcessCorrection
    bytes: int = 0
    gpu_truth: Any = None  # utilisation.GpuTruth (phase ids of the task's table)
    lockstep: Any = None  # lockstep.ProcessEvents (string ids of its own file)


@dataclass
class Merged:
    results: list[ProcessResult]
    outs: list[UnitOut]  # in run order, as results
    paths: PathTable
    phases: NameTable
    corrections: list[Any] = field(default_factory=list)


def units(d: Path, run: dict[str, Any], files: list[Path]) -> tuple[list[Unit], list[int]]:
    """The run's processes (Python files in file order, then CUDA files with no Python
    file) and the order the serial analysis takes them in (start on the run clock, then
    pid); ``files`` as trace_files gives them. Reads only headers."""
    files = [Path(os.path.abspath(f)) for f in files]  # Ray workers run elsewhere
    py: list[Unit] = []
    cuda: list[tuple[Path, Header]] = []
    for f in files:
        h, _ = read_header(f)
        if h.source == SOURCE_CUDA:
            cuda.append((f, h))
        else:
            py.append(Unit(f, None, h))
    units = list(py)
    taken: set[int] = set()
    for f, h in cuda:  # as trace.cuda_reader.merge_cuda pairs them
        cands = [i for i, u in enumerate(py) if u.header.pid == h.pid
                 and u.header.host == h.host and i not in taken]
        if not cands:
            units.append(Unit(None, f, h))
            continue
        start = h.clock.monotonic_ns
        before = [i for i in cands if py[i].header.clock.monotonic_ns <= start]
        i = (max(before, key=lambda i: py[i].header.clock.monotonic_ns) if before
             else min(cands, key=lambda i: py[i].header.clock.monotonic_ns))
        taken.add(i)
        units[i] = Unit(py[i].python, f, py[i].header)
    clock = RunClock.of(run, [u.header for u in units])
    order = sorted(range(len(units)),
                   key=lambda i: (clock.start(units[i].header), units[i].header.pid))
    return units, order


def analyze_unit(unit: Unit, opts: Options) -> UnitOut:
    """The task: read, (correct,) and analyse one process with tables of its own."""
    paths, phases = PathTable(), NameTable()
    if opts.costs is None:
        return _streamed(unit, opts, paths, phases)
    return _whole(unit, opts, paths, phases)


def _streamed(unit: Unit, opts: Options, paths: PathTable, phases: NameTable) -> UnitOut:

    batch = opts.batch_events or DEFAULT_BATCH
    s = (scan(unit.python, unit.header, phases, opts.infer, opts.lockstep, batch)
         if unit.python else None)
    n_scan = len(phases.names)
    if unit.cuda is not None:
        h, raw = read_header(unit.cuda)
        c = read_cuda_process(unit.cuda, h, raw)
        if s is None:
            s = ScannedProcess(c, process_info(c.events, c.strings, phases), 0, False)
        else:
            merge_cuda([s.trace, c])
    assert s is not None
    r = sweep(s, paths, phases, None, batch)
    p = s.trace
    return UnitOut(r, p.header, s.complete, s.events, p.metadata, p.progress,
                   p.torn_bytes, p.path.name, list(p.warnings), paths.parent, paths.name,
                   phases.names, n_scan, bytes=unit.bytes, gpu_truth=_truth(p, r),
                   lockstep=s.lockstep)


def _whole(unit: Unit, opts: Options, paths: PathTable, phases: NameTable) -> UnitOut:

    p = _read(unit)
    assert opts.costs is not None
    p, corr = (correct_holder(p, _workers_of(unit, opts), opts.costs)
               if waits_on_workers(p) else correct_process(p, opts.costs))
    p = inferred.apply(p, opts.infer)
    r = analyze_process(p, paths, phases, None, opts.batch_events)
    steps = (from_trace(Trace(p.path.parent, {}, [p]), "off")[0]
             if opts.lockstep and unit.python is not None else None)
    return UnitOut(r, p.header, p.complete, len(p.events), p.metadata, p.progress,
                   p.torn_bytes, p.path.name, list(p.warnings), paths.parent, paths.name,
                   phases.names, 1, corr, unit.bytes, _truth(p, r), steps)


def _read(unit: Unit) -> Any:
    return merge_cuda([read_process(f) for f in (unit.python, unit.cuda) if f is not None])[0]


def _workers_of(unit: Unit, opts: Options) -> list[Replies]:
    """The replies of the other processes that serve a vector env or ran pool tasks
    (correct_holder keeps those for ``unit``). Each is read, corrected and reduced to its
    replies in turn, so one worker's trace at a time is held; a file without the keys
    that announce a worker in its bytes is not read."""
    costs = opts.costs
    assert costs is not None
    out: list[Replies] = []
    for u in opts.siblings:
        if u == unit or not _may_serve(u):
            continue
        w = _read(u)
        if serves_others(w):
            out += worker_replies(w, correct_process(w, costs)[0], costs)
    return out


def _may_serve(unit: Unit) -> bool:
    """Whether ``unit``'s trace may announce that it serves a vector env or ran pool
    tasks: a metadata key is in its bytes (found without decoding the file)."""
    if unit.python is None:
        return False
    try:
        with open(unit.python, "rb") as f, \
                mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return any(m.find(k) >= 0 for k in _WORKER_KEYS)
    except (OSError, ValueError):  # empty: nothing announced; unreadable: its task says so
        return False


_WORKER_KEYS = (fmt.META_VECENV.encode(), fmt.META_TASK_PREFIX.encode())


def _truth(p: Any, r: ProcessResult) -> Any:
    """The GPU time CUPTI recorded, per phase and device (as the data API keeps it)."""
    if not len(p.gpu):
        return None

    return gpu_truth(p.gpu, r.span, r.phase_times, r.phase_ids, r.startup_ns)


# -- running the tasks -----------------------------------------------------------------
def workers(jobs: int | None, units: Sequence[Unit]) -> int:
    """How many local processes: ``jobs`` when given (at most one per process), else one
    per CPU when there is enough to analyse, else 1 (serial)."""
    if jobs is not None:
        return max(1, min(jobs, len(units)))
    if len(units) < 2 or sum(u.bytes for u in units) < MIN_PARALLEL_BYTES:
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, len(units)))


def run_local(units: Sequence[Unit], opts: Options, n: int,
              done: Callable[[int], None] | None = None) -> Iterator[tuple[int, UnitOut]]:
    """(index, result) of every unit as it completes, on ``n`` local processes."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # fork: the workers start at once with the analysis already imported.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context(method)) as pool:
        futures = {pool.submit(analyze_unit, u, opts): i for i, u in enumerate(units)}
        for f in as_completed(futures):
            out = f.result()  # a task's RLScopeError arrives as itself (one line)
            if done:
                done(out.bytes)
            yield futures[f], out


def run_ray(units: Sequence[Unit], opts: Options, address: str | None,
            done: Callable[[int], None] | None = None) -> Iterator[tuple[int, UnitOut]]:
    """(index, result) of every unit as it completes, one Ray task each (1 CPU). Every
    node must see the trace files at the same path (a shared file system)."""
    try:
        import ray
    except ImportError:
        raise RLScopeError("--ray needs Ray: pip install 'rlscope[ray]' (or analyse on this "
                           "machine with --jobs N)") from None
    import logging

    started = not ray.is_initialized()
    if started:
        try:
            ray.init(address=address or None, include_dashboard=False,
                     logging_level=logging.WARNING, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as e:
            where = address or "a local cluster"
            raise RLScopeError(f"--ray: cannot connect to {where}: "
                               f"{str(e).splitlines()[0] if str(e) else type(e).__name__}"
                               "; start it (ray start --head) or pass its address") from None
    try:
        task = ray.remote(num_cpus=1)(analyze_unit)
        refs = {task.remote(u, opts): i for i, u in enumerate(units)}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            try:
                out = ray.get(ready[0])
            except ray.exceptions.RayTaskError as e:
                cause = getattr(e, "cause", None)
                if isinstance(cause, FileNotFoundError | RLScopeError) and \
                        "No such file" in str(cause):
                    raise RLScopeError(f"a Ray node cannot read the trace: {cause}; every "
                                       "node needs the run directory at the same path "
                                       "(a shared file system), or analyse with --jobs"
                                       ) from None
                if isinstance(cause, RLScopeError):
                    raise cause from None
                raise
            if done:
                done(out.bytes)
            yield refs[ready[0]], out
    finally:
        if started:
            ray.shutdown()


# -- merging ---------------------------------------------------------------------------
def merge(outs: Sequence[UnitOut], order: Sequence[int]) -> Merged:
    """One table of paths and phases for every task's result, numbered as the serial
    analysis numbers them; ``outs`` by unit (file order), ``order`` the run order."""
    paths, phases = PathTable(), NameTable()
    for o in outs:  # the first pass over the files: their phases, in file order
        for name in o.phase_names[1:o.scan_phases]:
            phases.intern(name)
    results = []
    for i in order:  # then each process's analysis, in run order
        o = outs[i]
        ph = np.array([phases.intern(n) for n in o.phase_names], np.int64)
        pa = np.arange(len(o.path_parent), dtype=np.int64)  # reserved ids stay
        for k in range(FIRST_OPERATION_ID, len(o.path_parent)):  # parents come first
            pa[k] = paths.intern(int(pa[o.path_parent[k]]) if o.path_parent[k] > 0 else 0,
                                 o.path_name[k])
        results.append(_renumbered(o.result, ph, pa))
        if o.gpu_truth is not None:
            o.gpu_truth.by_phase = {(int(ph[k]), d): v
                                    for (k, d), v in o.gpu_truth.by_phase.items()}
    ordered = [outs[i] for i in order]
    return Merged(results, ordered, paths, phases,
                  [o.correction for o in ordered if o.correction is not None])


def _first_calls(rows: np.ndarray, ph: np.ndarray, pa: np.ndarray) -> np.ndarray:
    out = rows.copy()
    if len(out):
        out[:, 1], out[:, 2] = ph[out[:, 1]], pa[out[:, 2]]
    return out


def _renumbered(r: ProcessResult, ph: np.ndarray, pa: np.ndarray) -> ProcessResult:
    """``r`` with global phase and path ids, rows sorted by their key columns as the
    aggregation sorts them (its sums do not depend on the numbering)."""
    phase, path = ph[r.phase], pa[r.path]
    o = np.lexsort((r.region, r.category, path, phase, r.thread))
    c = r.count_rows.copy()
    if len(c):
        c[:, 1], c[:, 2] = ph[c[:, 1]], pa[c[:, 2]]
    co = np.lexsort((c[:, 3], c[:, 2], c[:, 1], c[:, 0])) if len(c) else np.zeros(0, np.int64)
    g = r.gpu_rows.copy()
    if len(g):
        g[:, 1], g[:, 2] = ph[g[:, 1]], pa[g[:, 2]]
    go = (np.lexsort((g[:, 4], g[:, 3], g[:, 2], g[:, 1], g[:, 0])) if len(g)
          else np.zeros(0, np.int64))
    tr, tc = r.trend_rows.copy(), r.trend_call_rows.copy()
    for rows in (tr, tc):
        if len(rows):
            rows[:, 1], rows[:, 2] = ph[rows[:, 1]], pa[rows[:, 2]]
    to = np.lexsort((tr[:, 3], tr[:, 2], tr[:, 1], tr[:, 0])) if len(tr) else np.zeros(0, int)
    tco = np.lexsort((tc[:, 2], tc[:, 1], tc[:, 0])) if len(tc) else np.zeros(0, int)
    return replace(
        r, trend_rows=tr[to], trend_ns=r.trend_ns[to], trend_call_rows=tc[tco],
        trend_call_n=r.trend_call_n[tco], thread=r.thread[o], phase=phase[o].astype(r.phase.dtype),
        path=path[o].astype(r.path.dtype), category=r.category[o], region=r.region[o],
        ns=r.ns[o], count_rows=c[co], count_n=r.count_n[co], gpu_rows=g[go],
        phase_ids=ph[r.phase_ids].astype(r.phase_ids.dtype),
        first_ns={int(pa[k]): v for k, v in r.first_ns.items()},
        phase_first_ns={int(ph[k]): v for k, v in r.phase_first_ns.items()},
        compiles=[replace(c, phase=int(ph[c.phase]), path=int(pa[c.path]))
                  for c in r.compiles],
        first_calls=_first_calls(r.first_calls, ph, pa))
