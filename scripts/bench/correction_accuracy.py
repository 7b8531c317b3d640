"""How close does overhead correction get to an uninstrumented run? (issue 5)

For each workload, ``rls-prof --calibrate`` (paired chunks: every chunk of work is run in
forked copies of one process, uninstrumented and with each kind of book-keeping on,
taking turns on one CPU; docs/overhead-correction.md). Costs are estimated from the even
chunks; this script checks them on the odd (held-out) chunks:

- total: corrected instrumented time (main-thread CPU) vs the uninstrumented time of the
  same chunks, summed; raw (uncorrected) beside it;
- per operation (top-level operations taking >= 10% of the time): the corrected
  operation time of the fully instrumented copy vs the annotations-only copy of the same
  chunks (the lightest configuration that still sees operations; its own overhead is
  corrected too), read from their traces with the time the other copies ran removed;
  the time outside any operation is reported apart.
Held-out chunks where one copy was disturbed (raw excess far from the others': see
rlscope.calibration.estimate.outlier_rounds) are left out, as rls-prof does.

    .venv/bin/python scripts/bench/correction_accuracy.py [--chunks 40] [--only ppo-cartpole]

Last line: RESULT correction_error_median=<pct> correction_error_max=<pct>
(|total error| over the workloads.)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from rlscope.analysis import analyze
from rlscope.analysis.overhead.correction import correct_trace
from rlscope.analysis.overhead.model import FILE_NAME, Calibration, read_calibration
from rlscope.inprocess.chunk_copies import RESULTS
from rlscope.trace.reader import read_trace

HERE = Path(__file__).resolve().parent
WORKLOAD = str(HERE / "workloads" / "sb3_fixed.py")
WORKLOADS = {  # name -> sb3_fixed.py arguments (fixed seeds and steps: identical work)
    "ppo-cartpole": ["ppo", "CartPole-v1", "24576"],
    "dqn-cartpole": ["dqn", "CartPole-v1", "20000"],
    "sac-pendulum": ["sac", "Pendulum-v1", "3000"],
    "ppo-halfcheetah": ["ppo", "HalfCheetah-v5", "24576"],
}
OP_SHARE = 0.10
UNANNOTATED = "(unannotated)"  # time outside any operation, reported apart


def _has_mujoco() -> bool:
    try:
        import mujoco  # noqa: F401
    except ImportError:
        return False
    return True


def _without_gaps(times: np.ndarray, gaps: list[list[int]]) -> np.ndarray:
    """Trace times with the intervals the copy was stopped (others ran) cut out."""
    if not gaps:
        return times
    g = np.array(gaps, np.int64)
    cum = np.cumsum(g[:, 1] - g[:, 0])
    idx = np.searchsorted(g[:, 1], times, side="right")  # gaps that ended before t
    return times - np.where(idx > 0, cum[np.maximum(idx - 1, 0)], 0)


def op_seconds(trace_dir: Path, gaps: list[list[int]], cal: Calibration | None
                ) -> pd.Series:
    """Seconds per top-level operation of the copy's main process, corrected."""
    t = read_trace(trace_dir)
    procs = [dataclasses.replace(p, events=dataclasses.replace(
        p.events, time_ns=_without_gaps(p.events.time_ns, gaps))) for p in t.processes]
    t = dataclasses.replace(t, processes=procs)
    # The copies' own costs, unscaled (speed scaling is for the profiled run).
    t = correct_trace(t, cal)[0] if cal is not None else t
    ops = analyze(t).operations()
    ops = ops[(ops["pid"] == ops["pid"].iloc[0]) & (ops["depth"] == 0)]
    return ops.groupby("operation")["wall_s"].sum()


