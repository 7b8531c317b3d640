"""Per-operation ground truth for overhead correction (issue 22).

Workloads whose operations time themselves with perf_counter
(scripts/bench/workloads/selftimed.py): an uninstrumented copy of the work gives each
operation's true time. Two ways to get it beside a profiled one:

- **chunks** (one-process workloads: cartpole, mujoco, dqn): ``rls-prof --calibrate``
  by paired chunks. Each chunk of work runs in forked copies of one process taking 2 ms
  turns on one CPU (docs/overhead-correction.md), among them an uninstrumented copy and
  the fully recording one. Costs are estimated on the even chunks; on the odd (held-out)
  ones the uninstrumented copy's own perf_counter spans per operation (the time it was
  stopped for the other copies cut out) are the truth, and the full copy's trace (the
  same stops cut out) gives the raw and corrected operation times. Identical copies
  differ by ~0.5% here, whole runs by 10-25%.
- **runs** (multi-process workloads, the pool and SB3 on a SubprocVecEnv, whose workers a
  forked copy cannot share): calibrated once
  as rls-prof picks, then rounds of an uninstrumented run and a profiled run reusing the
  calibration; medians over the rounds and their spread (min..max). Whole runs of
  identical processes differ by ±10% here, more than what is measured.
- **blocks** (``--blocks N``: the same multi-process workloads): calibrated once, then N
  profiled runs in which every process of the run switches recording off and on by
  blocks (``SELFTIMED_BLOCKS=1``: pool or PPO iterations, on/off pairs); the block that
  did not record gives the truth, its neighbour that did the raw and corrected
  operation times (that block's trace session, corrected with the whole run's trace),
  the same processes and work moments apart. The Python stack sampler is off in these
  runs (it samples through every block). Errors of the pairs summed; spread: quartiles
  of the pairs' errors.

The truth of an operation is its self-timed spans plus, per span, one clock read and
the harness's own code between rlscope's stamps and its reads (``harness_glue_ns``,
measured once at start; ``--no-glue`` leaves it out). Per operation of the main process:
raw error (the profiled operation time, uncorrected, over the truth) and corrected
error (the calibration's costs removed, whether or not the report would withhold them).
"total" is the sum of the operations. For chunks the error is of the held-out chunks
summed; the spread is the per-chunk errors' quartiles.

    .venv/bin/python scripts/bench/correction_per_op.py [--chunks 24] [--rounds 3]
        [--blocks N] [--sampler HZ] [--only cartpole] [--no-glue]

``--sampler HZ``: every workload by blocks, the Python stack sampler on in the recorded
blocks (as rls-prof runs by default at 50 Hz; kinds.PY_SAMPLE corrects its stalls).

Last line: RESULT per_op_raw_abs_median=<pct> per_op_corrected_abs_median=<pct>
total_corrected_abs_median=<pct> worse_than_raw=<n> (operations >= 5% of their run
whose corrected error is further from the truth than raw by more than their spread)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from correction_accuracy import op_seconds

from rlscope.analysis import analyze
from rlscope.analysis.overhead.applied import scaled_costs, with_py_samples, withheld_reason
from rlscope.analysis.overhead.correction import correct_trace
from rlscope.analysis.overhead.model import read_calibration
from rlscope.calibration.estimate import UNINSTRUMENTED
from rlscope.inprocess.chunk_copies import RESULTS
from rlscope.trace.reader import read_trace

HERE = Path(__file__).resolve().parent
WORKLOAD = str(HERE / "workloads" / "selftimed.py")
WORKLOADS = {"cartpole": ["cartpole", "60000"], "mujoco": ["mujoco", "30000"],
             "dqn": ["dqn", "35000"], "pool": ["pool", "20"],
             "pool_short": ["pool_short", "2000"], "pool_torch": ["pool_torch", "40"],
             "sb3": ["sb3", "16384"]}
# a forked copy could not share their workers: whole runs
BY_RUNS = {"pool", "pool_short", "pool_torch", "sb3"}
# --blocks: (steps, iterations per block): blocks of ~0.1-1 s, 8-10 on/off pairs a run
BLOCKS = {"pool": ("400", 40), "pool_short": ("6000", 300), "pool_torch": ("240", 20),
          "sb3": ("16384", 1),
          # --sampler only (else calibrated by chunks)
          "cartpole": ("60000", 2000), "mujoco": ("30000", 1000), "dqn": ("35000", 1000)}
ENV = {"OMP_NUM_THREADS": "1"}


def harness_glue_ns(n: int = 5000) -> float:
    """The self-timing harness's own code between rlscope's stamps and its clock reads
    (selftimed's ``_Op``: the return from rlscope's ``__enter__`` and the attribute store
    before its first read, the call of ``__exit__`` after its last): code inside the
    operation, so part of the truth, that its spans miss. Recording here, in a tight loop:
    the median of (interval - span - one read) per operation, less what rlscope's own
    annotation puts between its stamps (an empty ``rlscope.operation`` interval, which
    the correction removes as the annotation's inside part). A lower bound of the glue
    inside a workload (colder there); 30-90 ns here."""
    import os

    sys.path.insert(0, str(HERE / "workloads"))
    os.environ.pop("SELFTIMED_BLOCKS", None)
    import selftimed

    import rlscope
    from rlscope.trace import format as fmt

    t = selftimed.Timer(None)
    op = t.op("glue")
    with tempfile.TemporaryDirectory() as d:
        rlscope.start(d)
        spans = np.empty(n)
        for i in range(n):
            before = op.sum_ns
            with op:
                pass
            spans[i] = op.sum_ns - before
        bare = rlscope.operation("bare")
        for _ in range(n):
            with bare:
                pass
        rlscope.stop()
        ev = read_trace(Path(d)).processes[0].events
    b = ev.time_ns[ev.kind == fmt.OPERATION_BEGIN].astype(np.float64)
    e = ev.time_ns[ev.kind == fmt.OPERATION_END].astype(np.float64)
    interval = e - b
    return float(np.median(interval[:n] - spans - t.read_ns) - np.median(interval[n:2 * n]))


GLUE_NS = 0.0  # harness_glue_ns(), measured once per run of the benchmark


def _run(cmd: list[str], **env: str) -> None:
    import os

    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, **ENV, **env})


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


def _say_costs(name: str, cal: Any) -> None:
    """The calibration's costs on one line of the log (where a figure far off would
    show: ns per event, where it came from, the part spread over time)."""
    parts = [f"{k} {c.per_event_ns:.0f}" + (f" (+{c.diffuse_ns:.0f} diffuse)"
                                             if c.diffuse_ns else "") +
             f" [{c.source.split(' ')[0]}]" for k, c in sorted(cal.costs.items())]
    v = cal.validation
    print(f"# {name} costs (ns): {', '.join(parts)}; held-out "
          f"{v.get('total_error_pct', float('nan')):+.2f}% corrected, "
          f"{v.get('raw_total_error_pct', float('nan')):+.2f}% raw", flush=True)


def bench(name: str, args: list[str], rounds: int, tmp: Path) -> list[dict]:
    py = sys.executable
    cal_dir = tmp / f"{name}-cal"
    _run([py, "-m", "rlscope.cli.prof", "-q", "--force", "-o", str(cal_dir), "--calibrate",
          "--", py, WORKLOAD, *args, str(tmp / "cal.json")])
    cal = read_calibration(cal_dir / "calibration.json")
    _say_costs(name, cal)
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


def _block_ops(trace: Any, pid: int) -> dict[int, dict[str, float]]:
    """Per recorded block: wall seconds of each top-level operation of the main process's
    session that recorded it."""
    out: dict[int, dict[str, float]] = {}
    for p in trace.processes:
        k = p.metadata.get("selftimed_block")
        if p.pid != pid or k is None:
            continue
        ops = analyze(dataclasses.replace(trace, processes=[p])).operations()
        ops = ops[(ops["depth"] == 0) & ~ops["operation"].str.startswith("(")]
        out[int(k)] = {str(o): float(w) for o, w in
                       ops.groupby("operation")["wall_s"].sum().items()}
    return out


def bench_blocks(name: str, args: list[str], runs: int, tmp: Path, sample_hz: float = 0.0
                 ) -> list[dict]:
    py = sys.executable
    steps, per_block = BLOCKS[name]
    args = [args[0], steps]
    # rls-prof's sampler would sample through every block, recorded or not: the workload
    # samples its recorded blocks itself (sample_hz).
    flags = ["--sample-python", "off"]
    cal_dir = tmp / f"{name}-cal"
    _run([py, "-m", "rlscope.cli.prof", "-q", "--force", *flags, "-o", str(cal_dir),
          "--calibrate", "--", py, WORKLOAD, *args, str(tmp / "cal.json")])
    cal = read_calibration(cal_dir / "calibration.json")
    _say_costs(name, cal)
    costs, _scale = scaled_costs(cal, None)
    per: dict[str, list[tuple[float, float, float]]] = {}  # op -> (truth, raw, corrected)
    for r in range(runs):
        d, res_file = tmp / f"{name}-blocks-{r}", tmp / f"{name}-blocks-{r}.json"
        _run([py, "-m", "rlscope.cli.prof", "-q", "--force", "--no-cost-model", *flags,
              "-o", str(d), "--calibration", str(cal_dir / "calibration.json"), "--",
              py, WORKLOAD, *args, str(res_file)], SELFTIMED_BLOCKS=str(per_block),
             SELFTIMED_SAMPLE_HZ=f"{sample_hz:g}")
        res = json.loads(res_file.read_text())
        trace = with_py_samples(read_trace(d))
        raw = _block_ops(trace, int(res["pid"]))
        corr = _block_ops(correct_trace(trace, costs)[0], int(res["pid"]))
        blocks = {int(b["block"]): b for b in res["blocks"]}
        for j in range(0, max(blocks) + 1, 2):
            if j not in blocks or j + 1 not in blocks or \
                    blocks[j]["on"] == blocks[j + 1]["on"]:
                continue
            on, off = (blocks[j], blocks[j + 1]) if blocks[j]["on"] else \
                (blocks[j + 1], blocks[j])
            k = int(on["block"])
            ops = [o for o, v in off["ops"].items() if v > 0 and o in raw.get(k, {})]
            # Each span plus one clock read and the harness's glue (as _truth).
            truth = {o: off["ops"][o] + off.get("n", {}).get(o, 0) *
                     (res.get("read_ns", 0.0) + GLUE_NS) / 1e9 for o in ops}
            for o in ops:
                per.setdefault(o, []).append((truth[o], raw[k][o], corr[k][o]))
            if ops:
                per.setdefault("total", []).append((sum(truth.values()),
                                                    sum(raw[k][o] for o in ops),
                                                    sum(corr[k][o] for o in ops)))
    if not per:
        raise SystemExit(f"{name}: no pair of blocks with both timings")
    mode = "blocks" if cal.mode == "model" else f"blocks, {cal.mode}"
    return _summary(name, f"{mode}, sampled" if sample_hz else mode, per,
                    bool(withheld_reason(cal)))


def _summary(name: str, mode: str, per: dict[str, list[tuple[float, float, float]]],
             withheld: bool) -> list[dict]:
    """Rows of the table from (truth, raw, corrected) seconds per pair or chunk: errors of
    the sums, spread the quartiles of the single errors."""
    grand = sum(v[0] for v in per["total"])
    out_rows = []
    for op, v in per.items():
        a = np.array(v)
        t, r, c = a.sum(axis=0)
        re, ce = 100 * (a[:, 1] / a[:, 0] - 1), 100 * (a[:, 2] / a[:, 0] - 1)
        out_rows.append({"workload": name, "mode": mode, "operation": op,
                         "share": float(t / grand), "raw_med": _err(r, t),
                         "raw_lo": float(np.percentile(re, 25)),
                         "raw_hi": float(np.percentile(re, 75)),
                         "corr_med": _err(c, t), "corr_lo": float(np.percentile(ce, 25)),
                         "corr_hi": float(np.percentile(ce, 75)), "rounds": len(a),
                         "withheld": withheld})
    return out_rows


def _overlap_ns(spans: list[list[int]], gaps: list[list[int]]) -> int:
    """Nanoseconds of ``spans`` that fall inside ``gaps`` (both [start, end] pairs)."""
    if not spans or not gaps:
        return 0
    s, g = np.array(spans, np.int64), np.array(gaps, np.int64)
    lo = np.maximum(s[:, None, 0], g[None, :, 0])
    hi = np.minimum(s[:, None, 1], g[None, :, 1])
    return int(np.clip(hi - lo, 0, None).sum())


def _truth(log: Path, gaps: list[list[int]]) -> dict[str, float]:
    """A copy's self-timed seconds per operation over its chunk, its stops cut out; each
    span plus one clock read (the span lacks the halves of its two reads) and the
    harness's glue (GLUE_NS)."""
    out: dict[str, float] = {}
    for line in log.read_text().splitlines():
        data = json.loads(line)
        for op, v in data["ops"].items():
            if v["n"]:
                out[op] = out.get(op, 0.0) + (v["sum_ns"] - _overlap_ns(v["long"], gaps)
                                              + v["n"] * (data["read_ns"] + GLUE_NS)) / 1e9
    return out


