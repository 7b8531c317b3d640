"""EnvPool with no code change: a hand-written, unannotated PPO-style loop
(workloads/handwritten_vec.py, which times itself with perf_counter around the real
calls) under rls-prof, its trace read back and compared with what the loop measured.

- the vector step is ``simulation`` (sync: one call per ``step``; async: a ``recv`` and a
  ``send`` per batch), every call reaching EnvPool's native code (Simulator; in async
  mode the wait for a batch is Waiting);
- ``inference`` calls = the loop's policy forwards (±5%), ``backprop`` within 10% of the
  loop's own timing of its updates.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rlscope.analysis
from tests.conftest import run_tool
from tests.integration.vec_loops import check_operations, run

pytest.importorskip("torch")
pytest.importorskip("envpool")


def check_native(measured: dict[str, float], ops) -> None:  # type: ignore[no-untyped-def]
    """Every env call reaches EnvPool's native code (sync: its send and recv; async: the
    recv is a wait). (How much of the step is Python is EnvPool's: its wrapper converts
    every batch to numpy and dicts, ~40 us a call, more than CartPole's native step.)"""
    sim = ops.set_index("operation").loc["simulation"]
    assert sim["simulator_calls"] + sim["wait_calls"] >= measured["env_calls"], sim
    assert sim["simulator_s"] > 0, sim


@pytest.mark.parametrize("api", ["gymnasium", "gym"])
def test_sync_step(tmp_path: Path, api: str):
    measured, a = run(tmp_path, "--mode", "sync", "--api", api)
    ops = a.operations()
    check_operations(measured, ops)
    assert measured["env_calls"] == measured["vector_steps"] + 1  # + the reset
    check_native(measured, ops)


def test_async_send_recv(tmp_path: Path):
    measured, a = run(tmp_path, "--mode", "async")
    ops = a.operations()
    check_operations(measured, ops)
    assert measured["env_calls"] == 2 * measured["vector_steps"] + 1  # + async_reset
    check_native(measured, ops)
    # recv waits for a batch: Waiting, and the recv calls are the wait calls.
    sim = ops.set_index("operation").loc["simulation"]
    assert sim["waiting_s"] > 0
    assert sim["wait_calls"] >= measured["vector_steps"]
    # Which envs the batches held, on sampled batches: every recv seen, each counted
    # batch full and of distinct envs, every env in some; CartPole's envs step alike.
    ls = rlscope.analysis.load_lockstep(tmp_path / "run")
    [b] = ls.batches
    assert (b.num_envs, b.batch_size) == (16, 8)
    assert b.batches == measured["vector_steps"]  # one recv each
    later = b.batches - 64  # the first 64 batches all counted, then one in 8 to 24
    assert 64 + later // 24 <= b.tallied <= 64 + later // 8 + 1
    assert b.counts.sum() == b.tallied * b.batch_size
    assert (b.counts > 0).all() and (b.counts <= b.tallied).all()
    assert b.lagging() == []
    # Each env's share against what the loop counted itself on every batch (CartPole's
    # envs alike: ~1x each; the tally's ~74 sampled batches resolve ~±0.1x).
    own = np.asarray(measured["batch_envs"], dtype=float)
    own_share = own / (own.sum() / len(own))
    assert np.abs(b.relative() - own_share).max() < 0.4, (b.relative(), own_share)
    report = run_tool("rls-analyze", "report", str(tmp_path / "run"), timeout=120)
    assert report.returncode == 0, report.stderr
    assert "(EnvPool, async: 16 envs, batches of 8)" in report.stdout
    assert "no env lags by more than these counts resolve" in report.stdout


def test_send_recv_full_batch(tmp_path: Path):
    """EnvPool's send/recv API on a pool whose batches hold every env (not async): after
    ``async_reset`` each ``recv`` and ``send`` is ``simulation`` too (they are operations
    per pool, not on EnvPool's class, where a sync ``step`` would pay for them)."""
    measured, a = run(tmp_path, "--mode", "async", "--full-batch", "--updates", "2")
    ops = a.operations()
    check_operations(measured, ops, updates=2)
    assert measured["env_calls"] == 2 * measured["vector_steps"] + 1  # + async_reset
    check_native(measured, ops)


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
