"""An unmodified SB3 script under rls-prof: inference / simulation / backprop with Backend
time, from the integrations alone."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import rlscope.analysis
from tests.conftest import run_tool

pytest.importorskip("stable_baselines3")
WORKLOAD = str(Path(__file__).parent / "workloads" / "sb3_ppo.py")


def profile(tmp_path: Path, *args: str, extra: tuple[str, ...] = ()):
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "-q", *extra, "--", sys.executable, WORKLOAD,
                 *args, timeout=180)
    assert r.returncode == 0, r.stderr
    return rlscope.analysis.load(out).operations().set_index("operation"), out


def test_ppo_cartpole_breakdown(tmp_path: Path):
    ops, out = profile(tmp_path, "PPO", "256")
    for op in ("inference", "simulation", "backprop"):
        assert op in ops.index, ops.index
    assert ops.loc["inference", "calls"] >= 256
    assert ops.loc["simulation", "calls"] >= 256
    for op in ("inference", "backprop"):
        assert ops.loc[op, "backend_s"] > 0 and ops.loc[op, "backend_calls"] > 0
    a = rlscope.analysis.load(out)
    assert a.processes()["complete"].all()


@pytest.mark.parametrize("algo", ["A2C", "DQN", "SAC", "TD3"])
def test_other_algorithms(tmp_path: Path, algo: str):
    ops, _ = profile(tmp_path, algo, "128")
    assert {"inference", "simulation", "backprop"} <= set(ops.index)
    assert ops.loc["backprop", "backend_s"] > 0


def test_no_intercept_records_no_calls(tmp_path: Path):
    ops, _ = profile(tmp_path, "PPO", "128", extra=("--no-intercept",))
    assert "inference" not in ops.index
    assert (ops["backend_calls"] == 0).all()
