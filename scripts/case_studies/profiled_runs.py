"""What the framework case studies (dqn_frameworks.py, vector_cartpole.py) share:
installing their extras, the one-thread environment, profiled runs under rls-prof,
``rls-analyze compare``, and the numbers each run's trace holds.

The drivers run with any Python: without the extras they run scripts/setup.sh and
re-execute themselves with the project's virtual environment."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("RLSCOPE_VENV", REPO / ".venv"))
if not VENV.is_absolute():
    VENV = REPO / VENV

# One intra-op thread in every framework: the machine is shared, and two threads made a
# run swing by up to 10x (docs/case-studies/*.md state it).
THREAD_ENV = {
    "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
    "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
}


def ensure_environment(extras: str, modules: Sequence[str], setup: bool) -> None:
    """Run under the project's venv with ``modules`` importable: install ``extras`` with
    scripts/setup.sh when they are missing (``setup``), then re-execute this script with
    the venv's Python if another one runs it."""
    py = VENV / "bin" / "python"
    probe = "import rlscope._native, " + ", ".join(modules)
    ok = py.exists() and subprocess.run([str(py), "-c", probe], capture_output=True,
                                        env=dict(os.environ, **THREAD_ENV)).returncode == 0
    if not ok:
        if not setup:
            sys.exit(f"{VENV} lacks {', '.join(modules)}: run scripts/setup.sh {extras} "
                     "(or leave out --no-setup)")
        print(f"[case-study] installing extras {extras} (scripts/setup.sh)", flush=True)
        subprocess.run([str(REPO / "scripts" / "setup.sh"), extras], check=True)
    if Path(sys.prefix).resolve() != VENV.resolve():
        os.execv(str(py), [str(py), *sys.argv])
    os.environ.update(THREAD_ENV)


WORKLOAD_OUT = "workload.out"  # the workload's stdout, kept in its run directory


def earlier_run(out: Path) -> str:
    """The stdout a run directory's workload printed (``--reanalyze``)."""
    try:
        return (out / WORKLOAD_OUT).read_text()
    except OSError:
        sys.exit(f"{out} holds no earlier run ({WORKLOAD_OUT} missing): run without "
                 "--reanalyze, or with the --out, sizes and --reps of the earlier run")


def rls_prof(out: Path, command: Sequence[str], calibrate: Sequence[str] | None = None,
             calibration: Path | None = None, timeout: float = 1800) -> str:
    """Run ``command`` under rls-prof into ``out``; its stdout. ``calibrate``: calibrate
    (by chunks) with these extra options; ``calibration``: reuse that calibration. Exits
    on failure with the end of rls-prof's output."""
    args = [sys.executable, "-m", "rlscope.cli.prof", "-o", str(out), "--force"]
    if calibrate is not None:
        args += ["--calibrate", *calibrate]
    elif calibration is not None:
        args += ["--calibration", str(calibration)]
    else:
        args.append("-q")
    r = subprocess.run([*args, "--", *command], capture_output=True, text=True,
                       timeout=timeout, cwd=REPO)
    if r.returncode != 0:
        sys.exit(f"rls-prof -o {out} failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    (out / WORKLOAD_OUT).write_text(r.stdout)  # for --reanalyze
    if calibrate is not None:  # what the calibration found, as rls-prof said it
        for line in r.stderr.splitlines():
            if "calibrat" in line or "held-out" in line or " per " in line:
                print("  " + line, flush=True)
    return r.stdout


def describe_calibration(path: Path) -> str:
    """One line: the per-event costs a calibration.json removes and its held-out check."""
    import json

    d = json.loads(path.read_text())
    costs = "; ".join(f"{k} {v['per_event_ns']:.0f} ns ({v['source']})"
                      for k, v in d.get("costs", {}).items())
    v = d.get("validation", {})
    check = (f"held-out check {v['total_error_pct']:+.1f}% corrected, "
             f"{v['raw_total_error_pct']:+.1f}% raw, on {len(v.get('validation_rounds', []))} "
             f"{d.get('mode', '')}" if "total_error_pct" in v else "no held-out check")
    return f"calibration {path}: {costs}; {check}"


def rls_analyze(*args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "rlscope.cli.analyze", *args],
                       capture_output=True, text=True, cwd=REPO)
    if r.returncode != 0:
        sys.exit(f"rls-analyze {' '.join(args)} failed:\n{r.stderr[-3000:]}")
    return r.stdout


