"""The hand-written vector-env loop (workloads/handwritten_vec.py, which times itself with
perf_counter around the real calls) under rls-prof, and the checks its trace must pass
against what the loop measured: shared by the EnvPool and PufferLib tests."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import rlscope.analysis
from tests.conftest import run_tool

WORKLOAD = Path(__file__).parent / "workloads" / "handwritten_vec.py"


def run(tmp: Path, *args: str) -> tuple[dict[str, float], rlscope.analysis.Analysis]:
    """rls-prof on the loop (in ``tmp``: PufferLib links "resources" into its cwd); what
    the loop measured and the run's analysis."""
    out = tmp / "run"
    r = run_tool("rls-prof", "-o", str(out), "-q", "--", sys.executable, str(WORKLOAD),
                 str(tmp / "measured.json"), *args, timeout=300, cwd=tmp)
    assert r.returncode == 0, r.stderr
    measured = json.loads((tmp / "measured.json").read_text())
    return measured, rlscope.analysis.load(out)


def check_operations(measured: dict[str, float], ops,  # type: ignore[no-untyped-def]
                     updates: int = 4) -> None:
    """``simulation`` calls are the loop's env calls, their time the loop's;
    ``inference`` calls its forwards (±5%); ``backprop`` its update time (±10%)."""
    t = ops.set_index("operation")
    sim = t.loc["simulation"]
    assert sim["calls"] == measured["env_calls"]
    # The loop's perf_counter pair sits just outside the operation.
    assert sim["wall_s"] <= measured["env_s"] * 1.01
    assert sim["wall_s"] >= measured["env_s"] * 0.7
    # The step's self time splits into native, waiting and Python without a gap.
    parts = sim["python_s"] + sim["simulator_s"] + sim["waiting_s"] + sim["backend_s"]
    assert parts == pytest.approx(sim["self_s"], rel=0.02), sim
    assert t.loc["inference", "calls"] == pytest.approx(measured["forwards"], rel=0.05)
    assert t.loc["backprop", "calls"] == updates
    assert t.loc["backprop", "wall_s"] == pytest.approx(measured["backprop_s"], rel=0.10)
