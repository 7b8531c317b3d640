"""What a timeline export shows: which processes, which kinds of track, which time window
(``rls-analyze timeline --process/--tracks/--window``, docs/rls-analyze.md), and its
time origin. Writers (rlscope.reporters.chrome_trace, .perfetto) take a ``TimelinePlan``.

Times in a window are seconds from the timeline's zero, the earliest event recorded in
the run (before any selection), or timesteps from the progress records.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rlscope.analysis.processes import roles
from rlscope.analysis.processes import tree as proctree
from rlscope.analysis.timeline import pysamples
from rlscope.analysis.timeline.counters import CounterGroup, gpu_busy_tracks, sample_tracks
from rlscope.analysis.timeline.slices import (
    CALL_KINDS,
    COUNTERS,
    GPU,
    PYTHON,
    TRACK_KINDS,
    CounterTrack,
    Track,
    Window,
    count_slices,
)
from rlscope.errors import UserError
from rlscope.trace import format as fmt
from rlscope.trace.clocks import RunClock, on_run_clock
from rlscope.trace.data import ProcessTrace, Trace
from rlscope.trace.pystacks_reader import PyStacks

TRACK_GROUPS = {"all": TRACK_KINDS, "calls": CALL_KINDS}
_ALIASES = {"ops": "operations", "cuda": "cuda-api", "api": "cuda-api",
            "native": "calls", "native-calls": "calls", "env-steps": "env"}
_UNITS_NS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "min": 60_000_000_000}
STEPS = "steps"
_BOUND = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]+)\s*$", re.I)


def parse_tracks(items: Sequence[str]) -> frozenset[str]:
    """``--tracks`` values: comma-separated kinds or groups (``all``, ``calls``), applied
    left to right; ``-kind`` removes one (``all,-backend``)."""
    chosen: set[str] = set()
    words = [w.strip() for item in items for w in item.split(",") if w.strip()]
    if not words:
        raise UserError("--tracks names no track; choose from " + _choices())
    for w in words:
        remove = w.startswith("-")
        name = w[1:] if remove else w
        name = _ALIASES.get(name.lower(), name.lower())
        if name in TRACK_GROUPS:
            kinds: Sequence[str] = TRACK_GROUPS[name]
        elif name in TRACK_KINDS:
            kinds = (name,)
        else:
            raise UserError(f"--tracks: unknown track {w!r}; choose from {_choices()}")
        if remove:
            chosen -= set(kinds)
        else:
            chosen |= set(kinds)
    if not chosen:
        raise UserError("--tracks leaves no track; choose from " + _choices())
    return frozenset(chosen)


def _choices() -> str:
    return ", ".join([*TRACK_KINDS, *TRACK_GROUPS])


@dataclass(frozen=True)
class Bound:
    value: float
    unit: str  # "s" (seconds from the timeline's zero) or STEPS

    def __str__(self) -> str:
        return f"{self.value:g}{'s' if self.unit == 's' else ' ' + self.unit}"


@dataclass(frozen=True)
class WindowSpec:
    start: Bound | None
    end: Bound | None


def parse_window(text: str) -> WindowSpec:
    """``START:END``, each bound a number with its unit — ``s``, ``ms``, ``us``, ``min``
    (from the timeline's zero) or ``steps`` (timesteps, from the progress records) — or
    empty for the run's start or end: ``30s:45s``, ``10000steps:20000steps``, ``60s:``."""
    if text.count(":") != 1:
        raise UserError(f"--window {text!r}: write START:END, e.g. 30s:45s or "
                         "10000steps:20000steps")
    a, b = text.split(":")
    start, end = _bound(a, text), _bound(b, text)
    if start is None and end is None:
        raise UserError(f"--window {text!r} selects no bound; e.g. 30s:45s")
    if start is not None and end is not None and start.unit == end.unit \
            and end.value <= start.value:
        raise UserError(f"--window {text!r}: the end must come after the start")
    return WindowSpec(start, end)


def _bound(s: str, text: str) -> Bound | None:
    if not s.strip():
        return None
    m = _BOUND.match(s)
    unit = m.group(2).lower() if m else ""
    if unit in ("step", "timesteps", "timestep"):
        unit = STEPS
    if m is None or (unit not in _UNITS_NS and unit != STEPS):
        raise UserError(f"--window {text!r}: {s.strip()!r} needs a unit: s, ms, us, min "
                         "or steps (e.g. 30s:45s, 10000steps:20000steps)")
    value = float(m.group(1))
    if unit in _UNITS_NS:
        return Bound(value * _UNITS_NS[unit] / 1e9, "s")
    return Bound(value, STEPS)


def origin_ns(trace: Trace) -> int:
    """The timeline's zero: the earliest event, CUDA API call or GPU activity recorded."""
    firsts = [int(p.events.time_ns.min()) for p in trace.processes if len(p.events)]
    firsts += [int(p.api_calls.start_ns.min()) for p in trace.processes if len(p.api_calls)]
    firsts += [int(p.gpu.start_ns.min()) for p in trace.processes if len(p.gpu)]
    return min(firsts, default=0)


def _last_ns(trace: Trace) -> int:
    lasts = [int(p.events.time_ns.max()) for p in trace.processes if len(p.events)]
    lasts += [int(p.api_calls.end_ns.max()) for p in trace.processes if len(p.api_calls)]
    lasts += [int(p.gpu.end_ns.max()) for p in trace.processes if len(p.gpu)]
    return max(lasts, default=0)


def resolve_window(spec: WindowSpec | None, trace: Trace, origin: int) -> Window:
    """The window in CLOCK_MONOTONIC ns. A timestep bound is the time of the first
    progress record (any process) at or past it."""
    if spec is None:
        return None
    last = _last_ns(trace)
    pr = [p.progress for p in trace.processes if len(p.progress.time_ns)]
    if pr:
        t = np.concatenate([x.time_ns for x in pr])
        steps = np.concatenate([x.timesteps for x in pr])
        o = np.argsort(t, kind="stable")
        t, steps = t[o], np.maximum.accumulate(steps[o])

    def at(b: Bound | None, default: int) -> int:
        if b is None:
            return default
        if b.unit == "s":
            return origin + round(b.value * 1e9)
        if not pr:
            raise UserError(f"--window {b}: the run has no progress records (rlscope."
                             "progress); give the window in seconds")
        if b.value <= 0:
            return origin
        i = int(np.searchsorted(steps, b.value, side="left"))
        if i >= len(steps):
            raise UserError(f"--window {b}: the run reached only {int(steps[-1]):,} "
                             "timesteps")
        return int(t[i])

    w0, w1 = at(spec.start, origin), at(spec.end, last)
    if w0 > last:
        raise UserError(f"--window {_spec_text(spec)} starts after the run's last event "
                         f"({(last - origin) / 1e9:.3f} s)")
    if w1 <= w0:
        raise UserError(f"--window {_spec_text(spec)} is empty: it ends at or before "
                         f"its start ({(w0 - origin) / 1e9:.3f} s, {(w1 - origin) / 1e9:.3f} s)")
    return w0, w1


def _spec_text(spec: WindowSpec) -> str:
    return f"{spec.start or ''}:{spec.end or ''}".replace(" ", "")


@dataclass(frozen=True)
class Identity:
    """What a process is, for display and for ``--process``."""

    role: str
    role_label: str
    name: str


def identities(trace: Trace) -> list[Identity]:
    """Role and display name of each process of the trace (docs/multiprocess.md)."""
    facts = []
    for p in trace.processes:
        start = int(p.events.time_ns.min()) if len(p.events) else p.header.clock.monotonic_ns
        facts.append(proctree.ProcessFacts(p.pid, p.header.ppid, p.header.host, start,
                                           tuple(p.header.argv), p.metadata))
    tree = proctree.build_tree(facts)
    launcher = trace.run.get("launcher", {}).get("pid") \
        if isinstance(trace.run.get("launcher"), dict) else None
    assigned = proctree.assign_roles(facts, tree,
                                     launcher if isinstance(launcher, int) else None)
    return [Identity(r.role, roles.role_label(r.role, f.metadata),
                     roles.display_name(f.argv, f.metadata, proctree.forked(facts, tree, i),
                                        p.header.process_name))
            for i, (f, r, p) in enumerate(zip(facts, assigned, trace.processes,
                                               strict=True))]


def select_processes(trace: Trace, specs: Sequence[str]) -> list[int]:
    """Indices of the processes that ``--process`` values name: a pid, a role (``main``,
    ``vector-env worker``, ...) or a name (a substring of the display name or of the
    process name), case-insensitive. No values: every process."""
    if not specs:
        return list(range(len(trace.processes)))
    ids = identities(trace)
    chosen: set[int] = set()
    for spec in specs:
        s = spec.strip().lower()
        hit = {i for i, p in enumerate(trace.processes) if s.isdigit() and p.pid == int(s)}
        if not hit:
            hit = {i for i, d in enumerate(ids) if s in (d.role.lower(), d.role_label.lower())}
        if not hit:
            hit = {i for i, (p, d) in enumerate(zip(trace.processes, ids, strict=True))
                   if s and (s in d.name.lower() or s in p.header.process_name.lower())}
        if not hit:
            known = "; ".join(f"{p.pid} {d.role} {d.name!r}"
                              for p, d in zip(trace.processes, ids, strict=True))
            raise UserError(f"--process {spec!r} matches no process of the run ({known})")
        chosen |= hit
    return sorted(chosen)


@dataclass
class PlannedProcess:
    trace: ProcessTrace
    ordinal: int  # place in the whole trace (keeps flow ids unique)
    name: str  # shown: role and display name
    sort: int
    counters: list[CounterTrack] = field(default_factory=list)  # see plan()
    samples: list[Track] = field(default_factory=list)  # Python samples (PYTHON)


@dataclass
class TimelinePlan:
    origin_ns: int
    window: Window
    kinds: frozenset[str]
    processes: list[PlannedProcess]
    notes: list[str] = field(default_factory=list)  # what was left out, for the user
    groups: list[CounterGroup] = field(default_factory=list)  # run-wide counters

    def counts(self) -> dict[str, int]:
        """Slices (counter values) per kind of track shown, summed over the processes."""
        total: dict[str, int] = {}
        for pp in self.processes:
            for k, n in count_slices(pp.trace, self.window).items():
                if k in self.kinds:
                    total[k] = total.get(k, 0) + n
        extra = sum(len(c) for pp in self.processes for c in pp.counters) \
            + sum(len(c) for g in self.groups for c in g.tracks)
        if extra and COUNTERS in self.kinds:
            total[COUNTERS] = total.get(COUNTERS, 0) + extra
        samples = sum(len(t) for pp in self.processes for t in pp.samples)
        if samples and PYTHON in self.kinds:
            total[PYTHON] = samples
        return total


def plan_timeline(trace: Trace, kinds: frozenset[str] = frozenset(TRACK_KINDS),
                  window: WindowSpec | None = None, processes: Sequence[str] = (),
                  stacks: Sequence[PyStacks] = ()) -> TimelinePlan:
    """The timeline of ``trace``'s chosen processes; ``stacks``: the run's Python stack
    samples (each process's on its track of samples, with PYTHON)."""
    clock = RunClock.of(trace.run, [p.header for p in trace.processes])
    trace = on_run_clock(trace)  # several hosts: every process on the run's clock
    origin = origin_ns(trace)
    chosen = select_processes(trace, processes)
    ids = identities(trace)
    order = _tree_order(trace, ids)
    out = []
    for i in chosen:
        p, d = trace.processes[i], ids[i]
        name = f"{d.role_label}: {d.name}" if d.name else d.role_label
        if p.header.source != "python" and not len(p.events):
            name = f"{d.role_label}: {p.header.process_name}"
        session = p.metadata.get(fmt.META_SESSION)
        if isinstance(session, int) and session > 0:  # a later rlscope.start() of the pid
            name += f" [session {session + 1}]"
        out.append(PlannedProcess(p, i, name, order[i]))
    out.sort(key=lambda pp: pp.sort)
    span = resolve_window(window, trace, origin)
    groups: list[CounterGroup] = []
    if COUNTERS in kinds:
        sampled, groups = sample_tracks(trace.samples, span)
        for pp in out:
            pp.counters = gpu_busy_tracks(pp.trace, span) if GPU in kinds else []
            pp.counters += sampled.pop(pp.trace.pid, [])  # a pid's first session only
        if processes:  # only the chosen processes' own counters
            groups = []
    if PYTHON in kinds and stacks:
        by_pid = {st.pid: st for st in stacks}
        for pp in out:
            st = by_pid.get(pp.trace.pid)
            if st is not None:
                st = pysamples.shifted(st, clock.shift(pp.trace.header.host))
                pp.samples = pysamples.sample_tracks(
                    pp.trace, pysamples.for_process(st, pp.trace, span), span)
    return TimelinePlan(origin, span, kinds, out, groups=groups)


def _tree_order(trace: Trace, ids: list[Identity]) -> list[int]:
    """Display rank of each process: the main process first, then by start."""
    def start(p: ProcessTrace) -> int:
        return int(p.events.time_ns.min()) if len(p.events) else p.header.clock.monotonic_ns

    ranked = sorted(range(len(trace.processes)),
                    key=lambda i: (ids[i].role != fmt.ROLE_MAIN, start(trace.processes[i]),
                                   trace.processes[i].pid))
    rank = [0] * len(ranked)
    for r, i in enumerate(ranked):
        rank[i] = r
    return rank