def _err(x: float, truth: float) -> float:
    return 100.0 * (x / truth - 1.0)


def bench_chunks(name: str, args: list[str], chunks: int, tmp: Path) -> list[dict]:
    py = sys.executable
    out, log = tmp / f"{name}-chunks", tmp / f"{name}-log"
    log.mkdir()
    _run([py, "-m", "rlscope.cli.prof", "-q", "--force", "-o", str(out), "--calibrate",
          "--chunks", str(chunks), "--", py, WORKLOAD, *args, str(tmp / "prof.json"),
          str(log)])
    cal = read_calibration(out / "calibration.json")
    _say_costs(name, cal)
    if cal.mode != "chunks":
        raise SystemExit(f"{name}: calibrated by {cal.mode}, not by chunks")
    root = out / "calibration" / "chunks"
    rows = [json.loads(x) for x in (root / RESULTS).read_text().splitlines()]
    by = {(x["chunk"], x["config"]): x for x in rows}
    per: dict[str, list[tuple[float, float, float]]] = {}  # op -> (truth, raw, corrected)
    for c in sorted(set(cal.validation["validation_rounds"])):
        u, f = by.get((c, UNINSTRUMENTED)), by.get((c, "full"))
        if u is None or f is None or not (log / f"{u['pid']}.jsonl").exists():
            continue
        truth = _truth(log / f"{u['pid']}.jsonl", u["gaps_ns"])
        raw = op_seconds(root / f["directory"], f["gaps_ns"], None)
        corr = op_seconds(root / f["directory"], f["gaps_ns"], cal)
        for op, tv in truth.items():
            if op in raw.index:
                per.setdefault(op, []).append((tv, float(raw[op]), float(corr[op])))
        ops = [op for op in truth if op in raw.index]
        per.setdefault("total", []).append((sum(truth[o] for o in ops),
                                            sum(float(raw[o]) for o in ops),
                                            sum(float(corr[o]) for o in ops)))
    if not per:
        raise SystemExit(f"{name}: no held-out chunk with both copies' timings")
    return _summary(name, cal.mode, per, bool(withheld_reason(cal)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3, help="rounds of whole runs (pool)")
    ap.add_argument("--chunks", type=int, default=24, help="chunks calibrated (others)")
    ap.add_argument("--blocks", type=int, default=0,
                    help="multi-process workloads: N runs switching recording by blocks "
                         "instead of whole runs")
    ap.add_argument("--sampler", type=float, default=0.0, metavar="HZ",
                    help="every workload by blocks (--blocks runs, default 4), the Python "
                         "stack sampler on in the recorded blocks at HZ (rls-prof's "
                         "default: 50)")
    ap.add_argument("--only", action="append")
    ap.add_argument("--no-glue", action="store_true",
                    help="leave the harness's glue out of the truth (as before 2026-11-29)")
    a = ap.parse_args()
    if a.sampler and not a.blocks:
        a.blocks = 4
    global GLUE_NS
    GLUE_NS = 0.0 if a.no_glue else max(harness_glue_ns(), 0.0)
    print(f"# harness glue: {GLUE_NS:.0f} ns per self-timed operation, added to each "
          "truth", file=sys.stderr, flush=True)
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="rlscope-perop-") as t:
        for name, args in WORKLOADS.items():
            if a.only and name not in a.only:
                continue
            if (name in BY_RUNS and a.blocks) or a.sampler:
                results += bench_blocks(name, args, a.blocks, Path(t), a.sampler)
            elif name in BY_RUNS:
                results += bench(name, args, a.rounds, Path(t))
            else:
                results += bench_chunks(name, args, a.chunks, Path(t))
            print(f"# {name} done", file=sys.stderr, flush=True)
    print("| workload (mode) | operation | share | raw error % (spread) | "
          "corrected error % (spread) | chunks or rounds |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['workload']} ({r['mode']}{', withheld' if r['withheld'] else ''}) | "
              f"{r['operation']} | {100 * r['share']:.0f}% | {r['raw_med']:+.1f} "
              f"({r['raw_lo']:+.1f}..{r['raw_hi']:+.1f}) | {r['corr_med']:+.1f} "
              f"({r['corr_lo']:+.1f}..{r['corr_hi']:+.1f}) | {r['rounds']} |")
    big = [r for r in results if r["share"] >= 0.05]
    worse = sum(abs(r["corr_med"]) > abs(r["raw_med"]) + (r["raw_hi"] - r["raw_lo"])
                for r in big)
    print(f"RESULT per_op_raw_abs_median={np.median([abs(r['raw_med']) for r in big]):.2f} "
          f"per_op_corrected_abs_median={np.median([abs(r['corr_med']) for r in big]):.2f} "
          f"total_corrected_abs_median="
          f"{np.median([abs(r['corr_med']) for r in results if r['operation'] == 'total']):.2f} "
          f"worse_than_raw={worse}")


if __name__ == "__main__":
    main()
