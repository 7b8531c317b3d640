"""Calibration where forked chunk copies cannot work (multi-process runs): the per-event
cost model from the hooks' microbenchmark and a per-process start-up measurement, and
the profiled run checked against whole runs of the command without rlscope, as many as
fit a budget of about the profiled run's own length (at least one).

The check is like for like: the whole process tree's CPU time (rls-prof reaps the
command's orphans in both, see runner.run_once) against the profiled run's (run.json
``cpu_s``) less what the model removes from every process."""

from __future__ import annotations

import bisect
import dataclasses
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlscope import envvars
from rlscope.analysis.overhead.correction import install_ns, own_threads_ns
from rlscope.analysis.overhead.kinds import (
    KINDS,
    POOL_CALL,
    POOL_TASK,
    RLSCOPE_IMPORT,
    count_process,
)
from rlscope.analysis.overhead.model import Calibration
from rlscope.calibration.build import model_calibration
from rlscope.calibration.estimate import UNINSTRUMENTED, RunSample
from rlscope.calibration.runner import SUBDIR, RunRecord, Status, run_once
from rlscope.launch import child_env
from rlscope.launch.child_env import Recording
from rlscope.libraries import (
    JIT_CALLS,
    KERAS_STEPS,
    OPTIMIZER_STEPS,
    PROGRESS_BOUNDABLE,
    PROGRESS_UNITS,
)
from rlscope.trace import format as fmt
from rlscope.trace.data import ProcessTrace
from rlscope.trace.reader import read_process, trace_files

BUDGET_FACTOR = 1.0  # runs without rlscope: about this many times the profiled run's wall
# ... but a run of a few seconds is worth a few of them: a short fixed budget, so the
# calibration of a short run stays a few seconds (≤ 1x the run from this length on)
MIN_BUDGET_S = 5.0
# A long run's check takes at most this: pairs of runs with and without rlscope, each
# ended at the same progress report of the script (RLSCOPE_MAX_PROGRESS), where it
# reports progress itself; else whole runs, as a shorter run.
MAX_BUDGET_S = 300.0
BOUNDED_PAIRS = 2  # the pairs the budget is planned for (the runs' length follows)
MAX_RUNS = 5
STARTUP_PAIRS = 3  # interpreter start-ups timed with and without rlscope, in turns


def shared_imports(rec: Recording) -> list[str]:
    """The standard-library modules rlscope's start-up imports into an empty process
    (``collections``, ``enum``, ``inspect``, ...; rlscope's own left out). A workload's
    processes import them anyway (torch, numpy, gymnasium, Ray all do), so importing
    them is not rlscope's cost there (an empty process's start-up counted them: 24-26.5
    ms here against 19.5 ms without them)."""
    probe = "import sys; print(' '.join(sorted(sys.modules)))"

    def loaded(env: dict[str, str]) -> set[str]:
        try:
            out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                                 text=True, timeout=60.0)
        except (OSError, subprocess.SubprocessError):
            return set()
        return set(out.stdout.split()) if out.returncode == 0 else set()

    with tempfile.TemporaryDirectory(prefix="rlscope-imports-") as tmp:
        prof = child_env.profiled(Recording(str(Path(tmp) / "trace"), rec.recorder,
                                            intercept=rec.intercept, cuda=False))
        extra = loaded(prof) - loaded(child_env.uninstrumented())
    stdlib = sys.stdlib_module_names
    return sorted(m for m in extra if m.split(".")[0] in stdlib and m != "__main__")


@dataclass
class StartUp:
    """What rlscope's start-up costs a Python process (CPU ns), beyond the standard-library
    modules it shares with the workload."""

    ns: float  # import, start, interception set-up, final flush (median)
    spread_ns: float  # half the interquartile range
    import_ns: float  # of which importing rlscope (a script that uses rlscope pays it too)


