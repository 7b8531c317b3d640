"""rls-prof --calibrate-by runs end to end on a tiny workload (2 rounds), then rls-analyze
reports the corrected numbers, --no-correct the raw ones, and --calibration reuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rlscope.analysis.overhead.applied import withheld_reason
from rlscope.analysis.overhead.model import FILE_NAME, read_calibration
from tests.conftest import run_tool

WORKLOAD = str(Path(__file__).parent / "workloads" / "calib_loop.py")


def test_calibrate_then_report_and_reuse(tmp_path: Path):
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "--calibrate", "--calibrate-by", "runs",
                 "--repetitions", "2",
                 "--no-intercept", "--", sys.executable, WORKLOAD, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "calibration written to" in r.stderr
    cal = read_calibration(out / FILE_NAME)
    assert cal.repetitions == 2
    assert {"process", "annotation"} <= set(cal.costs)
    configs = {x["config"] for x in cal.runs}
    assert {"uninstrumented", "full"} <= configs
    assert all((out / x["directory"] / "output.log").exists() for x in cal.runs)
    assert cal.validation["validation_rounds"] == [1]
    assert (out / "run.json").exists()  # the main run stays where report finds it

    rep = run_tool("rls-analyze", "report", str(out))
    assert rep.returncode == 0, rep.stderr
    # On a loaded machine the calibration's own check may not show that correcting helps
    # (runs without rlscope 40% apart beside two busy loops): the report is then raw and
    # says why, as it must; quiet, it is corrected.
    withheld = withheld_reason(cal)
    if withheld:
        assert "Overhead: not corrected, raw numbers shown: " + withheld in rep.stdout
    else:
        assert "Overhead corrected" in rep.stdout and "uninstrumented" in rep.stdout
    raw = run_tool("rls-analyze", "report", "--no-correct", str(out))
    assert "Overhead corrected" not in raw.stdout
    js = json.loads(run_tool("rls-analyze", "report", "--format", "json", str(out)).stdout)
    assert js["run"]["correction"]["applied"] is not withheld

    again = tmp_path / "again"
    r2 = run_tool("rls-prof", "-o", str(again), "--calibration", str(out / FILE_NAME),
                  "--no-intercept", "--", sys.executable, WORKLOAD, timeout=60)
    assert r2.returncode == 0, r2.stderr
    assert (again / FILE_NAME).exists() and not (again / "calibration").exists()
    text = run_tool("rls-analyze", "report", str(again)).stdout
    assert ("not corrected, raw numbers shown: " + withheld if withheld
            else "Overhead corrected") in text


def test_work_limit_stops_uninstrumented_and_recorded_runs(tmp_path: Path):
    from rlscope.launch import child_env

    env = child_env.uninstrumented(3)
    p = subprocess.run([sys.executable, WORKLOAD], env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and "done" not in p.stdout
    assert "stopping after 3 progress reports" in p.stderr
    out = tmp_path / "lim"
    r = run_tool("rls-prof", "-o", str(out), "--no-intercept", "--", sys.executable,
                 WORKLOAD, env={**os.environ, "RLSCOPE_MAX_PROGRESS": "3"})
    assert r.returncode == 0 and "done" not in r.stdout
    from rlscope.trace.reader import read_trace

    p0 = read_trace(out).processes[0]
    assert list(p0.progress.timesteps) == [50, 100, 150] and p0.complete
