"""EnvPool with no code change: a hand-written, unannotated PPO-style loop
(workloads/handwritten_envpool.py, which times itself with perf_counter around the real
calls) under rls-prof, its trace read back and compared with what the loop measured.

- the vector step is ``simulation`` (sync: one call per ``step``; async: a ``recv`` and a
  ``send`` per batch), every call reaching EnvPool's native code (Simulator; in async
  mode the wait for a batch is Waiting);
- ``inference`` calls = the loop's policy forwards (±5%), ``backprop`` within 10% of the
  loop's own timing of its updates.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import rlscope.analysis
from tests.conftest import run_tool

pytest.importorskip("torch")
pytest.importorskip("envpool")
WORKLOAD = Path(__file__).parent / "workloads" / "handwritten_envpool.py"


def run(tmp: Path, *args: str) -> tuple[dict[str, float], object]:
    out = tmp / "run"
    r = run_tool("rls-prof", "-o", str(out), "-q", "--", sys.executable, str(WORKLOAD),
                 str(tmp / "measured.json"), *args, timeout=300)
    assert r.returncode == 0, r.stderr
    measured = json.loads((tmp / "measured.json").read_text())
    return measured, rlscope.analysis.load(out)


def check_operations(measured: dict[str, float], ops) -> None:  # type: ignore[no-untyped-def]
    t = ops.set_index("operation")
    sim = t.loc["simulation"]
    assert sim["calls"] == measured["env_calls"]
    # The loop's perf_counter pair sits just outside the operation.
    assert sim["wall_s"] <= measured["env_s"] * 1.01
    assert sim["wall_s"] >= measured["env_s"] * 0.7
    # Every env call reaches EnvPool's native code (sync: its send and recv; async: the
    # recv is a wait), and the step's self time splits into native, waiting and Python
    # without a gap. (How much is Python is EnvPool's: its wrapper converts every batch
    # to numpy and dicts, ~40 us a call, more than CartPole's native step.)
    assert sim["simulator_calls"] + sim["wait_calls"] >= measured["env_calls"], sim
    assert sim["simulator_s"] > 0, sim
    parts = sim["python_s"] + sim["simulator_s"] + sim["waiting_s"] + sim["backend_s"]
    assert parts == pytest.approx(sim["self_s"], rel=0.02), sim
    assert t.loc["inference", "calls"] == pytest.approx(measured["forwards"], rel=0.05)
    assert t.loc["backprop", "calls"] == 4
    assert t.loc["backprop", "wall_s"] == pytest.approx(measured["backprop_s"], rel=0.10)


@pytest.mark.parametrize("api", ["gymnasium", "gym"])
def test_sync_step(tmp_path: Path, api: str):
    measured, a = run(tmp_path, "--mode", "sync", "--api", api)
    check_operations(measured, a.operations())
    assert measured["env_calls"] == measured["vector_steps"] + 1  # + the reset


def test_async_send_recv(tmp_path: Path):
    measured, a = run(tmp_path, "--mode", "async")
    ops = a.operations()
    check_operations(measured, ops)
    assert measured["env_calls"] == 2 * measured["vector_steps"] + 1  # + async_reset
    # recv waits for a batch: Waiting, and the recv calls are the wait calls.
    sim = ops.set_index("operation").loc["simulation"]
    assert sim["waiting_s"] > 0
    assert sim["wait_calls"] >= measured["vector_steps"]


def test_no_env_recognised(tmp_path: Path):
    """The same loop stepping an env rlscope does not know: updates are cut at their
    optimizer steps and never cover env steps (backprop within the loop's own update
    timing), and the report says no env was recognised and how to annotate."""
    measured, a = run(tmp_path, "--no-env")
    t = a.operations().set_index("operation")
    assert "simulation" not in t.index
    assert t.loc["backprop", "wall_s"] <= measured["backprop_s"] * 1.01
    assert t.loc["backprop", "wall_s"] >= measured["backprop_s"] * 0.2
    assert t.loc["inference", "wall_s"] <= measured["loop_s"] - measured["env_s"]
    assert any("no env step was recognised" in w for w in a.warnings), a.warnings
