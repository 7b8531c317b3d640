"""Trends of a bounded trace (rls-prof --trace-budget, detail windows and aggregated gaps):
the gaps' aggregated time and calls are spread over the trend intervals they cover, so no
interval is left empty where the events were aggregated, the calls per interval add up
to the iterations the loop reported over them (+-3%) and the time to the report's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlscope.errors import TraceError
from rlscope.trace.reader import read_trace
from rlscope.trace.records import iter_chunks
from tests.conftest import run_tool, wait_until

pytest.importorskip("rlscope._native", reason="bounded traces are written by the native "
                    "recorder")

LOOP = Path(__file__).parent / "workloads" / "dense_loop.py"


def test_trends_cover_the_gaps(tmp_path: Path) -> None:
    out, result, stop = tmp_path / "run", tmp_path / "loop.json", tmp_path / "stop"
    # Windows short enough for several to fit in the budget: a periodic window ends on
    # time only, and this loop writes ~20 MB/s in detail (a 20 ms window: 5% of 8MB).
    env = dict(os.environ, RLSCOPE_TRACE_PERIOD_MS="300", RLSCOPE_TRACE_WINDOW_MS="20")
    proc = subprocess.Popen([sys.executable, "-m", "rlscope.cli.prof", "-o", str(out), "-q",
                             "--trace-budget", "8MB", "--", sys.executable, str(LOOP), "600",
                             str(result), str(stop)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:  # until the loop has outgrown the start window and four periodic windows closed
        # (at 0.3, 0.9, 2.1 and 4.5 s: the run's last 100 ms, after its last report kept,
        # are then a few % of it)
        wait_until(lambda: _periodic(out) >= 4, "four periodic windows")
    finally:
        stop.touch()
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    n = json.loads(result.read_text())["iterations"]
    (p,) = read_trace(out).processes
    assert len(p.aggregates.thread), "no gap: the loop did not outgrow its start window"

    js = run_tool("rls-analyze", "trends", str(out), "--format", "json", "--no-plot",
                  timeout=300)
    assert js.returncode == 0, js.stderr
    t = json.loads(js.stdout)["trends"]
    step = [o for o in t["operations"] if o["operation"] == "step"]
    assert len(step) == len(t["intervals"])  # every interval has the loop's time
    assert all(o["wall_s"] > 0 and o["calls"] > 0 for o in step)
    # The loop reports its iteration count: the steps between the first and the last
    # report kept (in a gap, one per 100 ms) are its iterations there.
    steps = sum(i["steps"] for i in t["intervals"])
    assert n - 1000 - steps < 0.05 * n
    # Inside the grid a gap's calls follow the steps reported in it; the part of a
    # gap's rows past the last report (or before the first) is left out by time, and the
    # loop's rate there is not even: a few % at most.
    calls = sum(o["calls"] for o in step)
    assert calls == pytest.approx(steps, rel=0.03)

    rep = run_tool("rls-analyze", "report", str(out), "--format", "json", timeout=300)
    assert rep.returncode == 0, rep.stderr
    total = sum(o["wall_s"] for o in json.loads(rep.stdout)["operations"]
                if o["operation"] == "step")
    in_trends = sum(o["wall_s"] for o in step)
    assert in_trends <= total * (1 + 1e-6)
    assert in_trends >= total * steps / n * 0.95


def _periodic(out: Path) -> int:
    """Periodic detail windows recorded so far (their metadata; docs/trace-format.md)."""
    meta: dict = {}
    for f in out.glob("python.*.rlscope"):
        try:
            for c in iter_chunks(f):
                meta.update(c.metadata)
        except TraceError:  # a file being written: try again
            return 0
    return sum(1 for k, v in meta.items() if k.startswith("rlscope.window:")
               and isinstance(v, dict) and v.get("reason") == "periodic")