def measure(name: str, args: list[str], work: Path, chunks: int) -> dict:
    out = work / name
    cmd = [sys.executable, "-m", "rlscope.cli.prof", "-o", str(out), "--force", "--calibrate",
           "--chunks", str(chunks), "-q", "--", sys.executable, WORKLOAD, *args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"{name}: rls-prof failed:\n{r.stderr[-2000:]}")
    cal = read_calibration(out / FILE_NAME)
    if cal.mode != "chunks":
        raise SystemExit(f"{name}: calibrated by {cal.mode}, not chunks:\n{r.stderr[-2000:]}")
    v = cal.validation
    res = {"workload": name, "chunks": len(v["validation_rounds"]),
           "uninstrumented_s": v["uninstrumented_total_s"],
           "error_pct": v["total_error_pct"], "raw_error_pct": v["raw_total_error_pct"],
           "costs": {k: f"{c.per_event_ns:.0f}±{c.error_ns:.0f}" for k, c in cal.costs.items()}}
    # Per operation on the held-out chunks: full vs annotations-only copies.
    root = out / "calibration" / "chunks"
    rows = [json.loads(x) for x in (root / RESULTS).read_text().splitlines()]
    held = set(v["validation_rounds"])
    ann_cfg = "annotations"
    by = {(x["chunk"], x["config"]): x for x in rows if x["chunk"] in held}
    full_c, full_raw, ann_c = [], [], []
    for c in sorted(held):
        f, a = by.get((c, "full")), by.get((c, ann_cfg))
        if f is None or a is None:
            continue
        full_c.append(op_seconds(root / f["directory"], f["gaps_ns"], cal))
        full_raw.append(op_seconds(root / f["directory"], f["gaps_ns"], None))
        ann_c.append(op_seconds(root / a["directory"], a["gaps_ns"], cal))
    op_err, op_raw = {}, {}
    if full_c:
        fc = pd.concat(full_c, axis=1).fillna(0).sum(axis=1)
        fr = pd.concat(full_raw, axis=1).fillna(0).sum(axis=1)
        ac = pd.concat(ann_c, axis=1).fillna(0).sum(axis=1)
        for op, s in ac.items():
            if s >= OP_SHARE * ac.sum() and op in fc:
                op_err[op] = 100.0 * (fc[op] / s - 1.0)
                op_raw[op] = 100.0 * (fr[op] / s - 1.0)
    res["op_error_pct"], res["op_raw_error_pct"] = op_err, op_raw
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=40)
    ap.add_argument("--only", nargs="*", default=None, help="workload names")
    ap.add_argument("--keep", type=Path, default=None, help="keep traces in this directory")
    opts = ap.parse_args()
    names = opts.only or [n for n in WORKLOADS if n != "ppo-halfcheetah" or _has_mujoco()]
    work_ctx = tempfile.TemporaryDirectory(prefix="rlscope-acc-") if opts.keep is None \
        else None
    work = Path(work_ctx.name) if work_ctx else opts.keep
    results = []
    print("held-out chunks; times: main-thread CPU seconds (docs/overhead-correction.md)")
    print(f"{'workload':16} {'chunks':>6} {'uninstr s':>9} {'raw err':>8} {'corrected':>9}  "
          "per-op error, raw -> corrected (ops >= 10%)")
    for n in names:
        r = measure(n, WORKLOADS[n], work, opts.chunks)
        results.append(r)
        ops = ", ".join(f"{k} {r['op_raw_error_pct'][k]:+.1f}% -> {v:+.1f}%"
                        for k, v in r["op_error_pct"].items() if k != UNANNOTATED) or "-"
        if UNANNOTATED in r["op_error_pct"]:
            ops += (f"; outside operations {r['op_raw_error_pct'][UNANNOTATED]:+.1f}% -> "
                    f"{r['op_error_pct'][UNANNOTATED]:+.1f}%")
        print(f"{n:16} {r['chunks']:6d} {r['uninstrumented_s']:9.3f} "
              f"{r['raw_error_pct']:+7.1f}% {r['error_pct']:+8.1f}%  {ops}", flush=True)
        print(f"{'':16} costs ns/event: {r['costs']}", flush=True)
    errs = np.abs([r["error_pct"] for r in results])
    op_errs = np.abs([v for r in results for k, v in r["op_error_pct"].items()
                      if k != UNANNOTATED] or [np.nan])
    out_errs = np.abs([r["op_error_pct"][UNANNOTATED] for r in results
                       if UNANNOTATED in r["op_error_pct"]] or [np.nan])
    print(f"per-operation error: max {np.nanmax(op_errs):.2f}%, median "
          f"{np.nanmedian(op_errs):.2f}% over {len(op_errs)} operations; time outside "
          f"operations: max {np.nanmax(out_errs):.2f}% over {len(out_errs)} workloads")
    print(f"RESULT correction_error_median={np.median(errs):.2f} "
          f"correction_error_max={errs.max():.2f}")
    if work_ctx:
        work_ctx.cleanup()


if __name__ == "__main__":
    main()
