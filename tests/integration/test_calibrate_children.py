"""rls-prof --calibrate on runs with other processes (issue 22): chunk copies are never
forked where they cannot work; the reason is said once and the cost model is checked
against runs without rlscope instead, like for like (the whole tree's CPU)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rlscope.analysis.overhead.model import FILE_NAME, read_calibration
from rlscope.calibration.suitability import other_processes
from tests.conftest import run_tool

WORKLOADS = Path(__file__).parent / "workloads"


def test_a_live_child_stops_chunks_before_any_fork(tmp_path: Path):
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "--calibrate", "--no-intercept", "--",
                 sys.executable, str(WORKLOADS / "calib_child.py"), timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "not by chunks" in ln]
    assert len(lines) == 1 and "1 live child process" in lines[0], r.stderr
    assert not list((out / "calibration" / "chunks").glob("0-*"))  # no copy was forked
    cal = read_calibration(out / FILE_NAME)
    assert cal.mode == "model" and cal.uninstrumented["n"] >= 1


def test_a_helper_that_ended_before_the_first_progress_report_allows_chunks(tmp_path: Path):
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "--calibrate", "--chunks", "4",
                 "--chunk-seconds", "0.02", "--no-intercept", "--", sys.executable,
                 str(WORKLOADS / "calib_helper.py"), timeout=300)
    assert r.returncode == 0, r.stderr
    assert "not by chunks" not in r.stderr, r.stderr
    assert len(list(out.glob("python.*.rlscope"))) == 2  # the helper was recorded
    assert read_calibration(out / FILE_NAME).mode == "chunks"


def test_a_grandchild_under_an_untraced_parent_counts(tmp_path: Path):
    """Ray's workers descend from the driver through its raylet (C++, not traced): they
    are the run's other Python processes all the same."""
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "--no-intercept", "--", sys.executable,
                 str(WORKLOADS / "calib_grandchild.py"), timeout=300)
    assert r.returncode == 0, r.stderr
    assert len(list(out.glob("python.*.rlscope"))) == 2  # the shell is not traced
    assert other_processes(out) == 1


def test_sb3_subproc_vec_env_calibrates(tmp_path: Path):
    pytest.importorskip("stable_baselines3")
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "--calibrate", "--", sys.executable,
                 str(WORKLOADS / "sb3_vec.py"), "2", "256", timeout=600)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "not by chunks" in ln]
    assert len(lines) == 1 and "other Python process" in lines[0], r.stderr
    assert "calibration failed" not in r.stderr
    cal = read_calibration(out / FILE_NAME)
    assert cal.mode == "model" and cal.metric == "cpu" and cal.uninstrumented["n"] >= 1
    assert cal.validation["removed_s"] > 0
    rep = run_tool("rls-analyze", "report", str(out))
    assert rep.returncode == 0, rep.stderr
    assert "CPU time of all processes" in rep.stdout or "not corrected" in rep.stdout
