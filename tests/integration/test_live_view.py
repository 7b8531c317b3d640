"""``rls-analyze live`` in a real terminal (tmux): attached to a running multi-process job
recorded by rls-prof, the screen shows its operations and progress and refreshes; tab
switches process, p the phase; q exits cleanly and the job goes on unaffected (it finishes
its loop and exits 0). ``--once`` prints the same screen as text."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from tests.conftest import run_tool, wait_until

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed (scripts/setup.sh test "
                                       "installs it)")

WORKLOAD = textwrap.dedent("""
    import os, sys, time
    from multiprocessing import Process
    import rlscope

    stop = sys.argv[1]

    def worker():
        while not os.path.exists(stop):
            with rlscope.operation("env.step"):
                time.sleep(0.002)

    if __name__ == "__main__":
        workers = [Process(target=worker) for _ in range(2)]
        for w in workers:
            w.start()
        i, deadline = 0, time.monotonic() + 120
        while not os.path.exists(stop) and time.monotonic() < deadline:
            with rlscope.phase("training"):
                with rlscope.operation("simulation"):
                    time.sleep(0.002)
                with rlscope.operation("inference"):
                    sum(range(5000))
            i += 1
            rlscope.report_progress(i * 4)
        for w in workers:
            w.join()
        print("iterations", i)
""")


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True,
                          timeout=30).stdout


def test_live_view_in_tmux(tmp_path: Path) -> None:
    script, stop, out = tmp_path / "job.py", tmp_path / "stop", tmp_path / "run"
    script.write_text(WORKLOAD)
    job = subprocess.Popen([sys.executable, "-m", "rlscope.cli.prof", "-o", str(out), "-q",
                            "--", sys.executable, str(script), str(stop)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    session = f"rlscope-live-{uuid.uuid4().hex[:8]}"
    done = tmp_path / "live.exit"
    try:
        wait_until(lambda: len(list(out.glob("python.*.rlscope"))) >= 3,
                   "the job's three trace files")
        cmd = (f"{sys.executable} -m rlscope.cli.analyze live {out} --refresh 0.3 "
               f"2>{tmp_path / 'live.err'}; echo $? > {done}")
        _tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "40", cmd)

        def screen() -> str:
            return _tmux("capture-pane", "-p", "-t", session)

        def progress_line() -> str | None:
            s = screen()
            lines = [ln for ln in s.splitlines() if ln.startswith("Progress: ")]
            return lines[0] if lines and "simulation" in s and "inference" in s else None

        first = wait_until(progress_line, "the live screen with the job's operations")
        # One whole screen: a second capture can land in the middle of a redraw (header
        # drawn, body not yet), as one CI-like run saw.
        def whole_screen() -> str | None:
            c = screen()
            return c if "Operation" in c and "Progress: " in c else None

        s = wait_until(whole_screen, "a whole screen")
        assert "Process 1/3" in s and "recording" in s
        # The workers' role reaches their traces at their first flush, which can come
        # after the first screens (a fresh-clone run drew one without it).
        wait_until(lambda: (c := whole_screen()) is not None and
                   "[multiprocessing process]" in c, "the workers' role on the screen")
        wait_until(lambda: (p := progress_line()) is not None and p != first,
                   "a refresh with new progress")

        _tmux("send-keys", "-t", session, "Tab")
        wait_until(lambda: "Process 2/3" in screen() and "env.step" in screen(),
                   "the next process (a worker) after tab")
        _tmux("send-keys", "-t", session, "N")
        wait_until(lambda: "Process 1/3" in screen(), "the main process again after N")
        _tmux("send-keys", "-t", session, "p")
        wait_until(lambda: "phase: training" in screen(), "the training phase after p")

        _tmux("send-keys", "-t", session, "q")
        wait_until(done.exists, "rls-analyze live to exit on q")
        assert wait_until(lambda: done.read_text().strip(), "its exit status") == "0", \
            (tmp_path / "live.err").read_text()
        assert job.poll() is None  # the job runs on
    finally:
        stop.touch()
        _tmux("kill-session", "-t", session)
        try:
            stdout, stderr = job.communicate(timeout=120)
        finally:
            if job.poll() is None:
                job.kill()
    assert job.returncode == 0, stderr
    assert "iterations" in stdout

    once = run_tool("rls-analyze", "live", str(out), "--once", "--refresh", "0.1")
    assert once.returncode == 0, once.stderr
    assert "finished" in once.stdout and "simulation" in once.stdout
