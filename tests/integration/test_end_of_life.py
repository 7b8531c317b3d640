"""How profiled processes end: workers ended by SIGTERM (Pool.terminate) or SIGKILL lose
at most one flush interval and print no traceback; rls-prof waits for every process the
command started (orphans and the forkserver included) before writing run.json, whose
cpu_s covers the whole tree."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from rlscope.trace import format as fmt
from rlscope.trace.reader import read_trace
from tests.conftest import run_tool

WORKLOAD = str(Path(__file__).parent / "workloads" / "end_of_life.py")
FLUSH_S = 0.2
# A loaded 2-core machine may run a writer thread late; the bound is one flush interval
# plus this much scheduling delay.
SLACK_S = 0.8

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux")


def _prof(out: Path, *args: str, env: dict[str, str] | None = None):
    r = run_tool("rls-prof", "-o", str(out), "--flush-interval", str(FLUSH_S), "--",
                 sys.executable, WORKLOAD, *args, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    for bad in ("Traceback", "Exception ignored", "SystemExit"):
        assert bad not in r.stderr, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r


def _last_step_end(p) -> int:
    ends = p.events.time_ns[(p.events.kind == fmt.OPERATION_END)]
    assert len(ends), "the worker recorded its steps"
    return int(ends.max())


@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_pool_terminate_loses_at_most_a_flush_interval(tmp_path: Path, method: str):
    res, _ = _prof(tmp_path / "t", "terminate", method)
    trace = read_trace(tmp_path / "t")
    procs = {p.pid: p for p in trace.processes}
    for pid in res["workers"]:
        w = procs[pid]
        assert w.complete, "SIGTERM unwinds and the exit hooks flush the trace"
        lost_s = (res["end_ns"] - _last_step_end(w)) / 1e9
        assert lost_s <= FLUSH_S + SLACK_S, lost_s


def test_sigterm_to_an_exiting_worker_prints_no_traceback(tmp_path: Path):
    # Pool.__exit__ terminates workers that may be running their exit hooks already
    # (under spawn, 4 runs in 10 printed "SystemExit: 143" from the atexit flush before).
    for i in range(5):
        res, _ = _prof(tmp_path / str(i), "pool_exit", "spawn")
        assert res["squares"] == [0, 1, 4, 9]
        trace = read_trace(tmp_path / str(i))
        assert trace.warnings == [] and all(p.complete for p in trace.processes)


def test_sigkill_of_a_worker_loses_at_most_a_flush_interval(tmp_path: Path):
    res, _ = _prof(tmp_path / "k", "sigkill", "fork")
    trace = read_trace(tmp_path / "k")
    (w,) = [p for p in trace.processes if p.pid == res["workers"][0]]
    assert not w.complete
    lost_s = (res["end_ns"] - _last_step_end(w)) / 1e9
    assert lost_s <= FLUSH_S + SLACK_S, lost_s


def test_a_sigterm_the_handler_never_gets_still_ends_the_worker(tmp_path: Path):
    # rlscope's SIGTERM handler runs on the main thread between bytecodes; blocked in C
    # when the signal came, that thread never runs it. The native watch stops the
    # recording and ends the process as SIGTERM would have, ~0.5 s later (else the parent's
    # join waits forever: Pool.terminate() did, ~1 run in 50).
    res, _ = _prof(tmp_path / "u", "unanswered")
    assert res["exitcode"] == -signal.SIGTERM, res
    assert res["ended_s"] >= 0.5, "the handler's grace time first"
    (w,) = [p for p in read_trace(tmp_path / "u").processes if p.pid == res["worker"]]
    before = w.strings.index("before")
    ev = w.events
    assert int(((ev.kind == fmt.OPERATION_BEGIN) & (ev.name == before)).sum()) == 100
    assert w.complete, "stopped as an exit stops it"


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_a_child_leaving_through_os_exit_keeps_its_trace(tmp_path: Path, method: str):
    # os._exit skips atexit; a multiprocessing worker also skips its exit finalizers when
    # a SIGTERM lands between its return and them (Pool.terminate racing the exit
    # sentinel): rlscope's os._exit stops the recording first.
    res, _ = _prof(tmp_path / "x", "os_exit", method)
    procs = {p.pid: p for p in read_trace(tmp_path / "x").processes}
    for pid in res["children"]:
        child = procs[pid]
        assert child.complete, child.header.argv
        ops = {child.name_of(int(s)) for s in
               child.events.name[child.events.kind == fmt.OPERATION_BEGIN]}
        assert "last_step" in ops


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_rls_prof_waits_for_the_forkserver(tmp_path: Path):
    _prof(tmp_path / "f", "forkserver")
    meta = json.loads((tmp_path / "f" / fmt.RUN_FILE).read_text())
    assert meta["descendants"]["still_running"] == []
    trace = read_trace(tmp_path / "f")
    assert len(trace.processes) >= 3  # main, forkserver, worker (+ resource tracker)
    for p in trace.processes:
        assert not _alive(p.pid), p.header.argv
        assert p.complete, p.header.argv


def test_cpu_s_covers_an_orphaned_child(tmp_path: Path):
    cpu_file = tmp_path / "cpu.txt"
    res, _ = _prof(tmp_path / "o", "orphan", str(cpu_file), "1.0")
    # The command exited at once; rls-prof waited for its orphan before run.json.
    assert cpu_file.exists() and not _alive(res["orphan"])
    child_cpu = float(cpu_file.read_text())
    meta = json.loads((tmp_path / "o" / fmt.RUN_FILE).read_text())
    assert meta["descendants"]["reaped"] >= 1
    assert meta["cpu_s"] >= child_cpu >= 1.0, (meta["cpu_s"], child_cpu)
    # The command's own wall time (the calibration's runs without rlscope measure theirs
    # so) ends at its exit; the run's, after the orphan.
    assert 0 < meta["command_wall_s"] < meta["duration_s"], meta
    (orphan,) = [p for p in read_trace(tmp_path / "o").processes if p.pid == res["orphan"]]
    assert orphan.complete


def test_cpu_s_covers_a_child_the_kernel_reaps(tmp_path: Path):
    """A parent ignoring SIGCHLD (Ray's raylet) leaves its children's CPU out of every
    RUSAGE_CHILDREN; run.json's cpu_s counts them from /proc (launch.tree_cpu)."""
    cpu_file = tmp_path / "cpu.txt"
    res, _ = _prof(tmp_path / "i", "ignored", str(cpu_file), "1.0")
    child_cpu = float(cpu_file.read_text())
    meta = json.loads((tmp_path / "i" / fmt.RUN_FILE).read_text())
    # Read every 0.1 s: what the child used after the last reading is missed.
    assert meta["cpu_unreaped_s"] >= 0.7 * child_cpu, (meta, child_cpu)
    assert meta["cpu_s"] >= meta["cpu_unreaped_s"] + 0.01, meta  # and the parent's own
    assert meta["cpu_s"] < 1.5 * child_cpu + 1.0, meta  # counted once
    (child,) = [p for p in read_trace(tmp_path / "i").processes if p.pid == res["child"]]
    assert child.complete


def test_a_descendant_that_does_not_exit_is_reported(tmp_path: Path):
    env = dict(os.environ, RLSCOPE_DESCENDANTS_WAIT_S="0.5")
    t0 = time.monotonic()
    res, r = _prof(tmp_path / "s", "orphan", str(tmp_path / "cpu.txt"), "60", env=env)
    assert time.monotonic() - t0 < 50  # did not wait the orphan out
    try:
        meta = json.loads((tmp_path / "s" / fmt.RUN_FILE).read_text())
        (left,) = meta["descendants"]["still_running"]
        assert left["pid"] == res["orphan"] and "python" in left["command"]
        assert f"{res['orphan']} (" in r.stderr and "still running" in r.stderr
    finally:
        os.kill(res["orphan"], 9)


def test_a_killed_process_keeps_most_of_its_own_threads_cpu(tmp_path: Path):
    """A process killed without stopping (Ray ends most of its processes so) has no
    stop-time note of rlscope's threads' CPU: the Python sampler notes its own and the
    native writer's periodically, so the correction still removes them."""
    script = tmp_path / "killed.py"
    script.write_text(
        "import os, signal, time\n"
        "import rlscope\n"
        "from rlscope.inprocess import pysampler\n"
        "pysampler.NOTE_S = 0.05  # the loop reads it at each wake-up\n"
        "deadline = time.monotonic() + 60\n"
        "while pysampler.active().notes < 3 and time.monotonic() < deadline:\n"
        "    sum(i * i for i in range(20000))  # busy: the sampler samples\n"
        "rlscope.flush()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    out = tmp_path / "k"
    r = run_tool("rls-prof", "-o", str(out), "--sample-python", "100", "--",
                 sys.executable, str(script), timeout=120)
    assert r.returncode == 128 + signal.SIGKILL, r.stderr
    (p,) = read_trace(out).processes
    own = {k[len(fmt.META_THREAD_CPU_PREFIX):]: int(v) for k, v in p.metadata.items()
           if k.startswith(fmt.META_THREAD_CPU_PREFIX)}
    assert set(own) == {"rlscope-pysampl", "rlscope-writer"}, p.metadata
    assert all(ns > 0 for ns in own.values()), own
