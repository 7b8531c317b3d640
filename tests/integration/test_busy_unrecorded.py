"""A child process that records nothing is folded as an idle helper only when rls-prof's
/proc sampler did not see it busy: one that burns a second of CPU in code rlscope does
not see is shown, with that CPU (``sampled_cpu_s``), while one that only sleeps, and the
rest of the helpers, stay folded."""

from __future__ import annotations

import sys
from pathlib import Path

import rlscope.analysis
from tests.conftest import run_tool

SCRIPT = """
import multiprocessing as mp, sys, time
import rlscope

def busy():
    t0 = time.process_time()
    while time.process_time() - t0 < 1.0:
        sum(range(1000))

def sleepy():
    time.sleep(1.0)

if __name__ == "__main__":
    ctx = mp.get_context("fork")
    ps = [ctx.Process(target=busy), ctx.Process(target=sleepy)]
    for p in ps:
        p.start()
    print(ps[0].pid, ps[1].pid, flush=True)
    with rlscope.operation("wait_for_children"):
        for p in ps:
            p.join()
"""


def test_a_busy_child_is_not_an_idle_helper(tmp_path: Path) -> None:
    script = tmp_path / "children.py"
    script.write_text(SCRIPT)
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "-q", "--sample-hz", "20", "--", sys.executable,
                 str(script), timeout=300)
    assert r.returncode == 0, r.stderr
    busy_pid, sleepy_pid = map(int, r.stdout.split()[-2:])
    tree = rlscope.analysis.load(out).process_tree().set_index("pid")
    busy, sleepy = tree.loc[busy_pid], tree.loc[sleepy_pid]
    assert not busy["idle_helper"]
    assert 0.6 <= busy["sampled_cpu_s"] <= 1.3  # its second of CPU, as /proc counted it
    assert sleepy["idle_helper"] and sleepy["sampled_cpu_s"] < 0.2
    text = run_tool("rls-analyze", "report", str(out)).stdout
    assert "1 idle helper" in text
