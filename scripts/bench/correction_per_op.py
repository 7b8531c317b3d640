"""Per-operation ground truth for overhead correction (issue 22).

Workloads whose operations time themselves with perf_counter
(scripts/bench/workloads/selftimed.py): an uninstrumented run gives each operation's true
time. Each workload is calibrated once (``rls-prof --calibrate``, the mode rls-prof picks),
then rounds alternate an uninstrumented run and a profiled run reusing that calibration
(``--calibration``). Per operation of the main process: raw error (the profiled run's
operation time, uncorrected, over the same round's truth) and corrected error (the
calibration's costs removed, whether or not the report would withhold them); medians over
the rounds and their spread (min..max). "total" is the sum of the operations.

    .venv/bin/python scripts/bench/correction_per_op.py [--rounds 3] [--only cartpole]

Last line: RESULT per_op_raw_abs_median=<pct> per_op_corrected_abs_median=<pct>
worse_than_raw=<n> (operations >= 5% of their run whose corrected error is further from
the truth than raw by more than the rounds' spread)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from rlscope.analysis import analyze
from rlscope.analysis.overhead.applied import scaled_costs, withheld_reason
from rlscope.analysis.overhead.correction import correct_trace
from rlscope.analysis.overhead.model import read_calibration
from rlscope.trace.reader import read_trace

HERE = Path(__file__).resolve().parent
WORKLOAD = str(HERE / "workloads" / "selftimed.py")
WORKLOADS = {"cartpole": ["cartpole", "3000"], "dqn": ["dqn", "2000"], "pool": ["pool", "20"]}
ENV = {"OMP_NUM_THREADS": "1"}


def _run(cmd: list[str]) -> None:
    import os

    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, **ENV})


def _ops(directory: Path, costs: dict | None) -> dict[str, float]:
    """Main process: wall seconds of each top-level operation."""
    trace = read_trace(directory)
    if costs is not None:
        trace, _ = correct_trace(trace, costs)
    ops = analyze(trace).operations()
    main = trace.processes[0].pid
    out: dict[str, float] = {}
    for r in ops.itertuples(index=False):
        path = str(r.operation)
        if int(r.pid) != main or path.startswith("(") or " > " in path:
            continue
        out[path] = out.get(path, 0.0) + float(r.wall_s)
    return out


def bench(name: str, args: list[str], rounds: int, tmp: Path) -> list[dict]:
    py = sys.executable
    cal_dir = tmp / f"{name}-cal"
    _run([py, "-m", "rlscope.cli.prof", "-q", "--force", "-o", str(cal_dir), "--calibrate",
          "--", py, WORKLOAD, *args, str(tmp / "cal.json")])
    cal = read_calibration(cal_dir / "calibration.json")
    rows: dict[str, list[tuple[float, float]]] = {}
    share: dict[str, list[float]] = {}
    for r in range(rounds):
        truth_file = tmp / f"{name}-{r}-truth.json"
        _run([py, WORKLOAD, *args, str(truth_file)])
        truth = json.loads(truth_file.read_text())
        d = tmp / f"{name}-{r}"
        _run([py, "-m", "rlscope.cli.prof", "-q", "--force", "--no-cost-model", "-o", str(d),
              "--calibration", str(cal_dir / "calibration.json"), "--",
              py, WORKLOAD, *args, str(tmp / "prof.json")])
        raw = _ops(d, None)
        costs, _scale = scaled_costs(cal, None)
        corr = _ops(d, costs)
        raw["total"], corr["total"] = sum(raw.values()), sum(corr.values())
        truth["total"] = sum(truth.values())
        for op, tv in truth.items():
            if op in raw and tv > 0:
                rows.setdefault(op, []).append((100 * (raw[op] / tv - 1),
                                                100 * (corr[op] / tv - 1)))
                share.setdefault(op, []).append(tv / truth["total"])
    out = []
    for op, v in rows.items():
        a = np.array(v)
        out.append({"workload": name, "mode": cal.mode, "operation": op,
                    "share": float(np.median(share[op])),
                    "raw_med": float(np.median(a[:, 0])), "raw_lo": float(a[:, 0].min()),
                    "raw_hi": float(a[:, 0].max()),
                    "corr_med": float(np.median(a[:, 1])), "corr_lo": float(a[:, 1].min()),
                    "corr_hi": float(a[:, 1].max()), "rounds": len(a),
                    "withheld": bool(withheld_reason(cal))})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", action="append")
    a = ap.parse_args()
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="rlscope-perop-") as t:
        for name, args in WORKLOADS.items():
            if a.only and name not in a.only:
                continue
            results += bench(name, args, a.rounds, Path(t))
            print(f"# {name} done", file=sys.stderr, flush=True)
    print("| workload (mode) | operation | share | raw error % (median, min..max) | "
          "corrected error % (median, min..max) |")
    print("|---|---|---|---|---|")
    for r in results:
        print(f"| {r['workload']} ({r['mode']}{', withheld' if r['withheld'] else ''}) | "
              f"{r['operation']} | {100 * r['share']:.0f}% | {r['raw_med']:+.1f} "
              f"({r['raw_lo']:+.1f}..{r['raw_hi']:+.1f}) | {r['corr_med']:+.1f} "
              f"({r['corr_lo']:+.1f}..{r['corr_hi']:+.1f}) |")
    big = [r for r in results if r["share"] >= 0.05]
    worse = sum(abs(r["corr_med"]) > abs(r["raw_med"]) + (r["raw_hi"] - r["raw_lo"])
                for r in big)
    print(f"RESULT per_op_raw_abs_median={np.median([abs(r['raw_med']) for r in big]):.2f} "
          f"per_op_corrected_abs_median={np.median([abs(r['corr_med']) for r in big]):.2f} "
          f"worse_than_raw={worse}")


if __name__ == "__main__":
    main()
