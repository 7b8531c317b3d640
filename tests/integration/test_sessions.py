"""Several rlscope.start/stop sessions in one process into one directory (the notebook
pattern), with and without rls-prof: each session is its own section of the report,
with its own operations and percentages of its own time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_tool

NOTEBOOK = """
import os, sys, time, rlscope
out = os.environ.get("RLSCOPE_OUTPUT_DIR") or sys.argv[1]
for s in range(2):
    if not rlscope.is_active():
        rlscope.start(out)
    for i in range(5):
        with rlscope.operation(f"op{s}"):
            time.sleep(0.002)
    rlscope.stop()
"""


@pytest.mark.parametrize("under_prof", [False, True])
def test_two_sessions_in_one_process_are_two_sections(tmp_path: Path, under_prof: bool):
    out = tmp_path / "nb"
    if under_prof:
        r = run_tool("rls-prof", "-o", str(out), "--", sys.executable, "-c", NOTEBOOK)
    else:
        r = subprocess.run([sys.executable, "-c", NOTEBOOK, str(out)], capture_output=True,
                           text=True, timeout=120,
                           env={k: v for k, v in os.environ.items()
                                if not k.startswith("RLSCOPE_")})
    assert r.returncode == 0, r.stderr
    assert len(list(out.glob("python.*.rlscope"))) == 2
    r = run_tool("rls-analyze", "report", "--format", "json", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    procs = doc["processes"]
    assert len({p["pid"] for p in procs}) == 1
    assert [p["session"] for p in procs] == [0, 1]
    for n in (0, 1):
        ops = [o for o in doc["operations"] if o["session"] == n]
        # the first session's start to op0 is its start-up; a later session has none
        assert {o["operation"] for o in ops} == {f"op{n}", "(unannotated)"} | (
            {"(start-up)"} if n == 0 else set())
        (op,) = [o for o in ops if o["operation"] == f"op{n}"]
        assert op["calls"] == 5
        assert 0 < op["wall_pct"] <= 100.0
    tree = doc["process_tree"]
    assert [t["role"] for t in tree] == ["main", "main"]
    assert tree[1]["name"].endswith("[session 2]")
    assert doc["run_summary"]["processes"] == 2  # traces
    assert doc["run_summary"]["roles"][-1]["processes"] == 1  # one process
    text = run_tool("rls-analyze", "report", str(out))
    assert text.returncode == 0, text.stderr
    assert "[session 2] (main):" in text.stdout
    assert "[?]" not in text.stdout
    plots = run_tool("rls-analyze", "plot", str(out), "--format", "svg")
    assert plots.returncode == 0, plots.stderr
    pid = procs[0]["pid"]
    # (utilisation.svg too under rls-prof: its sampler ran)
    assert sorted(p.name for p in (out / "plots").iterdir()
                  if not p.name.startswith("utilisation")) == [
        f"breakdown.{pid}.1.svg", f"breakdown.{pid}.svg"]  # no intercepted calls: no
    # transitions figures
