"""Chunk calibration when things go wrong in the copies: results of any size arrive
whole; a copy that fails stops the measurement with one line naming it and the workload
goes on; a calibration that fails altogether is one line, and the run's trace is kept."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rlscope.analysis.overhead.model import FILE_NAME, read_calibration
from rlscope.inprocess.chunk_copies import RESULT_SUFFIX, RESULTS, write_result
from rlscope.trace.reader import read_trace
from tests.conftest import run_tool

WORKLOAD = str(Path(__file__).parent / "workloads" / "calib_faults.py")


def calibrate(out: Path, fault: str, *extra: str):
    return run_tool("rls-prof", "-o", str(out), "--calibrate", "--no-intercept",
                    "--chunks", "6", "--chunk-seconds", "0.02", "--repetitions", "1",
                    *extra, "--", sys.executable, WORKLOAD, "--fault", fault, timeout=600)


def _lines(stderr: str, text: str) -> list[str]:
    return [x for x in stderr.splitlines() if text in x]


def test_a_copys_result_of_megabytes_arrives_whole(tmp_path: Path):
    out = tmp_path / "run"
    r = calibrate(out, "big-result")
    assert r.returncode == 0, r.stderr
    root = out / "calibration" / "chunks"
    rows = [json.loads(x) for x in (root / RESULTS).read_text().splitlines()]
    assert len({x["chunk"] for x in rows}) >= 4
    for x in rows:
        assert len(x["gaps_ns"]) >= 40_000
    assert max(len(json.dumps(x)) for x in rows) > 1_000_000  # far beyond a pipe's 64 KiB
    assert not list(root.glob("*" + RESULT_SUFFIX + "*"))  # each went to chunks.jsonl
    assert read_calibration(out / FILE_NAME).mode == "chunks"


def test_a_copy_that_dies_while_set_up_stops_the_measurement_not_the_workload(
        tmp_path: Path):
    out = tmp_path / "run"
    r = calibrate(out, "setup-death")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "ProcessLookupError" not in r.stderr
    (line,) = _lines(r.stderr, "chunks of 2 configurations")
    assert "exited with status 3 while it was set up, in chunk 2)" in line, r.stderr
    # The workload went on to its end after the measurement stopped.
    log = (out / "calibration" / "chunks" / "output.log").read_text()
    assert "done 4000" in log
    # Two chunks are too few: the cost model, checked by a run without rlscope, instead.
    assert read_calibration(out / FILE_NAME).mode == "model"


def test_a_copy_that_fails_is_named_in_one_line(tmp_path: Path):
    out = tmp_path / "run"
    r = calibrate(out, "copy-crash")
    assert r.returncode == 0, r.stderr
    (line,) = _lines(r.stderr, "chunks of 2 configurations")
    assert "a calibration copy (full) exited with status 4 in chunk" in line, r.stderr
    assert (out / FILE_NAME).exists()


def test_a_failed_calibration_is_one_line_and_keeps_the_trace(tmp_path: Path):
    out = tmp_path / "run"
    r = calibrate(out, "run-fails")
    assert r.returncode == 1, r.stderr
    (line,) = _lines(r.stderr, "calibration failed")
    assert "the calibration run exited with status 1" in line
    assert f"the run's trace in {out} is kept, uncorrected" in line
    assert "Traceback" not in r.stderr
    assert not (out / FILE_NAME).exists()
    assert read_trace(out).processes[0].complete
    assert run_tool("rls-analyze", "report", str(out)).returncode == 0
    assert not (out / "rlscope.lock").exists()


@pytest.mark.parametrize("size", [70_000, 3_000_000])
def test_result_file_transport_under_pauses(tmp_path: Path, size: int):
    """A child writing a result while its parent pauses and resumes it (SIGTSTP /
    SIGCONT, as the copies' turns do) leaves it whole."""
    import os
    import signal
    import time

    from rlscope import _native

    path = tmp_path / "r.json"
    payload = {"gaps_ns": [[i, i + 1] for i in range(size // 12)]}
    pid = os.fork()
    if pid == 0:  # the child: paused as a copy is, writes its result as a copy does
        try:
            _native.install_pause_handler()
            write_result(path, payload)
        finally:
            os._exit(0)
    deadline = time.monotonic() + 120
    while True:
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.0005)
        os.kill(pid, signal.SIGTSTP)
        _, status = os.waitpid(pid, os.WUNTRACED)
        if not os.WIFSTOPPED(status) or time.monotonic() > deadline:
            break
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert json.loads(path.read_text()) == payload


def test_calibrate_after_a_failed_command_says_why_in_one_line(tmp_path: Path):
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "--calibrate", "--", sys.executable, "-c",
                 "import rlscope\nwith rlscope.operation('work'): pass\nraise SystemExit(3)",
                 timeout=300)
    assert r.returncode == 3, r.stderr  # the command's status, not the calibration's
    (line,) = _lines(r.stderr, "not calibrated")
    assert "exited with status 3, and a calibration runs it again" in line, line
    assert f"the trace in {out} is kept, uncorrected" in line
    assert "--calibration FILE" in line
    assert "Traceback" not in r.stderr
    assert not (out / FILE_NAME).exists() and not (out / "calibration").exists()
    (p,) = read_trace(out).processes
    assert p.complete