def startup_cost_ns(rec: Recording, status: Status | None = None) -> StartUp:
    """rlscope's start-up in a Python process beyond the standard-library modules it
    shares with the workload (:func:`shared_imports`): ``python -c "import <those>"``
    with and without recording, and without recording but importing rlscope, in turns."""
    diffs, imports = [], []
    shared = shared_imports(rec)
    line = f"import {', '.join(shared)}" if shared else "pass"
    cmd = [sys.executable, "-c", line]
    imp = [sys.executable, "-c", f"{line}; import rlscope"]
    with tempfile.TemporaryDirectory(prefix="rlscope-startup-") as tmp:
        for i in range(STARTUP_PAIRS):
            if status is not None:
                status("calibrating: timing rlscope's start-up in an empty process")
            d = Path(tmp) / str(i)
            prof = child_env.profiled(Recording(str(d / "trace"), rec.recorder,
                                                intercept=rec.intercept, cuda=False))
            plain = child_env.uninstrumented()
            _w, with_s, rc1 = run_once(cmd, prof, d / "with", 60.0)
            _w, without_s, rc2 = run_once(cmd, plain, d / "without", 60.0)
            _w, import_s, rc3 = run_once(imp, plain, d / "import", 60.0)
            if rc1 == 0 and rc2 == 0:
                diffs.append((with_s - without_s) * 1e9)
                if rc3 == 0:
                    imports.append((import_s - without_s) * 1e9)
    if not diffs:
        return StartUp(math.nan, math.nan, math.nan)
    q = statistics.quantiles(diffs, n=4) if len(diffs) > 1 else [diffs[0]] * 3
    total = max(statistics.median(diffs), 0.0)
    part = min(max(statistics.median(imports), 0.0), total) if imports else math.nan
    return StartUp(total, (q[2] - q[0]) / 2, part)


def _rounds(budget_s: float) -> Iterator[int]:
    """0, 1, ... while one more round of runs fits in ``budget_s`` as the rounds so far
    went (at least one, at most MAX_RUNS)."""
    t0 = time.monotonic()
    for i in range(MAX_RUNS):
        spent = time.monotonic() - t0
        if i and spent + spent / i > budget_s:
            return
        yield i


def _ticker(status: Status | None, text: str) -> Callable[[], None]:
    """Says ``text`` on the status line now, and again at each call (a run's ticks)."""
    def tick() -> None:
        if status is not None:
            status(text)
    tick()
    return tick


TALLY_FILE = "work-tally.json"


def run_unrecorded(command: list[str], out: Path, profiled_wall_s: float,
                   max_progress: int | None, status: Status | None = None,
                   detail: Callable[[str], None] | None = None,
                   budget_s: float | None = None, tally: Tally | None = None
                   ) -> tuple[list[RunRecord], list[int | None]]:
    """Runs of the command without rlscope until the budget is spent (at least one; by
    default about the profiled run's length, at least MIN_BUDGET_S), and with ``tally``
    (no ``max_progress``) how many of its units each run's main process did (None where
    it wrote no count)."""
    budget = max(BUDGET_FACTOR * profiled_wall_s, MIN_BUDGET_S) if budget_s is None \
        else budget_s
    timeout = max(4 * profiled_wall_s, 120.0)
    records: list[RunRecord] = []
    done: list[int | None] = []
    for i in _rounds(budget):
        d = out / SUBDIR / f"{i}-{UNINSTRUMENTED}"
        tick = _ticker(status, f"calibrating: run {i + 1} of the command without rlscope "
                               f"(checks the correction; about {profiled_wall_s:.0f} s each)")
        file = (d / TALLY_FILE).absolute()  # the command may change directory
        env = (child_env.uninstrumented(tally=str(file), by=tally.by)
               if tally is not None and max_progress is None else
               child_env.uninstrumented(max_progress))
        wall, cpu, rc = run_once(command, env, d, timeout, tick)
        if rc != 0:
            from rlscope.errors import RLScopeError

            raise RLScopeError(f"the run without rlscope exited with status {rc}; see "
                               f"{d / 'output.log'}")
        records.append(RunRecord(RunSample(UNINSTRUMENTED, len(records), cpu, {}, wall),
                                 str(d), rc))
        done.append(_read_tally(file) if tally is not None else None)
        if detail is not None:
            did = "" if done[-1] is None or tally is None else \
                f", {done[-1]} {tally.unit}s ({tally.n} profiled)"
            detail(f"run without rlscope {len(records)}: {cpu:.2f} s CPU (process tree), "
                   f"{wall:.2f} s wall{did}")
    return records, done


