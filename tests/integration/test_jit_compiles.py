"""Compile time with real JIT compilers under rls-prof (docs/attribution.md#compile-time):
a policy compiled for two batch sizes inside ``inference`` shows compiles = 2 and a
compile time within 25% of the workload's own estimate (first call minus a steady call,
timed by the workload with time.perf_counter). One test per framework; torch.compile
costs ~10 s per shape on a quiet machine."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rlscope.analysis
from tests.conftest import run_tool

pytestmark = pytest.mark.slow  # real compilers: seconds to a minute each
WORKLOAD = str(Path(__file__).parent / "workloads" / "jit_compiles.py")


def _profile(tmp_path: Path, framework: str, intercept: str, *batches: str):
    out, est = tmp_path / "run", tmp_path / "estimate.json"
    r = run_tool("rls-prof", "-o", str(out), "-q", "--intercept", intercept, "--",
                 sys.executable, WORKLOAD, framework, str(est), *batches, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    a = rlscope.analysis.load(out)
    return a, json.loads(est.read_text())


def _check(a, estimates, framework: str) -> None:
    inf = a.operations().set_index("operation").loc["inference"]
    assert inf["compiles"] == 2, a.compiles().to_string()
    own = sum(e["compile_s"] for e in estimates)
    assert 0.75 * own <= inf["compile_s"] <= 1.25 * own, (inf["compile_s"], estimates)
    assert inf["compile_s"] <= inf["self_s"]
    rows = a.compiles()
    rows = rows[(rows["operation"] == "inference") & (rows["counts"] == 1)]
    assert set(rows["framework"]) == {framework}
    # Each compile is where the workload saw it: in the first call of its batch size.
    for (_, r), e in zip(rows.iterrows(), estimates, strict=True):
        assert r["seconds"] <= e["first_s"] * 1.05 + 0.01
    # The compiles are the operation's warm-up, and the extrapolation's rate starts after.
    wu = a.warmup().set_index("operation").loc["inference"]
    assert wu["compile_s"] >= 0.75 * own
    # at least up to the first call of the second batch size (a loaded machine can make a
    # later call twice the steady one too)
    assert wu["warmup_calls"] >= 7
    ex = a.extrapolation().iloc[0]
    assert ex["steady_from_s"] * 1e9 + a.results[0].span[0] >= wu["end_ns"]
    it = a.iterations()
    naive = (it["timesteps"].iloc[-1] - it["timesteps"].iloc[0]) / (
        it["time_s"].iloc[-1] - it["time_s"].iloc[0])
    assert ex["steps_per_s"] > 3 * naive  # not the pace of the compiling calls


def test_torch_compile_two_batch_sizes(tmp_path: Path):
    pytest.importorskip("torch._dynamo")
    a, estimates = _profile(tmp_path, "torch", "torch-compile")
    _check(a, estimates, "torch")
    rows = a.compiles()
    recompile = rows[rows["reason"] != ""]
    assert len(recompile) == 1 and "size mismatch at index 0" in recompile.iloc[0]["reason"]
    assert set(rows["function"]) == {"Sequential"}


def test_jax_jit_two_batch_sizes(tmp_path: Path):
    pytest.importorskip("jax")
    a, estimates = _profile(tmp_path, "jax", "jax-compile")
    _check(a, estimates, "jax")
    rows = a.compiles()
    inf = rows[rows["operation"] == "inference"]
    assert set(inf["function"]) == {"policy"}
    assert set(inf["kind"]) == {"trace", "lower", "compile"}


def test_tf_function_two_batch_sizes(tmp_path: Path):
    pytest.importorskip("tensorflow")
    a, estimates = _profile(tmp_path, "tf", "tf-compile")
    _check(a, estimates, "tensorflow")
    rows = a.compiles()
    assert set(rows["kind"]) == {"trace", "first run"}
    reasons = rows[rows["reason"] != ""]["reason"].tolist()
    assert len(reasons) == 1 and "shape=(4, 8)" in reasons[0] and "shape=(8, 8)" in reasons[0]


def test_jax_recompiles_that_recur_get_a_verdict(tmp_path: Path):
    pytest.importorskip("jax")
    a, _ = _profile(tmp_path, "jax", "jax-compile", "2,3,4,5,6")
    (v,) = a.compile_verdicts()
    assert v["operation"] == "inference" and v["function"] == "policy"
    assert v["compiles"] == 5 and "recompiled 4 times" in v["text"]
    text = run_tool("rls-analyze", "report", str(tmp_path / "run")).stdout
    assert "Verdict: inference recompiled 4 times" in text


GRAPH_BREAK = textwrap.dedent("""
    import sys
    import rlscope
    from rlscope import intercept
    intercept.enable("torch-compile")
    import torch, torch._dynamo

    def policy(x):
        y = torch.tanh(x)
        torch._dynamo.graph_break()  # two graphs: the break, and a frame per part
        return (y * 2).sum()

    rlscope.start(sys.argv[1])
    f = torch.compile(policy, backend="eager")  # dynamo alone: seconds, not minutes
    with rlscope.operation("inference"):
        f(torch.ones(4, 3))
    torch._dynamo.reset()  # clears registered callbacks; rlscope's hooks stay
    with rlscope.operation("again"):
        f(torch.ones(4, 3))
    rlscope.stop()
""")


def test_torch_graph_breaks_and_reset(tmp_path: Path):
    pytest.importorskip("torch._dynamo")
    out = tmp_path / "t"
    r = subprocess.run([sys.executable, "-c", GRAPH_BREAK, str(out)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = rlscope.analysis.load(out).compiles()
    inf = rows[rows["operation"] == "inference"]
    assert inf["graph_breaks"].sum() >= 1, rows.to_string()
    assert "policy" in set(inf["function"])
    assert len(rows[rows["operation"] == "again"]) >= 1  # recorded after reset()
