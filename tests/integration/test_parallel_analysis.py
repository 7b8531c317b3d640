"""Parallel analysis (rls-analyze --jobs / --ray, ``load(jobs=, ray=)``) gives exactly the
serial analysis: every DataFrame and every report byte, with and without the overhead
correction, on a real multi-process run whose processes meet their operation and phase
names in different orders."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest

from rlscope.analysis import load
from rlscope.analysis.overhead.correction import correct_trace
from rlscope.analysis.overhead.model import Calibration, KindCost, write_calibration
from rlscope.analysis.pipeline.fanout import Unit, workers
from rlscope.trace import format as fmt
from rlscope.trace.data import Header
from rlscope.trace.reader import read_trace
from tests.conftest import REPO, run_tool

WORKLOAD = REPO / "tests" / "integration" / "workloads" / "fanout_mix.py"
FRAMES = ("processes", "threads", "operations", "breakdown", "process_tree", "run_summary",
          "role_operations", "iterations", "extrapolation", "gpu", "hosts", "imports",
          "utilisation", "utilisation_over_time", "trend_intervals", "trend_operations")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fanout") / "run"
    r = run_tool("rls-prof", "-o", str(out), "--", sys.executable, str(WORKLOAD),
                 timeout=300)
    assert r.returncode == 0, r.stderr
    assert len(list(out.glob("*" + fmt.FILE_SUFFIX))) >= 5
    return out


def assert_same(a, b) -> None:
    for name in FRAMES:
        x, y = getattr(a, name)(), getattr(b, name)()
        pd.testing.assert_frame_equal(x, y, check_exact=True, obj=name)
    assert a.paths.name == b.paths.name and a.paths.parent == b.paths.parent
    assert a.phases.names == b.phases.names
    assert a.run == b.run and a.warnings == b.warnings


def test_processes_meet_names_in_their_own_order(run_dir: Path):
    a = load(run_dir)
    ops = a.operations()
    firsts = [tuple(dict.fromkeys(g["operation"])) for _, g in ops.groupby("pid")]
    assert len(set(firsts)) > 1  # else the renumbering is not exercised
    assert len(a.phases.names) > 3


def test_local_processes_equal_serial(run_dir: Path):
    serial = load(run_dir, jobs=1)
    assert_same(serial, load(run_dir, jobs=2))
    assert_same(serial, load(run_dir, jobs=2, batch_events=997))  # more batches per file
    assert_same(load(run_dir, jobs=1, infer="off"), load(run_dir, jobs=3, infer="off"))


def test_corrected_equal_serial(run_dir: Path, tmp_path: Path):
    d = tmp_path / "run"
    shutil.copytree(run_dir, d)
    costs = {"annotation": KindCost(200, 80, 0, "test"),
             "wait_call": KindCost(350, 70, 0, "test", diffuse_ns=20),
             "process": KindCost(1e6, 0, 0, "test")}
    write_calibration(Calibration(["python"], costs, uninstrumented={"mean_s": 1.0,
                                                                      "std_s": 0.01, "n": 3}),
                      d / "calibration.json")
    serial = load(d, jobs=1)
    assert serial.run["correction"]["applied"]
    assert_same(serial, load(d, jobs=2))
    # The main process's wait for its pool's tasks lost what the workers' costs added.
    trace = read_trace(d)
    _, summary = correct_trace(trace, costs)
    main = next(c for c in summary.processes if fmt.META_POOL_TASKS in
                next(p for p in trace.processes if p.pid == c.pid).metadata)
    assert main.waits_ns > 0


def test_cli_reports_identical(run_dir: Path):
    for f in ("text", "json"):
        one = run_tool("rls-analyze", "report", str(run_dir), "--format", f, "--jobs", "1")
        two = run_tool("rls-analyze", "report", str(run_dir), "--format", f, "--jobs", "2")
        assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
        assert one.stdout == two.stdout
    assert json.loads(two.stdout)["processes"]


def test_serial_when_small_or_single():
    h = Header(1, "python", 1, 0, "h", "p", (), fmt.ClockPair(0, 0, 0), "native", "")
    one = Unit(Path(os.devnull), None, h)
    assert workers(None, [one]) == 1
    assert workers(None, [one, one]) == 1  # too little to analyse: not worth processes
    assert workers(4, [one, one]) == 2 and workers(1, [one, one]) == 1


def test_ray_equals_serial(run_dir: Path, monkeypatch: pytest.MonkeyPatch):
    ray = pytest.importorskip("ray")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # a stray ~/.ray token breaks local
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    assert not ray.is_initialized()
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        assert_same(load(run_dir, jobs=1), load(run_dir, ray=""))
    finally:
        ray.shutdown()


def test_ray_command_line_equals_serial(run_dir: Path):
    """``rls-analyze report --ray`` (a local cluster started for the analysis) prints
    the serial report byte for byte."""
    pytest.importorskip("ray")
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    serial = run_tool("rls-analyze", "report", "--jobs", "1", str(run_dir))
    # Last: --ray takes an optional ADDRESS, so it would swallow the directory.
    on_ray = run_tool("rls-analyze", "report", str(run_dir), "--ray", env=env, timeout=300)
    assert serial.returncode == 0 and on_ray.returncode == 0, on_ray.stderr[-3000:]
    assert on_ray.stdout == serial.stdout


def test_ray_missing_is_one_line(run_dir: Path, monkeypatch: pytest.MonkeyPatch):
    from rlscope.errors import RLScopeError

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(RLScopeError, match=r"--ray needs Ray: pip install"):
        load(run_dir, ray="")


def test_torn_and_corrupt_files(run_dir: Path, tmp_path: Path):
    from rlscope.errors import TraceError

    d = tmp_path / "run"
    shutil.copytree(run_dir, d)
    files = sorted(d.glob("python.*" + fmt.FILE_SUFFIX), key=lambda f: f.stat().st_size)
    data = files[-1].read_bytes()
    files[-1].write_bytes(data[:-7])  # a killed process's torn last record
    serial = load(d, jobs=1)
    assert any("torn" in w for w in serial.warnings)
    assert_same(serial, load(d, jobs=2))
    from rlscope.trace.records import iter_records

    start, header = next(iter(iter_records(files[-1])))
    at = start + header.ByteSize()  # the first chunk's length: made impossibly long
    files[-1].write_bytes(data[:at] + b"\xff" * 11 + data[at + 11:])
    with pytest.raises(TraceError, match="corrupt"):  # raised in a task, one line
        load(d, jobs=2)
    r = run_tool("rls-analyze", "report", str(d), "--jobs", "2")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
