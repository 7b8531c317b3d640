"""A run followed while it records (``rls-analyze live``): each :meth:`LiveRun.poll`
reads what the processes appended to their trace files since the last poll
(rlscope.trace.tail), feeds it to each process's sweep (engine.overlap.ProcessAnalyzer in
live mode: the same charging as the report, up to each thread's last event), and returns a
:class:`Snapshot`: per process, time per (phase, operation, category) so far and in the
last interval, calls, progress, and rls-prof's CPU samples. Nothing is read twice.

Not in the live view: CUDA collector files (the report has them), inferred operations,
phases inherited by threads without their own, and the start-up row.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlscope.analysis.engine import categories as C
from rlscope.analysis.engine.overlap import ProcessAnalyzer
from rlscope.analysis.engine.paths import NameTable, PathTable
from rlscope.analysis.engine.process import ProcessInfo
from rlscope.analysis.engine.summary import ProcessSpan
from rlscope.analysis.processes.roles import (
    display_name,
    parse_command,
    role_from_command,
    role_label,
)
from rlscope.trace import format as fmt
from rlscope.trace.data import Aggregates, Events, ProcessTrace, Progress
from rlscope.trace.records import string_table
from rlscope.trace.rundir import host_directories
from rlscope.trace.tail import ProcSamples, TailFile, chunks

LIVE_SPAN_NS = 1 << 62  # a recording process has no end yet


@dataclass
class ProcessView:
    """One process as the last poll left it."""

    pid: int
    ppid: int
    name: str
    role: str
    ended: bool
    # Seconds per (phase, operation path, category): so far, and since the previous poll.
    total: dict[tuple[str, str, str], float]
    last: dict[tuple[str, str, str], float]
    calls: dict[tuple[str, str], int]  # operation calls so far per (phase, path)
    timesteps: int  # the last progress report (-1: none)
    unit: str
    steps_per_s_last: float  # over the last poll's interval (NaN: no progress in it)
    steps_per_s_run: float  # first report to last
    steps_last: int  # timesteps reported since the previous view (0: none)
    cpu_pct: float  # rls-prof's sample: % of one core over its last interval (NaN: none)
    rss_bytes: int
    phases: list[str]


@dataclass
class Snapshot:
    directory: Path
    time_s: float  # seconds since the live view started
    interval_s: float  # since the previous snapshot
    processes: list[ProcessView]
    running: bool  # some process has not recorded its end yet
    warnings: list[str] = field(default_factory=list)
    # rls-prof's last NVML sample per GPU: index -> (utilisation %, memory used bytes).
    gpus: dict[int, tuple[float, int]] = field(default_factory=dict)


class _Process:
    """One trace file followed: its tail, its sweep and what the views need."""

    def __init__(self, path: Path, paths: PathTable, phases: NameTable) -> None:
        self.tail = TailFile(path)
        self.paths, self.phases = paths, phases
        self.strings: dict[int, str] = {0: ""}
        self.metadata: dict[str, Any] = {}
        self.states: dict[int, tuple[int, int, int]] = {}
        self.analyzer: ProcessAnalyzer | None = None
        self.trace: ProcessTrace | None = None
        self.ended = False
        self.progress: list[tuple[int, int]] = []  # (time, timesteps): first and last two
        self.prev_total: dict[tuple[str, str, str], float] = {}
        self.last_steps: tuple[int, int] | None = None  # (time, timesteps) at the last view

    def poll(self) -> None:
        records = self.tail.poll()
        header = self.tail.header
        if header is None or header.source != "python":
            return  # not yet a header, or a CUDA/samples file
        for c in chunks(self.tail, records):
            self.strings.update(c.strings)
            self.metadata.update(c.metadata)
            if self.trace is None:
                self.trace = ProcessTrace(self.tail.path, header, Events.empty(), [""], {},
                                          Progress.empty(), {})
            self.trace.strings[:] = string_table(self.strings)
            self.trace.threads.update((t.index, t) for t in c.threads)
            self.trace.metadata.update(c.metadata)
            ev = c.events
            if len(ev):
                self._feed(ev)
            if c.aggregates is not None and self.analyzer is not None:
                self.states.update(c.aggregates.states)
                agg = c.aggregates
                self.analyzer.add_aggregates(Aggregates(dict(self.states), *(
                    getattr(agg, f) for f in ("thread", "gap", "state", "ns", "calls",
                                              "events", "count_thread", "count_gap",
                                              "count_kind", "count_n", "until_ns"))))
            pr = c.progress
            for t, s in zip(pr.time_ns.tolist(), pr.timesteps.tolist(), strict=True):
                self.progress = (self.progress[:1] + self.progress[1:][-1:] + [(t, s)])

    def _feed(self, ev: Events) -> None:
        if self.analyzer is None:
            assert self.trace is not None
            starts = np.flatnonzero(ev.kind == fmt.PROCESS_START)
            i = int(starts[0]) if len(starts) else 0
            t0 = int(ev.time_ns[i]) if len(starts) else int(ev.time_ns.min())
            span = ProcessSpan(t0, t0 + LIVE_SPAN_NS, int(ev.thread[i]))
            info = ProcessInfo(span, np.zeros(0, np.int64), np.zeros(0, np.int32), set())
            self.analyzer = ProcessAnalyzer(self.trace, info, self.paths, self.phases,
                                            live=True)
        self.ended = self.ended or bool(np.any(ev.kind == fmt.PROCESS_END))
        self.analyzer.feed(ev)

    def view(self, samples: dict[int, tuple[float, int]], interval_s: float
             ) -> ProcessView | None:
        h = self.tail.header
        if h is None or h.source != "python":
            return None
        total: dict[tuple[str, str, str], float] = {}
        calls: dict[tuple[str, str], int] = {}
        if self.analyzer is not None:
            keys, ns, count_rows, count_n = self.analyzer.snapshot()
            _, ph, pa, cat, _ = keys
            for p, a, c, v in zip(ph.tolist(), pa.tolist(), cat.tolist(), ns.tolist(),
                                  strict=True):
                k = (self.phases.names[p], self.paths.path(a), C.CATEGORY_NAMES[c])
                total[k] = total.get(k, 0.0) + v / 1e9
            for row, n in zip(count_rows.tolist(), count_n.tolist(), strict=True):
                if row[3] == -1:
                    k2 = (self.phases.names[row[1]], self.paths.path(row[2]))
                    calls[k2] = calls.get(k2, 0) + n
        last = {k: v - self.prev_total.get(k, 0.0) for k, v in total.items()}
        last = {k: v for k, v in last.items() if v > 0}
        self.prev_total = total
        steps = self.progress[-1][1] if self.progress else -1
        rate_last, steps_last = float("nan"), 0
        if self.progress and self.last_steps is not None \
                and self.progress[-1][0] > self.last_steps[0]:
            t1, s1 = self.progress[-1]
            steps_last = max(s1 - self.last_steps[1], 0)
            rate_last = (s1 - self.last_steps[1]) / ((t1 - self.last_steps[0]) / 1e9)
        rate_run = float("nan")
        if len(self.progress) >= 2 and self.progress[-1][0] > self.progress[0][0]:
            (t0, s0), (t1, s1) = self.progress[0], self.progress[-1]
            rate_run = (s1 - s0) / ((t1 - t0) / 1e9)
        if self.progress:
            self.last_steps = self.progress[-1]
        cpu, rss = samples.get(h.pid, (float("nan"), 0))
        unit = self.metadata.get(fmt.META_PROGRESS_UNIT)
        role = self.metadata.get(fmt.META_ROLE)
        if not isinstance(role, str) or not role:
            role = role_from_command(parse_command(h.argv)) or ""
        return ProcessView(
            h.pid, h.ppid, display_name(h.argv, self.metadata, fallback=h.process_name),
            role_label(role, self.metadata) if role else "", self.ended, total, last, calls,
            steps,
            unit if isinstance(unit, str) and unit else fmt.PROGRESS_UNIT, rate_last,
            rate_run, steps_last, cpu, rss, sorted({k[0] for k in total if k[0]}))


class LiveRun:
    """A run directory followed while it records (see the module's docstring)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.paths, self.phases = PathTable(), NameTable()
        self.files: dict[Path, _Process] = {}
        self.samples: dict[Path, TailFile] = {}
        self.proc = ProcSamples()
        self.started = time.monotonic()
        self.last = self.started
        self.warnings: list[str] = []

    def poll(self) -> Snapshot:
        """Read what was appended since the last poll; the run as it is now."""
        from rlscope.errors import TraceError

        dirs = [self.directory, *(self.directory / h for h in host_directories(self.directory))]
        for f in sorted(f for d in dirs for f in d.glob("*" + fmt.FILE_SUFFIX)):
            if f not in self.files:
                self.files[f] = _Process(f, self.paths, self.phases)
        for f in sorted(self.directory.glob("*" + fmt.SAMPLES_SUFFIX)):
            self.samples.setdefault(f, TailFile(f))
        for p in self.files.values():
            try:
                p.poll()
            except TraceError as e:
                if str(e) not in self.warnings:
                    self.warnings.append(str(e))
        for s in self.samples.values():
            try:
                self.proc.add(s.poll())
            except TraceError as e:
                if str(e) not in self.warnings:
                    self.warnings.append(str(e))
        now = time.monotonic()
        interval, self.last = now - self.last, now
        cpu = self.proc.cpu_pct()
        views = [v for v in (p.view(cpu, interval) for p in self.files.values())
                 if v is not None]
        return Snapshot(self.directory, now - self.started, interval, views,
                        not views or any(not v.ended for v in views), list(self.warnings),
                        {i: (u, m) for i, (_, u, m) in sorted(self.proc.gpus.items())})
