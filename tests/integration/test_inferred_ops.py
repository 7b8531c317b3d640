"""Hand-written PyTorch DQN and PPO loops (tests/integration/workloads/handwritten_*.py:
no rlscope import unless --annotate) under rls-prof: inference, simulation and backprop
inferred from the loop's calls, against an annotated copy of the same script.

What the comparison rests on: two separate runs on a shared 2-core machine differ by
more than 5% in time, whatever is measured. So the times are compared on one timeline:
the annotated copy is recorded with the markers on, and the same trace is analysed twice,
with the user's ``inference``/``backprop`` (``infer="off"``) and with them replaced by
the inferred ones (``infer="only"``): any difference is where the rule puts the
boundaries, not noise. The unannotated run is checked for what is deterministic across
runs (fixed seeds): the same operations with the same numbers of calls.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import rlscope.analysis
from tests.conftest import run_tool

pytest.importorskip("torch")
pytest.importorskip("gymnasium")
WORKLOADS = Path(__file__).parent / "workloads"
OPS = ("inference", "simulation", "backprop")
ARGS = {"dqn": ("--steps", "2000"), "ppo": ("--updates", "4"), "tf": ("--steps", "400")}


def profile(out: Path, algo: str, *args: str) -> Path:
    r = run_tool("rls-prof", "-o", str(out), "-q", "--", sys.executable,
                 str(WORKLOADS / f"handwritten_{algo}.py"), *ARGS[algo], *args, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


def table(out: Path, infer: str):
    ops = rlscope.analysis.load(out, infer=infer).operations()
    return ops.set_index("operation")


@pytest.mark.parametrize("algo", ["dqn", "ppo", "tf"])
def test_inferred_rows_match_the_annotations(tmp_path: Path, algo: str):
    """PyTorch DQN and PPO; a Keras model with a GradientTape update (tf)."""
    if algo == "tf":
        pytest.importorskip("tensorflow")
    annotated = profile(tmp_path / "annotated", algo, "--annotate")
    user = table(annotated, "off")
    inferred = table(annotated, "only")
    for op in OPS:
        assert inferred.loc[op, "calls"] == user.loc[op, "calls"], op
        assert inferred.loc[op, "wall_s"] == pytest.approx(user.loc[op, "wall_s"],
                                                           rel=0.05), op
    # User annotations win: with inference on (the default) the report is the user's.
    auto = table(annotated, "auto")
    assert auto[["calls", "wall_s"]].equals(user[["calls", "wall_s"]])

    plain = table(profile(tmp_path / "plain", algo), "auto")
    for op in OPS:
        assert plain.loc[op, "calls"] == user.loc[op, "calls"], op
        assert plain.loc[op, "backend_calls"] > 0 or op == "simulation"
    loop = plain[~plain.index.str.startswith("(start-up)")]
    assert (loop["depth"] == 0).all()  # nothing nested: no double counting


@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_legacy_gym(tmp_path: Path, algo: str):
    pytest.importorskip("gym")
    ops = table(profile(tmp_path / "legacy", algo, "--gym", "gym"), "auto")
    assert set(OPS) <= set(ops.index), ops.index
    if algo == "ppo":  # one reset, 4 updates x 128 vector steps
        assert ops.loc["simulation", "calls"] == 1 + 4 * 128
        assert ops.loc["inference", "calls"] == 4 * 128
        assert ops.loc["backprop", "calls"] == 4
    else:
        assert ops.loc["simulation", "calls"] > 2000
        assert ops.loc["backprop", "calls"] == len(range(200, 2000, 4))
