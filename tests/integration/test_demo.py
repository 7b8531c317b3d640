"""The demo under rls-prof: the report's call counts match what the loop itself counted."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from rlscope.analysis.engine.summary import summarize
from rlscope.trace.reader import read_trace
from tests.conftest import REPO, run_tool

pytest.importorskip("torch")
pytest.importorskip("gymnasium")


def test_ppo_cartpole_demo_counts(tmp_path: Path):
    out = tmp_path / "demo"
    r = run_tool("rls-prof", "-o", str(out), "--", sys.executable,
                 str(REPO / "examples" / "ppo_cartpole.py"), "--total-steps", "1024",
                 "--rollout-steps", "256", timeout=300)
    assert r.returncode == 0, r.stderr
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("demo: wall_s=")][-1]
    said = {k: float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", line)}
    df = summarize(read_trace(out))
    calls = dict(zip(df.operation, df.calls, strict=True))
    for op in ("inference", "simulation", "backprop"):
        assert calls[op] == said[f"{op}_calls"], op
    training = df[df.phase == "training"]
    assert set(training.operation) == {"inference", "simulation", "backprop"}
    # The loop is fully annotated apart from bookkeeping between operations.
    assert training.wall_s.sum() <= said["wall_s"] * 1.001
    assert training.wall_s.sum() >= said["wall_s"] * 0.5
    rep = run_tool("rls-analyze", "report", str(out))
    assert rep.returncode == 0
    for op in ("inference", "simulation", "backprop"):
        assert op in rep.stdout
