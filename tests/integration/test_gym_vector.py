"""gymnasium 1.x vector envs and duck-typed ones with no code change: an unannotated loop
(workloads/gym_vector_loop.py, timing its env calls with perf_counter) under rls-prof,
its trace read back: every vector step and reset is one ``simulation`` call (its time
what the loop measured), in each autoreset mode; the policy forwards are ``inference``.
A ``SyncVectorEnv``'s envs are sampled (a few vector steps record their envs) and the
lock-step analysis reads the sampled steps without warnings."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import rlscope.analysis
from tests.conftest import run_tool

pytest.importorskip("torch")
pytest.importorskip("gymnasium.vector", reason="gymnasium 1.x")
WORKLOAD = Path(__file__).parent / "workloads" / "gym_vector_loop.py"
ENVS = 8


def run(tmp: Path, cls: str, mode: str, steps: int = 300) -> tuple[dict, Path]:
    out = tmp / "run"
    r = run_tool("rls-prof", "-o", str(out), "-q", "--", sys.executable, str(WORKLOAD),
                 str(tmp / "m.json"), cls, mode, str(steps), str(ENVS), timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads((tmp / "m.json").read_text()), out


@pytest.mark.parametrize(("cls", "mode"), [("sync", "next"), ("sync", "same"),
                                           ("sync", "disabled"), ("async", "next"),
                                           ("duck", "next")])
def test_vector_steps_are_simulation(tmp_path: Path, cls: str, mode: str):
    m, out = run(tmp_path, cls, mode)
    ops = rlscope.analysis.load(out).operations()
    main = ops[ops["pid"] == m["pid"]].set_index("operation")  # async: workers' rows apart
    sim = main.loc["simulation"]
    assert sim["calls"] == m["env_calls"], (sim["calls"], m)
    assert m["env_s"] * 0.7 <= sim["wall_s"] <= m["env_s"] * 1.01
    assert main.loc["inference", "calls"] == pytest.approx(m["forwards"], rel=0.05)
    if cls == "sync":
        ls = rlscope.analysis.load_lockstep(out, correct=False)
        (v,) = ls.vector_envs
        assert not v.workers and 0 < v.complete_steps <= v.vector_steps == m["vector_steps"]
        assert not ls.warnings, ls.warnings
