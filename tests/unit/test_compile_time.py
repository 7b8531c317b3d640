"""Compile time on synthetic traces: compile records joined to the operation open on
their thread, per operation compile_s / compiles, the recompile verdict, and the
extrapolation's rate without compile time (rlscope.analysis.compile_rows)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlscope.analysis import analyze
from rlscope.analysis.compile_rows import cause
from rlscope.analysis.engine.compiles import union_ns
from rlscope.analysis.engine.synthetic import process_trace
from rlscope.reporters import table
from rlscope.trace import format as fmt
from rlscope.trace.data import Trace

OB, OE = fmt.OPERATION_BEGIN, fmt.OPERATION_END
MS = 1_000_000
REASON = "0/0: tensor 'x' size mismatch at index 0. expected {}, actual {}"


def _record(n: int, fw: str, fn: str, b: int, e: int, tid: int, reason: str = "",
            kind: str = "compile", counts: int = 1) -> tuple[str, list]:
    return (f"{fmt.META_COMPILE_PREFIX}{n}", [fw, fn, b, e, tid, reason, kind, counts, 0])


def _run(batch: int | None = None):
    # main thread (tid 1000): inference four times, each compiling (the batch size
    # changes), an eager compile outside operations, and a second thread (tid 1001)
    # compiling inside its own operation.
    events = [(0, 0, fmt.PROCESS_START, "")]
    meta = dict([_record(0, "torch", "Policy.forward", 1 * MS, 4 * MS, 1000)])
    sizes = [4, 8, 16, 32]
    for i in range(4):
        t = 10 * MS * (i + 1)
        events += [(t, 0, OB, "inference"), (t + 8 * MS, 0, OE, "inference")]
        reason = REASON.format(sizes[i - 1], sizes[i]) if i else ""
        meta.update([_record(i + 1, "torch", "Policy.forward", t + MS, t + 6 * MS, 1000,
                             reason)])
    events += [(60 * MS, 1, OB, "loader"), (70 * MS, 1, OE, "loader")]
    # JAX-style stages: trace and lower do not count, the XLA compile does.
    meta.update([_record(10, "jax", "f", 61 * MS, 62 * MS, 1001, kind="trace", counts=0),
                 _record(11, "jax", "f", 62 * MS, 63 * MS, 1001, kind="lower", counts=0),
                 _record(12, "jax", "f", 63 * MS, 66 * MS, 1001)])
    events += [(80 * MS, 0, fmt.PROCESS_END, "")]
    p = process_trace(events, threads={0: 1000, 1: 1001}, metadata=meta,
                      progress=[(15 * MS, 100, 1000), (55 * MS, 500, 1000)])
    return analyze(Trace(Path("."), {}, [p]), batch_events=batch)


@pytest.mark.parametrize("batch", [None, 3])
def test_compiles_go_to_the_operation_open_on_their_thread(batch):
    a = _run(batch)
    ops = a.operations().set_index("operation")
    assert ops.loc["inference", "compiles"] == 4
    assert ops.loc["inference", "compile_s"] == pytest.approx(0.020)
    assert ops.loc["(start-up)", "compiles"] == 1  # before the first operation
    assert ops.loc["loader", "compiles"] == 1  # the XLA compile; its stages add time only
    assert ops.loc["loader", "compile_s"] == pytest.approx(0.005)
    rows = a.compiles()
    assert len(rows) == 8
    assert set(rows[rows["function"] == "f"]["thread"]) == {1}


def test_recompile_verdict_names_what_varies():
    v = _run().compile_verdicts()
    assert len(v) == 1
    assert v[0]["operation"] == "inference" and v[0]["compiles"] == 4
    assert "recompiled 3 times" in v[0]["text"]
    assert "batch size varies (4, 8, 16, 32)" in v[0]["text"]
    assert "mark it dynamic" in v[0]["text"]


def test_extrapolation_rate_leaves_compile_time_out():
    ex = _run().extrapolation().iloc[0]
    # 400 steps between 15 ms and 55 ms, of which 16 ms compiling: the 2nd to 4th
    # inference compiles (5 ms each) and the last 1 ms of the first (11 to 16 ms).
    assert ex["compile_s"] == pytest.approx(0.016)
    assert ex["steps_per_s"] == pytest.approx(400 / 0.024)


def test_report_has_compile_column_and_section():
    a = _run()
    text = table.render_text(a)
    assert "Compile s" in text and "Compiles" in text
    assert "Verdict: inference recompiled 3 times" in text
    assert "the rate leaves out 0.02 s of JIT compiling" in text
    data = json.loads(json.dumps(table.to_dict(a), default=str))
    inf = next(r for r in data["operations"] if r["operation"] == "inference")
    assert inf["compiles"] == 4 and inf["compile_s"] == pytest.approx(0.020)
    assert data["compiles"]["verdicts"][0]["compiles"] == 4


def test_union_counts_nested_stages_once():
    b = np.array([0, 2, 10, 11], np.int64)
    e = np.array([5, 3, 12, 20], np.int64)
    assert union_ns(b, e) == 5 + 10
    assert union_ns(np.zeros(0, np.int64), np.zeros(0, np.int64)) == 0


def test_causes():
    assert cause("jax", [])[0].startswith("input shapes, dtypes or static arguments vary")
    assert "input signature varies" in cause(
        "tensorflow", ["input signature changed: (x: TensorSpec(shape=(4,)))"])[0]
    assert cause("torch", [REASON.format(4, 8)])[0] == "input batch size varies (4, 8)"


def test_diagnosis_says_compiling_when_it_dominates():
    from rlscope.analysis.diagnosis.operations import diagnose

    a = _run()
    v = next(v for v in diagnose(a.operations(), a.processes()) if v.operation == "inference")
    assert v.bound == "JIT compiling"
    assert v.max_saving_s == pytest.approx(0.020)
    assert any("4 compilations" in e for e in v.evidence)


def test_compile_records_stay_out_of_the_processes_metadata():
    meta = _run().processes().iloc[0]["metadata"]
    assert not any(k.startswith(fmt.META_COMPILE_PREFIX) for k in meta)
