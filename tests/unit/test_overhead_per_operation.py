"""rlscope's book-keeping per operation by the cost model (analysis.overhead.per_operation)
on a known operations table: each operation's own counted calls times their costs,
summed over its subtree, over its wall time; the worst among the big operations, and the
report line that names it."""

from __future__ import annotations

import pandas as pd
import pytest

from rlscope.analysis.overhead.per_operation import operation_overhead, worst
from rlscope.reporters.correction import correction_lines

COSTS = {"annotation": 200.0, "backend_call": 100.0, "simulator_call": 50.0,
         "wait_call": 80.0, "cuda_api": 1000.0, "process": 2e7}


def table() -> pd.DataFrame:
    rows = [  # operation, calls, backend, simulator, wait, cuda api, wall s, wall %
        ("(start-up)", 1, 0, 0, 0, 0, 0.5, 10.0),
        ("train", 10, 0, 0, 0, 0, 4.0, 80.0),
        ("train > inference", 1000, 8000, 0, 0, 0, 1.0, 20.0),
        ("train > simulation", 1000, 0, 20000, 1000, 0, 2.5, 50.0),
        ("train > backprop", 10, 500, 0, 0, 0, 0.1, 2.0),
        ("(unannotated)", 0, 100, 0, 0, 0, 0.2, 4.0),
    ]
    return pd.DataFrame([{"pid": 1, "process": "train.py", "session": 0, "phase": "",
                          "operation": o, "calls": c, "backend_calls": b,
                          "simulator_calls": s, "wait_calls": w, "cuda_api_calls": a,
                          "wall_s": ws, "wall_pct": pct}
                         for o, c, b, s, w, a, ws, pct in rows])


def test_subtree_costs_over_wall_time() -> None:
    got = operation_overhead(table(), COSTS).set_index("operation")
    assert "(start-up)" not in got.index and "(unannotated)" not in got.index
    inf = (1000 * 200 + 8000 * 100) / 1e9
    sim = (1000 * 200 + 20000 * 50 + 1000 * 80) / 1e9
    bp = (10 * 200 + 500 * 100) / 1e9
    assert got.loc["train > inference", "overhead_s"] == pytest.approx(inf)
    assert got.loc["train > simulation", "overhead_pct"] == pytest.approx(100 * sim / 2.5)
    assert got.loc["train", "overhead_s"] == pytest.approx(10 * 200 / 1e9 + inf + sim + bp)


def test_the_worst_big_operation_is_named() -> None:
    ops = table()
    w = worst(operation_overhead(ops, COSTS), ops)
    # backprop's 52% is the highest share, but it is 2% of the process: not counted.
    assert w is not None and w["operation"] == "train > inference"
    assert w["overhead_pct"] == pytest.approx(100 * (1000 * 200 + 8000 * 100) / 1e9 / 1.0)
    run = {"correction": {"applied": False, "withheld": "not checked", "overhead_pct": 1.2,
                          "overhead_error_pct": 0.3, "removed_cpu_s": 0.5,
                          "costs_ns": COSTS}}
    (line,) = correction_lines(run, w)
    assert "per operation at most 0.1% (train > inference)" in line
    assert operation_overhead(ops, {}).empty and worst(operation_overhead(ops, {}), ops) is None
