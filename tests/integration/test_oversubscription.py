"""The oversubscription verdict on a real run: a CPU-bound main loop beside CPU-burning
helpers (cores + 1 of them, no operations recorded in them) under rls-prof. The first
per-step verdict is oversubscription with a remedy in processes per core; the main
process's run-queue wait it reports (sampled from /proc) is what the loop measured itself,
its wall time minus its CPU time (it never blocks), and the bound is at most that."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import run_tool

WORKLOAD = str(Path(__file__).parent / "workloads" / "oversub_loop.py")


def test_cpu_burning_helpers_oversubscribe_the_main_loop(tmp_path: Path):
    out, truth = tmp_path / "run", tmp_path / "truth.json"
    r = run_tool("rls-prof", "-o", str(out), "-q", "--", sys.executable, WORKLOAD,
                 str(truth), timeout=300)
    assert r.returncode == 0, r.stderr
    rep = run_tool("rls-analyze", "report", "--format", "json", str(out))
    assert rep.returncode == 0, rep.stderr
    verdicts = [v for v in json.loads(rep.stdout)["run_diagnosis"] if v["recurring"]]
    assert verdicts and verdicts[0]["kind"] == "oversubscription", verdicts
    o = verdicts[0]
    assert "processes doing work at once" in o["verdict"]
    assert "processes doing work at once: fewer worker processes" in o["remedy"]
    t = json.loads(truth.read_text())
    lost = t["wall_s"] - t["cpu_s"]  # runnable without a core: the loop never blocks
    assert lost > 0.2 * t["wall_s"], t  # it was oversubscribed
    # The main process's run-queue wait, sampled from /proc, is what the loop lost (plus
    # its start-up and exit); the bound is the share of it the run's own helpers caused
    # (all of it on a quiet machine, less where other processes load it too).
    (line,) = [e for e in o["evidence"] if "waited" in e and "run queue" in e]
    waited = float(line.split("waited ", 1)[1].split(" s", 1)[0])
    assert 0.8 * lost <= waited <= 1.2 * lost + 0.5, (waited, t)
    assert 0 < o["bound_s"] <= waited * 1.001
