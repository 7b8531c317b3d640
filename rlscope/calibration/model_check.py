"""Calibration where forked chunk copies cannot work (multi-process runs): the per-event
cost model from the hooks' microbenchmark and a per-process start-up measurement, and
the profiled run checked against whole runs of the command without rlscope, as many as
fit a budget of about the profiled run's own length (at least one).

The check is like for like: the whole process tree's CPU time (rls-prof reaps the
command's orphans in both, see runner.run_once) against the profiled run's (run.json
``cpu_s``) less what the model removes from every process."""

from __future__ import annotations

import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rlscope.analysis.overhead.correction import install_ns, own_threads_ns
from rlscope.analysis.overhead.kinds import KINDS, POOL_CALL, POOL_TASK, count_process
from rlscope.analysis.overhead.model import Calibration
from rlscope.calibration.build import model_calibration
from rlscope.calibration.estimate import UNINSTRUMENTED, RunSample
from rlscope.calibration.runner import SUBDIR, RunRecord, Status, run_once
from rlscope.launch import child_env
from rlscope.launch.child_env import Recording
from rlscope.trace import format as fmt
from rlscope.trace.reader import read_process, trace_files

BUDGET_FACTOR = 1.0  # runs without rlscope: about this many times the profiled run's wall
# ... but a run of a few seconds is worth a few of them: a short fixed budget, so the
# calibration of a short run stays a few seconds (≤ 1x the run from this length on)
MIN_BUDGET_S = 5.0
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


def startup_cost_ns(rec: Recording, status: Status | None = None) -> tuple[float, float]:
    """(median, spread) of the CPU time a Python process spends on rlscope (import, start,
    interception set-up, final flush) beyond the standard-library modules it shares with
    the workload (:func:`shared_imports`): pairs of ``python -c "import <those>"`` with
    and without recording, in turns; the spread is half the interquartile range."""
    diffs = []
    shared = shared_imports(rec)
    cmd = [sys.executable, "-c", f"import {', '.join(shared)}" if shared else "pass"]
    with tempfile.TemporaryDirectory(prefix="rlscope-startup-") as tmp:
        for i in range(STARTUP_PAIRS):
            if status is not None:
                status("calibrating: timing rlscope's start-up in an empty process")
            d = Path(tmp) / str(i)
            prof = child_env.profiled(Recording(str(d / "trace"), rec.recorder,
                                                intercept=rec.intercept, cuda=False))
            _w, with_s, rc1 = run_once(cmd, prof, d / "with", 60.0)
            _w, without_s, rc2 = run_once(cmd, child_env.uninstrumented(), d / "without",
                                          60.0)
            if rc1 == 0 and rc2 == 0:
                diffs.append((with_s - without_s) * 1e9)
    if not diffs:
        return math.nan, math.nan
    q = statistics.quantiles(diffs, n=4) if len(diffs) > 1 else [diffs[0]] * 3
    return max(statistics.median(diffs), 0.0), (q[2] - q[0]) / 2


def run_unrecorded(command: list[str], out: Path, profiled_wall_s: float,
                   max_progress: int | None, status: Status | None = None,
                   detail: Callable[[str], None] | None = None) -> list[RunRecord]:
    """Runs of the command without rlscope until the budget is spent (at least one)."""
    budget = max(BUDGET_FACTOR * profiled_wall_s, MIN_BUDGET_S)
    timeout = max(4 * profiled_wall_s, 120.0)
    records: list[RunRecord] = []
    t0 = time.monotonic()
    while len(records) < MAX_RUNS:
        spent = time.monotonic() - t0
        if records and spent + spent / len(records) > budget:
            break
        d = out / SUBDIR / f"{len(records)}-{UNINSTRUMENTED}"
        text = (f"calibrating: run {len(records) + 1} of the command without rlscope "
                f"(checks the correction; about {profiled_wall_s:.0f} s each)")

        def tick(text: str = text) -> None:
            if status is not None:
                status(text)
        tick()
        wall, cpu, rc = run_once(command, child_env.uninstrumented(max_progress), d,
                                 timeout, tick)
        if rc != 0:
            from rlscope.errors import RLScopeError

            raise RLScopeError(f"the run without rlscope exited with status {rc}; see "
                               f"{d / 'output.log'}")
        records.append(RunRecord(RunSample(UNINSTRUMENTED, len(records), cpu, {}, wall),
                                 str(d), rc))
        if detail is not None:
            detail(f"run without rlscope {len(records)}: {cpu:.2f} s CPU (process tree), "
                   f"{wall:.2f} s wall")
    return records


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


def profiled_counts(out: Path) -> tuple[dict[str, int], float]:
    """The profiled run's events by cost kind (every process), and the CPU seconds its
    processes recorded for interception set-up and rlscope's own threads."""
    counts = dict.fromkeys(KINDS, 0)
    extra = 0.0
    _d, _run, files = trace_files(out)
    for f in files:
        if f.name.startswith("cuda."):
            continue
        p = read_process(f)
        for k, n in count_process(p).items():
            counts[k] += n
        extra += (install_ns(p) + own_threads_ns(p)) / 1e9
    return counts, extra


def calibrate_by_model(command: list[str], out: Path, rec: Recording, run: dict,
                       microbench: Callable[[bool, dict[str, int]],
                                            dict[str, dict[str, float]] | None],
                       max_progress: int | None, status: Status | None = None,
                       detail: Callable[[str], None] | None = None) -> Calibration:
    """The cost model (microbenchmarks) and its check on whole runs; ``run``: the
    profiled run's run.json (its ``cpu_s`` and ``duration_s``);
    ``microbench(pools, counts)``: the hooks' benchmarks, the pool kinds' too if asked,
    in situ for the kinds with events in ``counts``."""
    if status is not None:
        status("calibrating: counting the profiled run's events")
    counts, installs = profiled_counts(out)
    mb = microbench(bool(counts.get(POOL_TASK) or counts.get(POOL_CALL)), counts)
    startup, startup_err = startup_cost_ns(rec, status)
    records = run_unrecorded(command, out, float(run.get("duration_s") or 0.0),
                             max_progress, status, detail)
    return model_calibration(command, mb or {}, startup, startup_err, counts,
                             float(run.get("cpu_s", math.nan)),
                             float(run.get("duration_s", math.nan)),
                             [r.sample for r in records], installs,
                             [str(Path(r.directory).relative_to(out)) for r in records])
