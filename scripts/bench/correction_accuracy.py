"""How close does overhead correction get to an uninstrumented run? (issue 5)

For each workload: ``rls-prof --calibrate`` (the profiled run plus interleaved calibration
rounds), then compare the profiled run's total wall time, raw and corrected, with the
mean of the uninstrumented calibration runs. Per operation taking >= 10% of the run, the
corrected wall time of the fully instrumented run is compared with the corrected time in
the annotations-only runs (the lightest instrumentation that still sees operations).

    .venv/bin/python scripts/bench/correction_accuracy.py [--repetitions 3] [--only ppo]

The RESULT errors compare each configuration's fastest run (CPU time; other load on the
machine only slows runs down): min over rounds of (full run - its estimated overhead)
vs min of the uninstrumented runs. The table also shows the profiled run itself against
the uninstrumented mean, which is what `rls-analyze report` prints.

Last line: RESULT correction_error_median=<pct> correction_error_max=<pct>
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from rlscope.analysis import analyze
from rlscope.analysis.correction import apply_correction
from rlscope.calibration.file import FILE_NAME, read_calibration
from rlscope.trace.reader import read_trace

HERE = Path(__file__).resolve().parent
WORKLOAD = str(HERE / "workloads" / "sb3_fixed.py")
WORKLOADS = {  # name -> sb3_fixed.py arguments (fixed seeds and steps: identical work)
    "ppo-cartpole": ["ppo", "CartPole-v1", "4096"],
    "dqn-cartpole": ["dqn", "CartPole-v1", "6000"],
    "sac-pendulum": ["sac", "Pendulum-v1", "900"],
    "ppo-halfcheetah": ["ppo", "HalfCheetah-v5", "2048"],
}


def _has_mujoco() -> bool:
    try:
        import mujoco  # noqa: F401
    except ImportError:
        return False
    return True


def _ops(trace_dir: Path, cal) -> pd.Series:
    """Wall seconds per top-level operation of the root process, corrected."""
    a = analyze(apply_correction(read_trace(trace_dir), cal))
    ops = a.operations()
    ops = ops[(ops["pid"] == ops["pid"].iloc[0]) & (ops["depth"] == 0)]
    return ops.groupby("operation")["wall_s"].sum()


def measure(name: str, args: list[str], work: Path, repetitions: int) -> dict:
    out = work / name
    cmd = [sys.executable, "-m", "rlscope.cli.prof", "-o", str(out), "--force", "--calibrate",
           "--repetitions", str(repetitions), "-q", "--", sys.executable, WORKLOAD, *args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"{name}: rls-prof failed:\n{r.stderr[-2000:]}")
    cal = read_calibration(out / FILE_NAME)
    c = apply_correction(read_trace(out)).run["correction"]
    unin = c["uninstrumented_mean_s"]
    res = {"workload": name, "uninstrumented_s": unin,
           "uninstrumented_sd_s": c["uninstrumented_std_s"], "raw_s": c["raw_total_s"],
           "corrected_s": c["corrected_total_s"], "raw_error_pct": c["raw_error_pct"],
           "error_pct": c["error_pct"],
           "heldout_error_pct": cal.validation.get("median_error_pct", float("nan")),
           "costs": {k: round(v.per_event_ns) for k, v in cal.costs.items()}}
    # Fastest run of each configuration (other load only slows runs down): corrected
    # full vs uninstrumented.
    costs = {k: v.per_event_ns for k, v in cal.costs.items()}
    full_runs = [x for x in cal.runs if x["config"] == "full"]
    fast_full = min(x["seconds"] - sum(n * costs.get(k, 0) for k, n in x["counts"].items())
                    / 1e9 for x in full_runs)
    fast_unin = min(x["seconds"] for x in cal.runs if x["config"] == "uninstrumented")
    res["fastest_error_pct"] = 100.0 * (fast_full / fast_unin - 1.0)
    res["fastest_raw_error_pct"] = 100.0 * (min(x["seconds"] for x in full_runs)
                                            / fast_unin - 1.0)
    # Per operation: full run vs the annotations-only calibration runs (median).
    full = _ops(out, cal)
    ann_dirs = [out / x["directory"] for x in cal.runs if x["config"] == "annotations"]
    op_err = {}
    if ann_dirs and len(full):
        ann = pd.concat([_ops(d, cal) for d in ann_dirs], axis=1).median(axis=1)
        total = full.sum()
        for op, s in full.items():
            if op in ann and s >= 0.10 * total and ann[op] > 0:
                op_err[op] = 100.0 * (s / ann[op] - 1.0)
    res["op_error_pct"] = op_err
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--only", nargs="*", default=None, help="workload names")
    ap.add_argument("--keep", type=Path, default=None, help="keep traces in this directory")
    opts = ap.parse_args()
    names = opts.only or [n for n in WORKLOADS if n != "ppo-halfcheetah" or _has_mujoco()]
    work_ctx = tempfile.TemporaryDirectory(prefix="rlscope-acc-") if opts.keep is None \
        else None
    work = Path(work_ctx.name) if work_ctx else opts.keep
    results = []
    print("times: CPU seconds of the process tree (what calibration compares; see "
          "docs/overhead-correction.md)")
    print(f"{'workload':16} {'uninstr s':>14} {'raw s':>8} {'corrected s':>11} "
          f"{'raw err':>8} {'error':>7} {'held-out':>8}  per-op error (ops >= 10%)")
    for n in names:
        r = measure(n, WORKLOADS[n], work, opts.repetitions)
        results.append(r)
        ops = ", ".join(f"{k} {v:+.1f}%" for k, v in r["op_error_pct"].items()) or "-"
        print(f"{n:16} {r['uninstrumented_s']:7.3f}±{r['uninstrumented_sd_s']:.3f} "
              f"{r['raw_s']:8.3f} {r['corrected_s']:11.3f} {r['raw_error_pct']:+7.1f}% "
              f"{r['error_pct']:+6.1f}% {r['heldout_error_pct']:+7.1f}%  {ops}", flush=True)
        print(f"{'':16} fastest runs: raw {r['fastest_raw_error_pct']:+.1f}%, corrected "
              f"{r['fastest_error_pct']:+.1f}%; costs ns/event: {r['costs']}", flush=True)
    errs = np.abs([r["fastest_error_pct"] for r in results])
    op_errs = np.abs([v for r in results for v in r["op_error_pct"].values()] or [np.nan])
    print(f"per-operation error max {np.nanmax(op_errs):.2f}% over {len(op_errs)} operations")
    print(f"RESULT correction_error_median={np.median(errs):.2f} "
          f"correction_error_max={errs.max():.2f}")
    if work_ctx:
        work_ctx.cleanup()


if __name__ == "__main__":
    main()