def _read_tally(path: Path) -> int | None:
    import json

    try:
        n = json.loads(path.read_text())["count"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return n if isinstance(n, int) else None


def check_budget_s(profiled_wall_s: float) -> float:
    """Wall seconds the check may take after a profiled run of ``profiled_wall_s``."""
    return min(max(BUDGET_FACTOR * profiled_wall_s, MIN_BUDGET_S), MAX_BUDGET_S)


@dataclass
class BoundedPair:
    """A run with rlscope and one without, both ended at the same progress report."""

    profiled: RunSample  # counts: its events by kind
    installs_s: float
    unrecorded: RunSample
    directories: tuple[str, str]


def run_bounded_pairs(command: list[str], out: Path, rec: Recording, bound: int,
                      budget_s: float, status: Status | None = None,
                      detail: Callable[[str], None] | None = None,
                      by: str = "", unit: str = "progress report",
                      timeout_s: float | None = None) -> list[BoundedPair]:
    """Pairs of runs ended at the script's ``bound``-th progress report (``by``: the
    integration's, libraries.PROGRESS_BOUNDABLE; or libraries.OPTIMIZER_STEPS, the
    ``unit`` "optimizer step"), with rlscope (as profiled) and without, in turns (which
    goes first alternates), until ``budget_s`` is spent (at least one pair); a run is
    stopped after ``timeout_s`` (default: 4x the budget, at least 2 min)."""
    from rlscope.errors import RLScopeError

    pairs: list[BoundedPair] = []
    timeout = max(4 * budget_s, 120.0) if timeout_s is None else timeout_s
    for i in _rounds(budget_s):
        d = {True: out / SUBDIR / f"{i}-full", False: out / SUBDIR / f"{i}-{UNINSTRUMENTED}"}
        got: dict[bool, tuple[float, float]] = {}
        for recorded in (True, False) if i % 2 == 0 else (False, True):
            tick = _ticker(status, f"calibrating: pair {i + 1} of runs ended at {unit} "
                                   f"{bound}, {'with' if recorded else 'without'} "
                                   "rlscope (checks the correction)")
            env = (child_env.profiled(dataclasses.replace(rec.into(d[True]),
                                                          max_progress=bound))
                   if recorded else child_env.uninstrumented(bound))
            if by:
                env[envvars.PROGRESS_BY] = by
            wall, cpu, rc = run_once(command, env, d[recorded], timeout, tick)
            if rc != 0:
                raise RLScopeError(f"a check run {'with' if recorded else 'without'} "
                                   f"rlscope exited with status {rc}; see "
                                   f"{d[recorded] / 'output.log'}")
            got[recorded] = (wall, cpu)
        prof = profiled_run(d[True])
        # The run without rlscope imported it too (the work limit is rlscope's code).
        prof.counts[RLSCOPE_IMPORT] = 0
        pairs.append(BoundedPair(
            RunSample("full", i, got[True][1], prof.counts, got[True][0]), prof.installs_s,
            RunSample(UNINSTRUMENTED, i, got[False][1], {}, got[False][0]),
            (str(d[True]), str(d[False]))))
        if detail is not None:
            detail(f"pair {i + 1} ended at {unit} {bound}: {got[True][1]:.2f} s "
                   f"CPU with rlscope, {got[False][1]:.2f} s without (process trees)")
    return pairs


def took_py_samples(out: Path) -> bool:
    """Whether the profiled run in ``out`` sampled Python stacks (its stack files)."""
    from rlscope.trace.pystacks_reader import stack_files

    return bool(stack_files(out))


def ran_pool_tasks(out: Path) -> bool:
    """Whether a process of the profiled run in ``out`` handed tasks to a pool: its
    trace holds format.META_POOL_TASKS (found in the bytes, without decoding)."""
    import mmap

    key = fmt.META_POOL_TASKS.encode()
    try:
        _d, _run, files = trace_files(out)
    except Exception:  # no trace: nothing to price
        return False
    for f in files:
        try:
            with open(f, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
                if m.find(key) >= 0:
                    return True
        except (OSError, ValueError):  # empty or unreadable: not this one
            continue
    return False


@dataclass
class Profiled:
    """What a profiled run's trace tells the check. The main process's times (s after
    the launch) stop at its first aggregated stretch (a bounded trace's gap), where
    progress reports are thinned and markers are not kept one by one."""

    counts: dict[str, int]  # events by cost kind, every process
    installs_s: float  # CPU its processes recorded setting up interception, own threads
    progress_s: list[float]  # the main process's progress reports
    progress_by: str  # the integration that made them ("": the script itself)
    steps_s: list[float] = dataclasses.field(default_factory=list)  # its optimizer steps
    whole: bool = True  # the main process's times are all there (no aggregated stretch)
    root_import: int = 0  # its main process is charged rlscope's import (kinds)
    # Other units a run can count, by RLSCOPE_PROGRESS_BY: its Keras optimizer steps, its
    # most-called jitted JAX function's calls (libraries.KERAS_STEPS, JIT_CALLS + name).
    calls_s: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    jit_calls: int = 0  # its calls of any jitted JAX function (a tally wraps each)


@dataclass
class Tally:
    """What a run without rlscope counts of its main process's work, to compare with the
    profiled run's ``n``: ``unit``s (RLSCOPE_WORK_TALLY, RLSCOPE_PROGRESS_BY=by)."""

    n: int
    by: str
    unit: str


# Counting a jitted function's calls costs the run without rlscope ~1.2 µs a call here (a
# Python wrapper around a ~4 µs dispatch): its tally is made only where that is at most
# TALLY_SHARE of the run's CPU time, or it would bias the check it serves. (A bound's
# pairs count in both runs: there it cancels.)
JIT_COUNT_NS = 1500.0
TALLY_SHARE = 1e-3


def work_tally(prof: Profiled, cpu_s: float | None = None) -> Tally | None:
    """The profiled run's main process's work in units a run without rlscope can count
    too: its progress reports (its own, or an integration's that
    libraries.PROGRESS_BOUNDABLE counts), else its torch or Keras optimizer steps, else
    its most-called jitted function's calls (where counting them costs at most
    TALLY_SHARE of ``cpu_s``, the run's CPU seconds, when known); None when it has none
    of these, or a bounded trace has not kept them all."""
    if not prof.whole:
        return None
    if prof.progress_s and (not prof.progress_by or prof.progress_by in PROGRESS_BOUNDABLE):
        return Tally(len(prof.progress_s), prof.progress_by, unit_name(prof.progress_by))
    units = _units(prof)
    if not units:
        return None
    by, t = units[0]
    # Every jitted function is wrapped to tell outermost calls: all of them cost.
    if by.startswith(JIT_CALLS) and cpu_s is not None and \
            max(prof.jit_calls, len(t)) * JIT_COUNT_NS > TALLY_SHARE * cpu_s * 1e9:
        return None
    return Tally(len(t), by, unit_name(by))


def unlike_work(tally: Tally, done: list[int | None]) -> str:
    """Why runs without rlscope that did ``done`` units did not do the profiled run's
    work (a clause), or "" (they did, or did not say)."""
    other = sorted({n for n in done if n is not None and n != tally.n})
    if not other:
        return ""
    counts = " and ".join(f"{n:,}" for n in other)
    return (f"the run without rlscope did {counts} {tally.unit}s against the profiled "
            f"run's {tally.n:,}: the command does not do the same work each time (a "
            "wall-clock limit, a reward threshold, an unseeded stop?)")


def common_bound(prof: Profiled, tally: Tally, done: list[int | None],
                 target_s: float) -> Bound:
    """Where pairs of runs can end with the same work done when whole runs did not do the
    same: the unit :func:`work_bound` picks about ``target_s`` in, before the end of the
    shortest run (the run without rlscope may have done fewer)."""
    fewest = min([tally.n, *(n for n in done if n is not None)])
    b = work_bound(prof, target_s)
    if b.n is None or b.by != tally.by:
        b = Bound(None, tally.by, tally.unit, b.why)
    n = b.n if b.n is not None and b.n < fewest else fewest // 2
    if n < 1:
        return Bound(None, why=f"no {tally.unit} comes before the end of every run")
    return Bound(n, tally.by, tally.unit)


@dataclass
class Bound:
    """Where a long run's check ends its runs: the ``n``-th of the main process's
    ``unit``s (RLSCOPE_MAX_PROGRESS=n, RLSCOPE_PROGRESS_BY=by), or None and why not."""

    n: int | None
    by: str = ""
    unit: str = "progress report"
    why: str = ""


JIT_PREFIX = "jax.jit."  # the jax integration's name of a jitted function's calls


def _main_process_times(p: ProcessTrace, start_ns: int
                        ) -> tuple[list[float], list[float], dict[str, list[float]], int]:
    """(progress reports, torch optimizer steps, {RLSCOPE_PROGRESS_BY: times} of Keras
    optimizer steps and of the most-called jitted JAX function's calls) of a process, s
    after ``start_ns``, up to its first aggregated stretch; and its calls of any jitted
    function there."""
    ev = p.events
    gaps = ev.time_ns[ev.kind == fmt.AGGREGATED_BEGIN]
    end = int(gaps.min()) if len(gaps) else None

    def seconds(t: np.ndarray) -> list[float]:
        t = np.sort(t if end is None else t[t < end])
        return [(int(x) - start_ns) / 1e9 for x in t]

    def begins(kind: int, names: list[int]) -> np.ndarray:
        return ev.time_ns[(ev.kind == kind) & np.isin(ev.name, names)] if names \
            else ev.time_ns[:0]

    ids = {s: i for i, s in enumerate(p.strings)}
    steps = begins(fmt.MARK_CALL_BEGIN, [ids[fmt.MARK_STEP[0]]] if fmt.MARK_STEP[0] in ids
                   else [])
    calls: dict[str, list[float]] = {}
    keras = begins(fmt.MARK_CALL_BEGIN, [ids[fmt.MARK_STEP[1]]] if fmt.MARK_STEP[1] in ids
                   else [])
    if len(keras):
        calls[KERAS_STEPS] = seconds(keras)
    jitted = [i for s, i in ids.items() if s.startswith(JIT_PREFIX)]
    mask = (ev.kind == fmt.BACKEND_CALL_BEGIN) & np.isin(ev.name, jitted)
    names, times = ev.name[mask], ev.time_ns[mask]
    if end is not None:
        names, times = names[times < end], times[times < end]
    if len(names):
        top = int(np.bincount(names).argmax())
        calls[JIT_CALLS + p.strings[top][len(JIT_PREFIX):]] = seconds(times[names == top])
    return seconds(p.progress.time_ns), seconds(steps), calls, len(names)


def unit_name(by: str) -> str:
    """A counted unit of work in words (check lines: "ended at <unit> N")."""
    if by.startswith(JIT_CALLS):
        return f"jitted {by[len(JIT_CALLS):]} call"
    return "optimizer step" if by in (OPTIMIZER_STEPS, KERAS_STEPS) else \
        PROGRESS_UNITS.get(by, "progress report")


def _units(prof: Profiled) -> list[tuple[str, list[float]]]:
    """The main process's countable units besides progress reports, in the order a bound
    takes them: torch optimizer steps, Keras optimizer steps, a jitted function's calls."""
    out = [(OPTIMIZER_STEPS, prof.steps_s)] if prof.steps_s else []
    out += [(by, t) for by, t in prof.calls_s.items() if by == KERAS_STEPS and t]
    out += [(by, t) for by, t in prof.calls_s.items() if by.startswith(JIT_CALLS) and t]
    return out


def profiled_run(out: Path) -> Profiled:
    """Read the profiled run in ``out`` for the check (every process once)."""
    counts = dict.fromkeys(KINDS, 0)
    extra = 0.0
    _d, run, files = trace_files(out)
    launcher = (run.get("launcher") or {}).get("pid")
    start = (run.get("start") or {}).get("monotonic_ns")
    progress: list[float] = []
    steps: list[float] = []
    by = ""
    whole, root_import, jit_calls = False, 0, 0
    calls: dict[str, list[float]] = {}
    for f in files:
        if f.name.startswith("cuda."):
            continue
        p = read_process(f)
        own = count_process(p)
        for k, n in own.items():
            counts[k] += n
        extra += (install_ns(p) + own_threads_ns(p)) / 1e9
        if launcher is not None and p.header.ppid == launcher and start is not None:
            progress, steps, calls, jit_calls = _main_process_times(p, int(start))
            by = str(p.metadata.get(fmt.META_PROGRESS_BY, ""))
            whole = not bool(np.any(p.events.kind == fmt.AGGREGATED_BEGIN))
            root_import = own[RLSCOPE_IMPORT]
    return Profiled(counts, extra, progress, by, steps, whole, root_import, calls, jit_calls)


def progress_bound(prof: Profiled, target_s: float) -> tuple[int | None, str]:
    """(N, "") where the main process's N-th progress report came ``target_s`` after the
    launch or later and before its last report (RLSCOPE_MAX_PROGRESS=N ends a run
    there), else (None, why not, a clause)."""
    if prof.progress_by and prof.progress_by not in PROGRESS_BOUNDABLE:
        return None, (f"its progress reports are made by rlscope's {prof.progress_by} "
                      "integration, which a run without rlscope does not make")
    t = prof.progress_s
    if len(t) < 2:
        return None, ("its main process reports no progress of its own "
                      "(rlscope.report_progress) at which a run could end early")
    n = bisect.bisect_left(t, target_s) + 1
    if n >= len(t):
        return None, "its progress reports come too late in the run to end one early"
    return n, ""


def work_bound(prof: Profiled, target_s: float) -> Bound:
    """Where a long run's check ends its runs, about ``target_s`` after the launch: at a
    progress report (:func:`progress_bound`), else, for a script that reports none in
    time, at one of its main process's torch optimizer steps (counted in both runs of a
    pair by torch's step hook; libraries.OPTIMIZER_STEPS), else None and why."""
    n, why = progress_bound(prof, target_s)
    if n is not None:
        return Bound(n, prof.progress_by, unit_name(prof.progress_by))
    units = _units(prof)
    for by, t in units:
        k = bisect.bisect_left(t, target_s) + 1
        if len(t) >= 2 and k < len(t):
            return Bound(k, by, unit_name(by))
    why += ("; its " + " and ".join(f"{unit_name(by)}s" for by, _t in units) +
            " come too late in the run to end one there" if units else
            ", nor steps a torch or Keras optimizer or calls a jitted JAX function, where "
            "one could end too")
    return Bound(None, why=why)


def _set_aside(records: list[RunRecord], bound: Bound, unlike: str,
               echo: Callable[[str], None] | None) -> None:
    """Whole runs that did other work than the profiled run: said once, and where pairs
    ended at ``bound`` check instead, their directories renamed out of the pairs' way."""
    if bound.n is not None:
        for r in records:
            d = Path(r.directory)
            d.rename(d.with_name(f"other-work-{d.name}"))
    if echo is not None:
        echo(f"{unlike}; " + (f"so the check compares runs ended at {bound.unit} {bound.n}, "
                              "with rlscope and without" if bound.n is not None else
                              f"so it cannot check the correction ({bound.why})"))


def calibrate_by_model(command: list[str], out: Path, rec: Recording, run: dict,
                       microbench: Callable[[bool, dict[str, int]],
                                            dict[str, dict[str, float]] | None],
                       max_progress: int | None, status: Status | None = None,
                       detail: Callable[[str], None] | None = None,
                       echo: Callable[[str], None] | None = None,
                       budget_s: float | None = None) -> Calibration:
    """The cost model (microbenchmarks) and its check on whole runs (a long run: on pairs
    of runs ended early, :func:`run_bounded_pairs`). ``run``: the profiled run's
    run.json (its ``cpu_s`` and ``duration_s``); ``microbench(pools, counts)``: the
    hooks' benchmarks, the pool kinds' too if asked, in situ for the kinds with events in
    ``counts``; ``echo``: said once (why a long run's check is not shorter);
    ``budget_s``: the check's (None: :func:`check_budget_s`)."""
    if status is not None:
        status("calibrating: counting the profiled run's events")
    prof = profiled_run(out)
    counts = prof.counts
    mb = microbench(bool(counts.get(POOL_TASK) or counts.get(POOL_CALL)), counts)
    startup = startup_cost_ns(rec, status)
    wall = float(run.get("duration_s") or 0.0)
    budget = check_budget_s(wall) if budget_s is None else budget_s
    bound = Bound(None)
    if wall > budget:  # a long run: checked on its first part, if it can be ended there
        bound = work_bound(prof, budget / (2 * BOUNDED_PAIRS))
        if bound.n is None and echo is not None:
            echo(f"the check runs the whole command again ({wall:.0f} s), not a "
                 f"~{budget:.0f} s part of it: {bound.why}")
    unlike = ""
    tally = work_tally(prof, float(run.get("cpu_s") or 0.0)) \
        if bound.n is None and max_progress is None else None
    if bound.n is None:
        records, done = run_unrecorded(command, out, wall, max_progress, status, detail,
                                       budget_s, tally)
        checked, dirs = [], []
        unlike = unlike_work(tally, done) if tally is not None else ""
        if unlike and tally is not None:  # whole runs cannot check it: pairs ended early
            bound = common_bound(prof, tally, done, budget / 2)  # one pair, mid-run
            _set_aside(records, bound, unlike, echo)
    if bound.n is not None:
        pairs = run_bounded_pairs(command, out, rec, bound.n, budget, status, detail,
                                  bound.by, bound.unit)
        records = [RunRecord(p.unrecorded, p.directories[1], 0) for p in pairs]
        checked = [(p.profiled, p.installs_s) for p in pairs]
        dirs = [Path(p.directories[0]) for p in pairs]
        unlike = ""
    return model_calibration(command, mb or {}, startup.ns, startup.spread_ns, counts,
                             float(run.get("cpu_s", math.nan)),
                             float(run.get("command_wall_s",
                                           run.get("duration_s", math.nan))),
                             [r.sample for r in records], prof.installs_s,
                             [str(Path(r.directory).relative_to(out)) for r in records],
                             bound.n, checked, [str(d.relative_to(out)) for d in dirs],
                             startup.import_ns, bound.unit,
                             runs_import_rlscope=max_progress is not None,
                             root_imports_rlscope=bool(tally is not None and not checked
                                                       and prof.root_import),
                             unlike_work=unlike)