def workload_line(stdout: str, prefix: str) -> dict[str, str]:
    """The ``prefix: key=value ...`` line a workload printed last."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith(prefix + ":")]
    if not lines:
        sys.exit(f"the workload printed no '{prefix}:' line:\n{stdout[-2000:]}")
    return dict(kv.split("=", 1) for kv in lines[-1].split()[1:])


@dataclass
class RunNumbers:
    """One profiled run's numbers in one phase (overhead-corrected when the run
    directory holds a calibration), per operation, plus the raw backend calls by name."""

    timesteps: int
    ops: dict[str, dict[str, float]]  # operation path in the phase -> self_s, python_s, ...
    outside: dict[str, float]  # operation path outside the phase -> self seconds
    calls_by_name: Counter[str] = field(default_factory=Counter)
    seconds_by_name: Counter[str] = field(default_factory=Counter)

    def total(self, col: str, ops: Sequence[str] | None = None) -> float:
        return sum(v[col] for k, v in self.ops.items() if ops is None or k in ops)

    def per_step(self, col: str, steps: int, ops: Sequence[str] | None = None) -> float:
        return self.total(col, ops) / steps


def run_numbers(run_dir: Path, phase: str) -> RunNumbers:
    import rlscope.analysis
    from rlscope.analysis.compare import timesteps

    a = rlscope.analysis.load(run_dir)
    df = a.operations()
    ops: dict[str, dict[str, float]] = {}
    outside: dict[str, float] = {}
    cols = ["calls", "self_s", "python_s", "backend_s", "backend_calls"]
    for _, row in df.iterrows():
        if row["phase"] != phase:
            outside[row["operation"]] = outside.get(row["operation"], 0.0) + row["self_s"]
            continue
        d = ops.setdefault(row["operation"], dict.fromkeys(cols, 0.0))
        for c in cols:
            d[c] += float(row[c])
    calls, secs = backend_calls_by_name(run_dir, phase)
    return RunNumbers(timesteps(a), ops, outside, calls, secs)


def backend_calls_by_name(run_dir: Path, phase: str) -> tuple[Counter[str], Counter[str]]:
    """Outermost backend calls of the main thread inside ``phase``, by name: how many and
    their raw (uncorrected) seconds."""
    import numpy as np

    from rlscope.trace import format as F
    from rlscope.trace.reader import read_trace

    calls: Counter[str] = Counter()
    secs: Counter[str] = Counter()
    for p in read_trace(run_dir).processes:
        ev = p.events
        names = np.asarray(p.strings, dtype=object)
        main = ev.thread == 0
        ph = np.flatnonzero(main & ((ev.kind == F.PHASE_BEGIN) | (ev.kind == F.PHASE_END))
                            & (names[ev.name] == phase))
        if len(ph) < 2:
            continue
        lo, hi = ph[0], ph[-1]
        sel = np.arange(lo, hi + 1)
        sel = sel[main[sel]]
        kinds = ev.kind[sel]
        begins = sel[kinds == F.BACKEND_CALL_BEGIN]
        ends = sel[kinds == F.BACKEND_CALL_END]
        n = min(len(begins), len(ends))
        ids = ev.name[begins[:n]]
        dur = (ev.time_ns[ends[:n]] - ev.time_ns[begins[:n]]) / 1e9
        for i in np.unique(ids):
            calls[str(names[i])] += int((ids == i).sum())
            secs[str(names[i])] += float(dur[ids == i].sum())
    return calls, secs


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    m = statistics.fmean(values)
    return m, (statistics.stdev(values) if len(values) > 1 else float("nan"))


def fmt(values: Sequence[float], scale: float = 1.0, digits: int = 1) -> str:
    """``mean ±sd`` of ``values`` × ``scale``."""
    m, s = mean_sd([v * scale for v in values])
    return f"{m:.{digits}f}" + ("" if s != s else f" ±{s:.{digits}f}")


class Clock:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def __str__(self) -> str:
        return f"{time.perf_counter() - self.t0:.0f} s"
