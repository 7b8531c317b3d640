"""rls-prof --calibrate by paired chunks: forked copies of one process do the same work
in every configuration; their counts, times and pauses are read back."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from rlscope.analysis.overhead.model import FILE_NAME, read_calibration
from rlscope.inprocess.chunk_copies import RESULTS
from rlscope.trace import format as fmt
from rlscope.trace.reader import read_trace
from tests.conftest import run_tool, wait_until

pytest.importorskip("torch")
WORKLOADS = Path(__file__).parent / "workloads"


def test_chunks_measure_the_same_work_in_every_configuration(tmp_path: Path):
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "--calibrate", "--chunks", "8",
                 "--chunk-seconds", "0.05", "--intercept", "torch", "--", sys.executable,
                 str(WORKLOADS / "chunk_torch.py"), "--steps", "3000", timeout=300)
    assert r.returncode == 0, r.stderr
    assert "chunks of 3 configurations" in r.stderr, r.stderr
    cal = read_calibration(out / FILE_NAME)
    assert cal.mode == "chunks" and cal.metric == "thread-cpu"
    # env_call: the vector env wrappers' microbenchmark, kept for the profiled run's env
    # steps although the copies (forked after the envs were made) record none; py_sample
    # likewise for the profiled run's Python stack samples (the copies take none). The
    # module's forward is a phase marker in the full copies as in the profiled run.
    assert set(cal.costs) == {"annotation", "backend_call", "env_call", "py_sample",
                              "phase_marker"}
    assert cal.costs["env_call"].source == "microbenchmark"
    assert np.isfinite(cal.costs["backend_call"].per_event_ns)
    v = cal.validation  # odd chunks check; a disturbed one may be left out
    assert sorted(v["validation_rounds"] + v["outlier_rounds"]) == [1, 3, 5, 7]
    assert len(v["outlier_rounds"]) <= 1

    root = out / "calibration" / "chunks"
    rows = [json.loads(x) for x in (root / RESULTS).read_text().splitlines()]
    assert {x["chunk"] for x in rows} == set(range(8))
    by = {(x["chunk"], x["config"]): x for x in rows}
    for c in range(8):
        assert {k for (ch, k) in by if ch == c} == {"uninstrumented", "annotations", "full"}
        # Identical work: the same progress reports and annotations in every copy, and
        # backend calls only where they are switched on.
        assert len({by[c, k]["boundaries"] for k in ("uninstrumented", "annotations",
                                                      "full")}) == 1
        ann = read_trace(root / by[c, "annotations"]["directory"]).processes[0]
        full = read_trace(root / by[c, "full"]["directory"]).processes[0]
        kinds = (fmt.OPERATION_BEGIN, fmt.OPERATION_END)
        steps = [int((p.events.kind == k).sum()) for p in (ann, full) for k in kinds]
        assert len(set(steps)) == 1 and steps[0] > 0
        assert not (ann.events.kind == fmt.BACKEND_CALL_BEGIN).any()
        assert (full.events.kind == fmt.BACKEND_CALL_BEGIN).sum() > 0
        assert not (ann.events.kind == fmt.MARK_CALL_BEGIN).any()
        assert (full.events.kind == fmt.MARK_CALL_BEGIN).sum() == steps[0]
        # Copies took turns: each one's pauses are inside its own recorded span.
        g = np.array(by[c, "full"]["gaps_ns"])
        if len(g):
            assert (g[:, 1] >= g[:, 0]).all()
            assert g[0, 0] >= full.events.time_ns.min()
    assert not (out / "calibration" / "0-uninstrumented").exists()  # no whole runs

    rep = run_tool("rls-analyze", "report", str(out))
    assert rep.returncode == 0, rep.stderr
    assert "held-out chunks" in rep.stdout, rep.stdout


def test_the_time_budget_bounds_the_chunks(tmp_path: Path):
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "--calibrate", "--calibrate-seconds", "1",
                 "--chunk-seconds", "0.05", "--intercept", "torch", "--", sys.executable,
                 str(WORKLOADS / "chunk_torch.py"), "--steps", "3000", timeout=300)
    assert r.returncode == 0, r.stderr
    assert "for about 1 s" in r.stderr, r.stderr
    # The budget is spent at start-up already: the fewest chunks that can calibrate.
    assert "4 chunks of 3 configurations" in r.stderr, r.stderr
    assert "4 chunks measured in the time budget (1 s)" in r.stderr, r.stderr
    cal = read_calibration(out / FILE_NAME)
    assert cal.mode == "chunks"
    assert sorted(cal.validation["validation_rounds"] + cal.validation["outlier_rounds"]) \
        == [1, 3]


def test_too_few_progress_reports_fall_back_to_the_cost_model(tmp_path: Path):
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "--calibrate", "--repetitions", "1",
                 "--no-intercept", "--", sys.executable,
                 str(WORKLOADS / "calib_loop.py"), "--iterations", "40", timeout=120)
    assert r.returncode == 0, r.stderr
    # Known from the profiled run: no chunk run is started to find out.
    assert "not by chunks: its main process reported progress 0 times" in r.stderr, \
        r.stderr
    assert not (out / "calibration" / "chunks").exists()
    cal = read_calibration(out / FILE_NAME)
    assert cal.mode == "model"
    # Checked against runs without rlscope, like for like: the process tree's CPU.
    assert cal.uninstrumented["n"] >= 1 and cal.metric == "cpu"
    assert (out / "calibration" / "0-uninstrumented" / "output.log").exists()


def _alive_with(marker: str) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and marker in (d / "cmdline").read_bytes().decode(
                    errors="replace"):
                pids.append(int(d.name))
        except OSError:
            continue
    return pids


def test_ctrl_c_during_chunk_calibration_leaves_the_trace_and_no_copies(tmp_path: Path):
    import os
    import signal
    import subprocess
    import uuid

    out = tmp_path / "run"
    marker = uuid.uuid4().hex  # an argument only this test's workload processes carry
    proc = subprocess.Popen([sys.executable, "-m", "rlscope.cli.prof", "-o", str(out),
                             "--calibrate", "--chunks", "40", "--intercept", "torch", "--",
                             sys.executable, str(WORKLOADS / "chunk_torch.py"), "--steps",
                             "29876",
                             "--tag", marker],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    chunks = out / "calibration" / "chunks"
    # After the profiled run: the copies of a first chunk have come and gone, and those
    # of a later one are running (the workload process and at least one copy).
    try:
        wait_until(lambda: proc.poll() is not None or (
            (chunks / RESULTS).exists() and len(_alive_with(marker)) >= 2),
            "copies of a second chunk", timeout_s=300, interval_s=0.01)
        assert proc.poll() is None, "the calibration ended before it could be interrupted"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "aborted" in err and "Traceback" not in err, err
    # rls-prof waits for the interrupted run, which reaps its copies: when it has
    # returned, none is left, however slow the machine (no waiting here).
    assert _alive_with(marker) == []
    assert read_trace(out).processes  # the profiled run's trace is intact


def test_ctrl_c_during_fork_of_a_copy_is_not_lost():
    import subprocess
    import textwrap

    # Python handles a SIGINT that arrives during os.fork in its at-fork callbacks,
    # where the KeyboardInterrupt is only printed: here one is sent from such a callback.
    code = textwrap.dedent("""
        import os, signal
        from rlscope.inprocess.chunk_copies import _fork
        os.register_at_fork(before=lambda: os.kill(os.getpid(), signal.SIGINT))
        pid, interrupted = _fork()
        if pid == 0:
            os._exit(7 if interrupted else 0)
        _, status = os.waitpid(pid, 0)
        print(interrupted, os.waitstatus_to_exitcode(status),
              signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "7", "True"]  # noted in parent and copy; restored
