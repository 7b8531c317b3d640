"""Bounded traces (rls-prof --trace-budget; docs/trace-format.md): disk, CPU and
inflation against full recording, side by side; the acceptance run; a simulated day.

    python scripts/bench/trace_budget.py [--rounds 3] [--seconds 10] [--budget 20MB]
        [--long 90] [--day 24]

- Side by side: interleaved rounds of an event-dense loop (tests/integration/workloads/
  dense_loop.py: ``step > inner`` operations, ~4 events an iteration) for --seconds each,
  uninstrumented, under ``--trace-budget none`` (every event, as before budgets) and
  under ``--trace-budget BUDGET``. Per configuration, medians over rounds (min-max in
  brackets): the loop's iterations/s, its inflation (uninstrumented rate / rate), CPU
  per iteration of the process tree (run.json cpu_s; the uninstrumented run's from
  getrusage) relative to uninstrumented, and the trace files' growth in MB per hour over
  the last 40% of their growth (under a budget: once the start window is over, before the
  first periodic window at 30 s: what the aggregates cost).
- --long S: one S-second run under --trace-budget BUDGET (the issue's acceptance: 90 s,
  20MB): directory size, the report's call counts against the loop's own count, and the
  correction with a calibration of known costs (annotation 200 ns) against the events.
- --day H: bounded_day.py writes the trace an H-hour run leaves under a 1 GB budget;
  rls-analyze report on it, wall time and peak memory (max RSS), call counts exact.

Last line: RESULT key=value ...
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bounded_day import write_day

from rlscope.analysis.overhead.model import FILE_NAME, Calibration, KindCost, write_calibration
from rlscope.cli.prof import parse_size

HERE = Path(__file__).resolve().parent
LOOP = HERE.parent.parent / "tests" / "integration" / "workloads" / "dense_loop.py"


def _dir_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


def _trace_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.glob("python.*.rlscope"))


def _late_rate(sizes: list[tuple[float, int]], final: int) -> float:
    """Bytes/s of the trace files over the last 40% of their growth (from the first byte
    to the final size): under a budget, once the start window is over."""
    grown = [(t, b) for t, b in sizes if b > 0]
    if not grown or final <= 0:
        return 0.0
    t_end = next((t for t, b in grown if b >= final), grown[-1][0])
    lo = grown[0][0] + 0.6 * (t_end - grown[0][0])
    late = [(t, b) for t, b in grown if lo <= t <= t_end]
    if len(late) < 2 or late[-1][0] <= late[0][0]:
        return 0.0
    return (late[-1][1] - late[0][1]) / (late[-1][0] - late[0][0])


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_loop(cfg: str, seconds: float, budget: str, work: Path) -> dict:
    """One run of the loop: iterations, its seconds, process-tree CPU s, directory bytes."""
    out, result = work / f"{cfg}-{time.monotonic_ns()}", work / "loop.json"
    loop = [sys.executable, str(LOOP), str(seconds), str(result)]
    cpu0 = _children_cpu()
    sizes: list[tuple[float, int]] = []
    if cfg == "plain":
        subprocess.run(loop, check=True)
        cpu = _children_cpu() - cpu0
        size = 0
    else:
        b = "none" if cfg == "full" else budget
        proc = subprocess.Popen([sys.executable, "-m", "rlscope.cli.prof", "-o", str(out),
                                 "-q", "--trace-budget", b, "--", *loop])
        # (s, bytes) while it runs: the growth rate over its second half
        t0 = time.monotonic()
        while proc.poll() is None:
            if out.exists():
                sizes.append((time.monotonic() - t0, _trace_bytes(out)))
            time.sleep(0.25)
        assert proc.returncode == 0
        cpu = json.loads((out / "run.json").read_text()).get("cpu_s") or \
            (_children_cpu() - cpu0)
        size = _dir_bytes(out)
    r = json.loads(result.read_text())
    rate = _late_rate(sizes, _trace_bytes(out) if sizes else 0)
    return {"iterations": r["iterations"], "seconds": r["seconds"], "cpu_s": cpu,
            "bytes": size, "out": out, "late_bytes_per_s": rate}


def _med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3g} [{min(xs):.3g}-{max(xs):.3g}]"


def side_by_side(rounds: int, seconds: float, budget: str, work: Path) -> dict:
    cfgs = ["plain", "full", "bounded"]
    runs: dict[str, list[dict]] = {c: [] for c in cfgs}
    for r in range(rounds):
        for c in cfgs[r % 3:] + cfgs[:r % 3]:  # rotated: no configuration always first
            runs[c].append(run_loop(c, seconds, budget, work))
    out: dict[str, float] = {}
    print(f"{'config':<9} {'iter/s':>26} {'inflation':>24} {'CPU/iter vs plain':>24} "
          f"{'MB per hour (late)':>24}")
    for c in cfgs:
        rate = [x["iterations"] / x["seconds"] for x in runs[c]]
        infl = [p["iterations"] / p["seconds"] / (x["iterations"] / x["seconds"])
                for p, x in zip(runs["plain"], runs[c], strict=True)]
        cpu = [(x["cpu_s"] / x["iterations"]) / (p["cpu_s"] / p["iterations"])
               for p, x in zip(runs["plain"], runs[c], strict=True)]
        mbh = [x["late_bytes_per_s"] * 3600 / 1e6 for x in runs[c]]
        print(f"{c:<9} {_med(rate):>26} {_med(infl):>24} {_med(cpu):>24} {_med(mbh):>24}")
        out[f"{c}_inflation"] = statistics.median(infl)
        out[f"{c}_cpu"] = statistics.median(cpu)
        out[f"{c}_mb_per_h"] = statistics.median(mbh)
    return out


def _report(d: Path) -> tuple[dict, float, float]:
    """rls-analyze report --format json: (report, wall s, max RSS of the analysis MB)."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "rlscope.cli.analyze", "report", str(d),
                        "--format", "json"], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the largest child
    return json.loads(p.stdout), wall, rss


