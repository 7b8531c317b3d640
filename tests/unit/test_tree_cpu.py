"""The process tree's CPU (launch.tree_cpu): children of a parent that ignores SIGCHLD
are reaped by the kernel, so RUSAGE_CHILDREN misses them; the counter reads them from
/proc and counts every process once, whoever reaps it. Ticks are driven by the test (the
thread's own tick is an hour away), so nothing depends on when the thread runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlscope.calibration.runner import run_once
from rlscope.launch import descendants
from rlscope.launch.tree_cpu import TreeCpuCounter, children_cpu_s, ignores_sigchld
from tests.conftest import wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")

BURN_S = 0.6
# Burns BURN_S of CPU, writes what it used, then waits for its stdin to close.
CHILD = """
import sys, time
end = time.process_time() + float(sys.argv[2])
while time.process_time() < end:
    pass
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(time.process_time()))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
sys.stdin.read()
"""
# Ignores SIGCHLD, starts CHILD (sharing its stdin), waits until the child has gone
# (``wait``) or until its stdin closes (``exit``: the child may outlive it).
PARENT = """
import signal, subprocess, sys
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[3]])
if sys.argv[4] == "wait":
    child.wait()  # blocks until the child has gone, then ECHILD
else:
    sys.stdin.read()
    child.returncode = 0
"""


def _start(tmp_path: Path, how: str) -> tuple[subprocess.Popen, Path]:
    out = tmp_path / "child_cpu.txt"
    proc = subprocess.Popen([sys.executable, "-c", PARENT, CHILD, str(out), str(BURN_S),
                             how], stdin=subprocess.PIPE)
    return proc, out


def _burnt(out: Path) -> float:
    return wait_until(lambda: float(out.read_text()) if out.exists() else None,
                      "the child's CPU figure")


def test_sigchld_disposition_is_read():
    assert not ignores_sigchld(os.getpid())
    code = ("import signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); "
            "sys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.read()")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
        assert ignores_sigchld(p.pid)
    finally:
        p.communicate("")


def test_a_child_the_kernel_reaps_is_counted(tmp_path: Path):
    me = os.getpid()
    counter = TreeCpuCounter(me, set(descendants.children(me)), tick_s=3600)
    c0 = children_cpu_s()
    counter.start()
    proc, out = _start(tmp_path, "wait")
    child_cpu = _burnt(out)
    counter.tick()  # the child's reading, after its burn
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait()
    cpu = counter.stop()
    waited_for = children_cpu_s() - c0  # the parent only: the kernel reaped the child
    assert waited_for < 0.5 * child_cpu, (waited_for, child_cpu)
    assert cpu.unreaped == 1
    # /proc's CPU times are in clock ticks (10 ms): the reading may trail by two.
    assert child_cpu - 0.03 <= cpu.unreaped_s <= child_cpu + 0.3, (cpu, child_cpu)
    assert cpu.cpu_s == pytest.approx(waited_for + cpu.unreaped_s)


def test_a_child_reparented_to_the_reaper_counts_once(tmp_path: Path):
    """Read while its parent (ignoring SIGCHLD) lives; then parent and child end together,
    in either order: the child is reaped by the kernel (the reading counts) or, orphaned,
    by this process as a subreaper (RUSAGE_CHILDREN counts it, the reading must not)."""
    me = os.getpid()
    before = set(descendants.children(me))
    counter = TreeCpuCounter(me, before, tick_s=3600)
    counter.start()
    reaper = descendants.set_subreaper(True)
    try:
        proc, out = _start(tmp_path, "exit")
        child_cpu = _burnt(out)
        counter.tick()
        assert proc.stdin is not None
        proc.stdin.close()  # the child shares it: both see its end
        proc.wait()
        found = descendants.reap(120, before | {proc.pid})
    finally:
        if reaper:
            descendants.set_subreaper(False)
    cpu = counter.stop(found.pids)
    assert cpu.unreaped == (0 if found.pids else 1)
    # The child once (plus two interpreters' start-up), never twice.
    assert child_cpu - 0.03 <= cpu.cpu_s < 1.6 * child_cpu, (cpu, child_cpu, found)


def test_run_once_counts_a_child_the_kernel_reaps(tmp_path: Path):
    """Calibration's runs without rlscope count the tree as run.json does; the thread's
    own ticks (every 0.1 s) read the child while it burns."""
    out = tmp_path / "child_cpu.txt"
    parent = PARENT.replace("sys.argv[1]", "CHILD").replace("sys.argv[2]", "sys.argv[1]")
    parent = parent.replace("sys.argv[3]", "sys.argv[2]").replace("sys.argv[4]", "'wait'")
    code = f"CHILD = {CHILD.replace('sys.stdin.read()', '')!r}\n{parent}"
    _, cpu_s, rc = run_once([sys.executable, "-c", code, str(out), str(BURN_S)],
                            dict(os.environ), tmp_path / "run", timeout_s=300)
    assert rc == 0
    child_cpu = float(out.read_text())
    # Without the /proc readings this would be the parent's ~0.05 s.
    assert 0.6 * child_cpu <= cpu_s < 1.6 * child_cpu + 0.5, (cpu_s, child_cpu)
