"""The data API: :class:`Analysis`, every table a reporter uses, as pandas DataFrames,
from the analysed processes (rlscope.analysis.pipeline builds it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rlscope.analysis import compile_rows as comprows
from rlscope.analysis import operation_rows as oprows
from rlscope.analysis import progress_rows as progrows
from rlscope.analysis import trends
from rlscope.analysis import warmup as warm
from rlscope.analysis.engine import categories as C
from rlscope.analysis.engine.compiles import is_compile_key
from rlscope.analysis.engine.paths import (
    STARTUP,
    STARTUP_ID,
    STARTUP_IMPORTS_ID,
    UNANNOTATED,
    NameTable,
    PathTable,
)
from rlscope.analysis.engine.process import ProcessResult
from rlscope.analysis.engine.startup import without_imports
from rlscope.analysis.processes import runsummary as multiprocess
from rlscope.analysis.processes import tasks as pool_tasks
from rlscope.analysis.processes.utilisation import GpuTruth, contrast, contrast_frame, over_time
from rlscope.analysis.progress_rows import progress_unit
from rlscope.trace import format as fmt
from rlscope.trace.clocks import RunClock
from rlscope.trace.data import Header, Progress
from rlscope.trace.samples import Samples

# "session" (docs/rls-analyze.md) comes last in every table: columns added later go at
# the end, so CSV readers keep their positions.
BREAKDOWN_KEYS = ("pid", "process", "thread", "phase", "operation", "category", "region",
                  "session")


@dataclass
class ProcessMeta:
    pid: int
    ppid: int
    process: str
    recorder: str
    complete: bool
    events: int
    metadata: dict[str, Any]
    progress: Progress
    header: Header | None = None
    session: int = 0  # see assign_sessions
    torn_bytes: int = 0  # a torn last record: lost
    file: str = ""  # the trace file's name
    gpu_truth: GpuTruth | None = None  # the process's CUPTI GPU time, reduced


def assign_sessions(pids: Sequence[int]) -> list[int]:
    """The ``session`` of each process, given in start order: 0 for a pid's first trace
    file, 1, 2, ... for its later ones. (pid, session) is the key of a process in every
    table: a process that recorded several sessions (``rlscope.start`` after
    ``rlscope.stop``) has one file, and one row, per session; so has, rarely, a pid the
    system reused within the run (docs/rls-analyze.md)."""
    seen: dict[int, int] = {}
    out = []
    for pid in pids:
        out.append(seen.get(pid, 0))
        seen[pid] = out[-1] + 1
    return out


class Analysis:
    """Analysed trace. Every method returns a fresh pandas DataFrame."""

    def __init__(self, directory: str, run: dict[str, Any], results: list[ProcessResult],
                 metas: list[ProcessMeta], paths: PathTable, phases: NameTable,
                 warnings: list[str], samples: Samples | None = None) -> None:
        self.directory = directory
        self.samples = samples  # rls-prof's utilisation samples (None: not sampled)
        self.run = run
        self.results = results
        self._metas = metas
        for m, n in zip(metas, assign_sessions([m.pid for m in metas]), strict=True):
            m.session = n
        self._session = [m.session for m in metas]
        self.paths = paths
        self.phases = phases
        self.warnings = warnings
        self._path_names = np.array([paths.path(i) for i in range(len(paths))], object)
        self._phase_names = np.array(phases.names, object)
        self._process_table: pd.DataFrame | None = None
        self._names: list[str] | None = None

    # -- per process -------------------------------------------------------------------
    def processes(self) -> pd.DataFrame:
        """One row per process: recorded span, covered time and its region split, and the
        start-up (recording start to the first user event) with the imports in it."""
        rows = []
        for r, m, name in zip(self.results, self._metas, self.process_names(), strict=True):
            rows.append({
                "pid": r.pid, "ppid": m.ppid, "process": name, "recorder": m.recorder,
                "complete": m.complete, "events": m.events, "file": m.file,
                "torn_bytes": m.torn_bytes, "threads": len(r.threads),
                "metadata": {k: v for k, v in pool_tasks.without_tasks(
                    without_imports(m.metadata)).items()
                    if not trends.is_metric_key(k) and not is_compile_key(k)},
                "seconds": (r.span[1] - r.span[0]) / 1e9, "covered_s": r.covered_ns / 1e9,
                **{f"{oprows.column(n)}_s": r.regions_ns[i] / 1e9
                   for i, n in enumerate(C.REGION_NAMES)},
                "startup_s": r.startup_ns / 1e9, "imports_s": r.imports_ns / 1e9,
                "session": m.session,
            })
        return pd.DataFrame(rows)

    def imports(self) -> pd.DataFrame:
        """The timed imports of each process's start-up (outermost imports of the
        recording thread, ``import torch`` with everything it imports), slowest first."""
        rows = [{"pid": r.pid, "module": name, "seconds": ns / 1e9}
                for r in self.results for name, ns in r.imports]
        df = pd.DataFrame(rows, columns=["pid", "module", "seconds"])
        order = {r.pid: i for i, r in enumerate(self.results)}
        return (df.assign(_p=df["pid"].map(order))
                .sort_values(["_p", "seconds"], ascending=[True, False], kind="stable")
                .drop(columns="_p").reset_index(drop=True))

    def tasks(self) -> pd.DataFrame:
        """Pool and executor tasks (rlscope.integrations.pooltasks), one row each in
        start order: pid, function, call, index, begin_ns, end_ns, seconds (empty: none
        recorded). Per function and stragglers: rlscope.analysis.processes.tasks."""
        return pool_tasks.task_rows((m.pid, m.metadata) for m in self._metas)

    def threads(self) -> pd.DataFrame:
        return pd.DataFrame([{"pid": r.pid, "thread": t.index, "tid": t.tid, "name": t.name,
                              "main": t.main, "events": t.events, "session": n}
                             for r, n in zip(self.results, self._session, strict=True)
                             for t in r.threads])

    def breakdown(self, by: Sequence[str] = ("pid", "process", "phase", "operation",
                                             "category", "region", "session")
                  ) -> pd.DataFrame:
        """Seconds per group of (pid, process, thread, phase, operation, category, region,
        session).

        Without "thread" in ``by`` this is the process roll-up: the sum over threads.
        """
        unknown = set(by) - set(BREAKDOWN_KEYS)
        if unknown:
            raise ValueError(f"unknown breakdown keys {sorted(unknown)}")
        df = self._fine()
        return (df.groupby(list(by), sort=False, dropna=False)["seconds"].sum()
                .reset_index())

    def _fine(self) -> pd.DataFrame:
        frames = []
        for r, n, name in zip(self.results, self._session, self.process_names(), strict=True):
            frames.append(pd.DataFrame({
                "pid": r.pid, "process": name, "thread": r.thread, "session": n,
                "phase": self._phase_names[r.phase], "operation": self._path_names[r.path],
                "path_id": r.path,
                "category": np.array(C.CATEGORY_NAMES, object)[r.category],
                "region": np.array(C.REGION_NAMES, object)[r.region],
                "seconds": r.ns / 1e9}))
        if not frames:
            return pd.DataFrame(columns=[*BREAKDOWN_KEYS, "path_id", "seconds"])
        return pd.concat(frames, ignore_index=True)

    def _counts(self) -> pd.DataFrame:
        frames = []
        for r, n in zip(self.results, self._session, strict=True):
            c = r.count_rows
            frames.append(pd.DataFrame({"pid": r.pid, "session": n,
                                        "phase": self._phase_names[c[:, 1]],
                                        "path_id": c[:, 2], "what": c[:, 3],
                                        "n": r.count_n}))
        if not frames:
            return pd.DataFrame(columns=["pid", "session", "phase", "path_id", "what", "n"])
        return pd.concat(frames, ignore_index=True)

    # -- many processes (docs/multiprocess.md) ------------------------------------------
    def process_tree(self) -> pd.DataFrame:
        """One row per process in tree order (depth-first, siblings by start): pid, parent
        (``parent_index`` into :meth:`processes` rows, -1 when not traced), depth, role
        (``role_label`` with a vector-env worker's env index), a display name, start/end
        relative to the run, wall, busy, waiting, idle and operations seconds, and whether
        it is an idle helper (reports fold those)."""
        if self._process_table is None:
            entries = [multiprocess.ProcessEntry(_header(m), m.metadata, m.complete,
                                                 m.events, len(m.progress.time_ns),
                                                 m.session)
                       for m in self._metas]
            self._process_table = multiprocess.process_table(self.results, entries,
                                                             self.run, self.samples)
        return self._process_table.copy()

    def process_names(self) -> list[str]:
        """Each process's one name, in :meth:`processes` row order: the role-aware display
        name of :meth:`process_tree` (``subproc_vec_env._worker [ForkServerProcess-1]``,
        ``train.py --seed 1``), never the bare program name its trace header carries
        (``python -c``). Every table's ``process`` column, legend and title uses it."""
        if self._names is None:
            tree = self.process_tree()
            names = [m.process for m in self._metas]
            for i, name in zip(tree["index"], tree["name"], strict=True):
                names[int(i)] = str(name)
            self._names = names
        return list(self._names)

    def run_summary(self) -> pd.DataFrame:
        """Per role: processes, idle helpers, summed wall/busy/waiting/idle/operations
        seconds and the busy share; last, the whole run (``all processes``)."""
        return multiprocess.run_summary(self.process_tree())

    def role_operations(self) -> pd.DataFrame:
        """Top-level operations per role, summed over the role's processes."""
        return multiprocess.role_operations(self.results, self.process_tree(), self.paths)

    def clock(self) -> RunClock:
        """The run's clock: the hosts' CLOCK_MONOTONIC aligned by their clock pairs
        (docs/multiprocess.md#several-hosts)."""
        return RunClock.of(self.run, [_header(m) for m in self._metas])

    def hosts(self) -> pd.DataFrame:
        """One row per host, in order of first start: its processes (trace files),
        whether its clock is the run's (``reference``), the shift that put its times on
        the run's clock and the bound of that shift's error (seconds; not counting how
        far the hosts' realtime clocks disagree)."""
        clock = self.clock()
        rows = [{"host": h.host, "processes": h.files, "reference": h.reference,
                 "shift_s": h.shift_ns / 1e9, "error_bound_s": h.error_ns / 1e9,
                 "pair_uncertainty_s": h.uncertainty_ns / 1e9,
                 "offset_spread_s": h.spread_ns / 1e9} for h in clock.hosts.values()]
        return pd.DataFrame(rows, columns=HOST_COLUMNS)

    def run_wall_s(self) -> float:
        """The run's wall time (rls-prof's measurement, else first start to last end)."""
        return multiprocess.run_wall_s(self.process_tree(), self.run)

    # -- per operation -----------------------------------------------------------------
    def operations(self) -> pd.DataFrame:
        """One row per (process, phase, operation path), in time order (below), with:

        calls; wall_s (inclusive of nested operations) and self_s (exclusive), both
        summed over threads; the self time split by category (python_s, backend_s,
        simulator_s, cuda_api_s, waiting_s, gpu_s) and by region (cpu_only_s, gpu_only_s,
        cpu_gpu_s), each split summing to self_s; transitions (backend_calls,
        simulator_calls, cuda_api_calls) and intercepted waits (wait_calls) made directly
        in the operation; shares of the
        process's covered time.

        Rows: "(start-up)" (and its "imports") first; then the phases in the order they
        first began, the operations outside phases where their first one began; within
        each, operations depth-first, siblings in the order they first began, and
        "(unannotated)" last. Figures use the same order.
        """
        meta = {(r.pid, n): r for r, n in zip(self.results, self._session, strict=True)}
        wide = oprows.operation_table(self._fine(), self._counts(), self.paths, self.phases,
                                      meta, self.process_names(), self._path_names)
        wide = self._with_compiles(wide)
        return wide[OPERATION_COLUMNS].reset_index(drop=True)

    def compiles(self) -> pd.DataFrame:
        """JIT compilations (torch.compile, jax.jit, tf.function), one row per record in
        begin order: pid, session, process, thread, phase, operation (open on the
        compiling thread when it began), framework, function, kind (compile, trace,
        lower, cache hit, backward), counts (1: one compilation; 0: a stage of one),
        begin_ns, end_ns, seconds, the framework's reason for a recompile, graph breaks
        (docs/attribution.md#compile-time)."""
        return comprows.compile_rows(self.results, self._session, self.process_names(),
                                         self._path_names, self._phase_names)

    def warmup(self) -> pd.DataFrame:
        """Operations whose first calls were slower than their steady state, one row
        each (analysis.warmup: the rule, the columns); the extrapolation's rate starts
        after the last of them ended in each process."""
        ops = self.operations()
        wall = {(int(p), int(n), str(ph), str(op)): float(w) for p, n, ph, op, w in
                zip(ops["pid"], ops["session"], ops["phase"], ops["operation"],
                    ops["wall_s"], strict=True)}
        return warm.warmup_table(self.results, self._session, self.process_names(),
                                 self._path_names, self._phase_names, wall, self.compiles())

    def compile_verdicts(self) -> list[dict[str, Any]]:
        """A verdict per function an operation compiled again and again
        (comprows.RECOMPILES times or more): what varies and what to do."""
        return comprows.verdicts(self.compiles())

    def _with_compiles(self, wide: pd.DataFrame) -> pd.DataFrame:
        """compile_s (seconds compiling, part of self_s) and compiles per row."""
        per = comprows.per_operation(self.compiles())
        keys = ["pid", "session", "phase", "path_id"]
        wide = wide.merge(per.drop(columns="recompiles"), on=keys, how="left")
        wide["compile_s"] = wide["compile_s"].fillna(0.0).astype(np.float64)
        wide["compiles"] = wide["compiles"].fillna(0).astype(np.int64)
        return wide

    def gpu(self) -> pd.DataFrame:
        """GPU activity per launching operation: count and busy seconds per kind/stream
        (overlapping activities each count their own time)."""
        frames = []
        for r, n in zip(self.results, self._session, strict=True):
            g = r.gpu_rows
            if not len(g):
                continue
            frames.append(pd.DataFrame({
                "pid": r.pid, "thread": g[:, 0], "phase": self._phase_names[g[:, 1]],
                "operation": self._path_names[g[:, 2]],
                "category": np.array(C.CATEGORY_NAMES, object)[g[:, 3]], "stream": g[:, 4],
                "count": g[:, 5], "seconds": g[:, 6] / 1e9, "session": n}))
        cols = ["pid", "thread", "phase", "operation", "category", "stream", "count",
                "seconds", "session"]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)

    # -- sampled utilisation (docs/analysis.md#utilisation) ----------------------------
    def utilisation(self) -> pd.DataFrame:
        """Per process and phase: wall seconds; the process's CPU utilisation sampled by
        rls-prof (cpu_samples, sampled_cpu_pct: mean, % of one core; sampled_cpu_s) next
        to the time its threads spent in rlscope's CPU categories (rlscope_cpu_s,
        rlscope_cpu_pct: of the phase's wall time, summed over threads); and, for a
        process that ran GPU work, over the devices it used (gpu_devices): NVML's view
        (gpu_samples, sampled_gpu_busy_pct: share of samples with utilisation > 0,
        sampled_gpu_util_pct: mean utilisation) next to its GPU time in kernels and
        copies recorded by CUPTI (rlscope_gpu_s, rlscope_gpu_pct: of wall x devices);
        where the GPU has NVML GPM metrics (Hopper and later), the SMs' view (gpm_samples,
        sampled_sm_active_pct: mean share of time SMs were active, sampled_sm_occupancy_pct:
        mean occupancy; NaN without GPM). NVML's readings are device-wide (other processes
        on the GPU count too)."""

        b = self._fine()
        cpu_names = [C.CATEGORY_NAMES[c] for c in C.CPU_CATEGORIES if c != C.WAITING]
        b = b[b["category"].isin(cpu_names) & (b["region"] != C.REGION_NAMES[C.GPU_ONLY])]
        # The main thread's start-up is a row of its own (contrast's startup_ns).
        b = b.assign(phase=b["phase"].where(
            ~b["path_id"].isin([STARTUP_ID, STARTUP_IMPORTS_ID]), STARTUP))
        cpu = b.groupby(["pid", "session", "phase"])["seconds"].sum()
        by_process = {k: g.droplevel([0, 1]).to_dict()
                      for k, g in cpu.groupby(level=[0, 1], sort=False)}
        rows: list[dict[str, Any]] = []
        for r, m, n, name in zip(self.results, self._metas, self._session,
                                 self.process_names(), strict=True):
            rows += [dict(row, session=n) for row in contrast(
                r.pid, name, r.span, r.phase_times, r.phase_ids, self.phases.names,
                by_process.get((r.pid, n), {}), m.gpu_truth, self.samples, r.startup_ns)]
        return contrast_frame(rows)

    def utilisation_over_time(self) -> pd.DataFrame:
        """Sampled and rlscope series over time, one long table (time_s from the first
        process's start, series, pid, key, value): per process CPU % and RSS (sampled),
        CPU % in rlscope's categories (0.1 s bins), per core CPU %, per GPU NVML
        utilisation %, memory and SM clock, and each process's GPU busy % in kernels and
        copies (rlscope, 0.1 s bins). Series names: rlscope.analysis.processes.utilisation."""

        t0 = min((r.span[0] for r in self.results), default=0)
        return over_time(t0, self.samples, [(r.pid, r.span[0], r.span[1], r.cpu_bins,
                                             m.gpu_truth)
                                            for r, m in zip(self.results, self._metas,
                                                            strict=True)])

    # -- progress ----------------------------------------------------------------------
    def iterations(self) -> pd.DataFrame:
        """One row per progress record: time since recording start, timesteps, and the
        interval since the previous record (steps/s); ``unit``: what the process counts
        (``rlscope.report_progress(..., unit=)``: timesteps, episodes, ...)."""
        return progrows.iteration_table(
            (r.pid, r.span[0], m.progress, m.session, progress_unit(m.metadata))
            for r, m in zip(self.results, self._metas, strict=True))

    # -- trends (docs/analysis.md#trends) ---------------------------------------------
    def trend_intervals(self) -> pd.DataFrame:
        """Per process, its trend intervals over the whole run (progress reports, at most
        engine.trendbins.MAX_BUCKETS): time, timesteps, steps/s, position in the run."""
        return trends.interval_table(self.results, self._trend_keys(), self._t0())

    def trend_operations(self, intervals: pd.DataFrame | None = None) -> pd.DataFrame:
        """Per process, trend interval and operation: calls, wall/self seconds, share of
        the interval, ms per step, self time by category."""
        iv = self.trend_intervals() if intervals is None else intervals
        return trends.operation_table(self.results, self._trend_keys(), self.paths, iv)

    def metrics(self) -> pd.DataFrame:
        """The training metrics reported with progress (report_progress(metrics=...))."""
        return trends.metric_table(((m.pid, m.session, m.metadata) for m in self._metas),
                                   self._t0())

    def _trend_keys(self) -> list[trends.ProcessKey]:
        return [trends.ProcessKey(m.pid, m.session, name, progress_unit(m.metadata),
                                  m.header.host if m.header is not None else "")
                for m, name in zip(self._metas, self.process_names(), strict=True)]

    def _t0(self) -> int:
        return min((r.span[0] for r in self.results), default=0)

    def extrapolation(self) -> pd.DataFrame:
        """Estimated time of the full training run per process, from progress records:
        the rate between the first and last record, applied to the remaining timesteps.
        The rate leaves out the JIT compile time between those records (``compile_s``),
        and starts at the first record after the operations' warm-up (``steady_from_s``,
        seconds from the process's start; :meth:`warmup`) when two or more come after
        it: neither is the steady state the rest of the run goes at."""
        spans = {(r.pid, n): r.span for r, n in zip(self.results, self._session, strict=True)}
        return progrows.extrapolation_table(self.iterations(), self.compiles(),
                                            self.warmup(), spans)


def _header(m: ProcessMeta) -> Header:
    if m.header is not None:
        return m.header
    return Header(fmt.FORMAT_VERSION, "python", m.pid, m.ppid, "", m.process, (),
                  fmt.ClockPair(0, 0, 0), m.recorder, "")


OPERATION_COLUMNS = oprows.OPERATION_COLUMNS
UNANNOTATED_NAME = UNANNOTATED
HOST_COLUMNS = ["host", "processes", "reference", "shift_s", "error_bound_s",
                "pair_uncertainty_s", "offset_spread_s"]