def _calls(rep: dict, op: str) -> int:
    return sum(int(o["calls"]) for o in rep["operations"] if o["operation"] == op)


def long_run(seconds: float, budget: str, work: Path) -> dict:
    r = run_loop("bounded", seconds, budget, work)
    d, n = r["out"], r["iterations"]
    rep, wall, _ = _report(d)
    cost = KindCost(200.0, 100.0, math.nan, "runs")
    write_calibration(Calibration([], {"annotation": cost}), d / FILE_NAME)
    corr = _report(d)[0]["run"]["correction"]
    removed = corr["removed_s"] / (corr.get("speed_scale") or 1.0)
    expected = (2 * n + 1) * 200e-9
    res = {"long_s": r["seconds"], "long_bytes": r["bytes"], "long_budget": parse_size(budget),
           "long_iterations": n, "long_step_calls": _calls(rep, "step"),
           "long_inner_calls": _calls(rep, "step > inner"), "long_report_s": wall,
           "long_removed_s": removed, "long_expected_removed_s": expected}
    print(json.dumps(res))
    return res


def day(hours: float, work: Path) -> dict:
    d = work / "day"
    t0 = time.perf_counter()
    info = write_day(d, hours, 1_000_000_000)
    print(f"wrote {hours} h in {time.perf_counter() - t0:.0f} s: " + json.dumps(info))
    rep, wall, rss = _report(d)
    calls = {op: _calls(rep, op) for op in info["operation_calls"]}
    res = {"day_hours": hours, "day_bytes": info["bytes"], "day_full_events": info["full_events"],
           "day_detail_events": info["detail_events"], "day_report_s": wall,
           "day_report_rss_mb": rss, "day_calls_exact": calls == info["operation_calls"]}
    print(json.dumps(res))
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--budget", default="20MB")
    ap.add_argument("--long", type=float, default=0.0, help="seconds of the acceptance run")
    ap.add_argument("--day", type=float, default=0.0, help="hours of the simulated run")
    ap.add_argument("--skip-side-by-side", action="store_true")
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    res: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="trace_budget.") as tmp:
        work = Path(tmp)
        if not a.skip_side_by_side:
            res.update(side_by_side(a.rounds, a.seconds, a.budget, work))
        if a.long:
            res.update(long_run(a.long, a.budget, work))
        if a.day:
            res.update(day(a.day, work))
    print("RESULT " + " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                               for k, v in res.items()))


if __name__ == "__main__":
    main()
