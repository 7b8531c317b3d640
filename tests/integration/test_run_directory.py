"""Run directories are safe: a live rls-prof holds its directory (a lock naming its pid
and start time); a second one into it is refused, --force or not; a lock left by a
killed rls-prof is taken over; --force clears everything a previous run left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rlscope.trace import format as fmt
from rlscope.trace import rundir
from rlscope.trace.reader import read_trace
from tests.conftest import run_tool, wait_until

WAITER = str(Path(__file__).parent / "workloads" / "wait_for_file.py")
LOCK = fmt.LOCK_FILE


def _start(out: Path, go: Path, *extra: str) -> tuple[subprocess.Popen[str], int]:
    """rls-prof running the waiter, which has recorded and waits for ``go``; (rls-prof,
    the workload's pid)."""
    proc = subprocess.Popen([sys.executable, "-m", "rlscope.cli.prof", "-o", str(out),
                             *extra, "--", sys.executable, WAITER, str(go)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    assert line[:1] == ["READY"], proc.communicate(timeout=60)
    return proc, int(line[1])


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return rundir.process_start_ticks(pid) is None or open(
        f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"


def _one_line(r: subprocess.CompletedProcess[str]) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


@pytest.mark.parametrize("force", [False, True])
def test_a_second_rls_prof_into_a_live_run_is_refused(tmp_path: Path, force: bool):
    out, go = tmp_path / "same", tmp_path / "go"
    first, _ = _start(out, go)
    try:
        holder = json.loads((out / LOCK).read_text())
        assert holder["pid"] == first.pid and holder["start_ticks"] == \
            rundir.process_start_ticks(first.pid)
        live = sorted(out.glob("*" + fmt.FILE_SUFFIX))
        assert len(live) == 1
        r = run_tool("rls-prof", "-o", str(out), *(["--force"] if force else []), "--",
                     sys.executable, "-c", "pass")
        assert r.returncode == 2
        line = _one_line(r)
        assert "is in use by a running rls-prof pid " + str(first.pid) in line
        assert ("--force never takes" in line) == force
        assert sorted(out.glob("*" + fmt.FILE_SUFFIX)) == live  # the live trace is intact
    finally:
        go.touch()
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert "trace of 1 process" in err
    assert not (out / LOCK).exists()  # released
    (p,) = read_trace(out).processes
    assert p.complete and {p.name_of(int(n)) for n in p.events.name if n} >= {"before",
                                                                              "after"}
    assert json.loads((out / fmt.RUN_FILE).read_text())["launcher"]["pid"] == first.pid


def test_a_killed_rls_prof_leaves_a_lock_the_next_run_takes_over(tmp_path: Path):
    out, go = tmp_path / "killed", tmp_path / "go"
    first, workload = _start(out, go)
    os.kill(first.pid, signal.SIGKILL)  # no chance to release anything
    first.wait(timeout=60)  # (its workload still holds the pipes: no communicate)
    assert (out / LOCK).exists()
    # Its workload still records there: even --force must not delete that.
    r = run_tool("rls-prof", "-o", str(out), "--force", "--", sys.executable, "-c", "pass")
    assert r.returncode == 2
    assert "ended without releasing it (killed?); taking the lock over" in r.stderr
    assert f"still being recorded (pid {workload} writes python.{workload}" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 2
    go.touch()
    wait_until(lambda: _gone(workload), "the orphaned workload's exit")
    # Killed again, so that the next run finds the stale lock rather than none.
    second, workload = _start(out, go, "--force")
    os.killpg(second.pid, signal.SIGKILL)
    second.communicate(timeout=60)
    for p in (first.stdout, first.stderr):
        assert p is not None
        p.close()
    wait_until(lambda: _gone(workload), "the killed workload's exit")
    r = run_tool("rls-prof", "-o", str(out), "--force", "--", sys.executable, "-c", "pass")
    assert r.returncode == 0, r.stderr
    assert f"locked by rls-prof pid {second.pid}" in r.stderr
    assert "taking the lock over" in r.stderr
    assert not (out / LOCK).exists()


@pytest.mark.parametrize("how", ["sigint", "sigterm", "crash"])
def test_the_lock_is_released_on_every_exit(tmp_path: Path, how: str):
    out, go = tmp_path / how, tmp_path / "go"
    if how == "crash":
        r = run_tool("rls-prof", "-o", str(out), "--", sys.executable, "-c",
                     "import rlscope; raise SystemExit(3)")
        assert r.returncode == 3
    else:
        proc, _ = _start(out, go)
        if how == "sigint":
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole process group
        else:
            proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)
        assert proc.returncode == 128 + getattr(signal, how.upper())
    assert not (out / LOCK).exists()
    # A refused run (a previous run is there) releases the lock it took too.
    r = run_tool("rls-prof", "-o", str(out), "--", sys.executable, "-c", "pass")
    assert r.returncode == 2 and "already holds a previous run" in _one_line(r)
    assert not (out / LOCK).exists()


def test_a_lock_is_judged_by_pid_and_start_time(tmp_path: Path):
    """Where flock does nothing (some network file systems) the lock's pid and start
    time decide: a live holder is refused, a reused pid (another start time) is not."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        ticks = wait_until(lambda: rundir.process_start_ticks(sleeper.pid), "/proc stat")
        for start, live in ((ticks, True), (ticks + 1, False)):
            d = tmp_path / str(start)
            d.mkdir()
            (d / LOCK).write_text(json.dumps({"pid": sleeper.pid, "start_ticks": start,
                                              "host": fmt.host_name(), "command": ["x"]}))
            if live:
                with pytest.raises(rundir.DirectoryInUse) as e:
                    rundir.RunLock.acquire(d, ["y"])
                assert e.value.holder is not None and e.value.holder.pid == sleeper.pid
                assert rundir.live_holder(d) is not None
            else:
                assert rundir.live_holder(d) is None
                with rundir.RunLock.acquire(d, ["y"]) as lock:
                    assert lock.stale is not None and lock.stale.pid == sleeper.pid
                    assert json.loads((d / LOCK).read_text())["pid"] == os.getpid()
                assert not (d / LOCK).exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def _calibration_file(path: Path) -> None:
    from rlscope.analysis.overhead.model import Calibration, KindCost, write_calibration

    write_calibration(Calibration([sys.executable, "-c", "pass"],
                                  {"annotation": KindCost(300, 50, 0.0, "runs")}), path)


def test_force_clears_everything_a_previous_run_left(tmp_path: Path):
    out = tmp_path / "run"
    assert run_tool("rls-prof", "-o", str(out), "--", sys.executable, "-c",
                    "pass").returncode == 0
    old = {p.name for p in [*out.glob("*" + fmt.FILE_SUFFIX),
                            *out.glob("*" + fmt.SAMPLES_SUFFIX)]}
    _calibration_file(out / "calibration.json")
    for d in ("calibration/0-full", "plots"):
        (out / d).mkdir(parents=True)
    (out / "calibration/0-full/output.log").write_text("old")
    (out / "plots/breakdown.png").write_text("old")
    (out / "trace.json").write_text("{}")
    (out / "timeline.pftrace").write_bytes(b"old")  # rls-analyze timeline's default
    (out / "notes.txt").write_text("mine")  # not rlscope's: kept
    r = run_tool("rls-prof", "-o", str(out), "--", sys.executable, "-c", "pass")
    assert r.returncode == 2
    line = _one_line(r)
    assert ("already holds a previous run (1 trace file, utilisation samples, Python stack "
            "samples, calibration/, calibration.json, plots/, run.json, timeline.pftrace, "
            "trace.json)") in line
    r = run_tool("rls-prof", "-o", str(out), "--force", "--", sys.executable, "-c", "pass")
    assert r.returncode == 0, r.stderr
    left = sorted(p.name for p in out.iterdir())
    new = [n for n in left if n.endswith((fmt.FILE_SUFFIX, fmt.SAMPLES_SUFFIX))]
    assert len(new) == 2 and not set(new) & old  # a trace and the sampler's file
    stacks = [n for n in left if n.endswith(fmt.STACKS_SUFFIX)]  # the new process's
    assert left == sorted(["notes.txt", fmt.RUN_FILE, *new, *stacks]) and len(stacks) <= 1


def test_leftover_calibration_alone_is_a_previous_run(tmp_path: Path):
    """A new run must not be corrected with an old run's calibration."""
    out = tmp_path / "run"
    out.mkdir()
    _calibration_file(out / "calibration.json")
    r = run_tool("rls-prof", "-o", str(out), "--", sys.executable, "-c", "pass")
    assert r.returncode == 2 and "(calibration.json)" in _one_line(r)


def test_force_keeps_a_calibration_reused_from_the_same_directory(tmp_path: Path):
    out = tmp_path / "run"
    assert run_tool("rls-prof", "-o", str(out), "--", sys.executable, "-c",
                    "pass").returncode == 0
    _calibration_file(out / "calibration.json")
    saved = (out / "calibration.json").read_bytes()
    r = run_tool("rls-prof", "-o", str(out), "--force", "--calibration",
                 str(out / "calibration.json"), "--", sys.executable, "-c", "pass")
    assert r.returncode == 0, r.stderr
    assert (out / "calibration.json").read_bytes() == saved


def test_rlscope_start_refuses_a_directory_a_live_rls_prof_holds(tmp_path: Path):
    out, go = tmp_path / "held", tmp_path / "go"
    proc, _ = _start(out, go)
    try:
        r = subprocess.run([sys.executable, "-c", f"import rlscope; rlscope.start({str(out)!r})"],
                           capture_output=True, text=True, timeout=120,
                           env={k: v for k, v in os.environ.items()
                                if not k.startswith("RLSCOPE_")})
        assert r.returncode == 1
        assert f"in use by a running rls-prof pid {proc.pid}" in r.stderr
        assert len(list(out.glob("*" + fmt.FILE_SUFFIX))) == 1
    finally:
        go.touch()
    proc.communicate(timeout=120)
    assert proc.returncode == 0
    # Once the run is over the directory is free (start() does not need --force).
    r = subprocess.run([sys.executable, "-c", f"import rlscope; rlscope.start({str(out)!r})"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_a_process_under_rls_prof_may_restart_recording_into_its_run(tmp_path: Path):
    out = tmp_path / "restart"
    code = ("import os, rlscope; d = os.environ['RLSCOPE_OUTPUT_DIR']; rlscope.stop(); "
            "rlscope.start(d)\nwith rlscope.operation('again'): pass")
    r = run_tool("rls-prof", "-o", str(out), "--", sys.executable, "-c", code)
    assert r.returncode == 0, r.stderr
    assert len(list(out.glob("*" + fmt.FILE_SUFFIX))) == 2
