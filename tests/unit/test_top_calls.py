"""Top backend/simulator calls per operation on synthetic timelines with known times:
outermost calls counted, nested calls inside them not, a simulator call inside a backend
call is the simulator's, and the figures do not depend on how the events are batched."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlscope.analysis import analyze
from rlscope.analysis.calls import named_calls, top_calls
from rlscope.analysis.engine.synthetic import process_trace
from rlscope.trace import format as fmt
from rlscope.trace.data import Trace

OB, OE = fmt.OPERATION_BEGIN, fmt.OPERATION_END
BB, BE = fmt.BACKEND_CALL_BEGIN, fmt.BACKEND_CALL_END
SB, SE = fmt.SIMULATOR_CALL_BEGIN, fmt.SIMULATOR_CALL_END
US = 1000


def _events() -> list[tuple[int, int, int, str]]:
    ev = [(0, 0, fmt.PROCESS_START, "")]
    t = 0
    for _ in range(10):
        # inference: linear 30 us (with a nested op of 5 us inside it), eq 2 x 4 us.
        ev += [(t, 0, OB, "inference"), (t + 10 * US, 0, BB, "F.linear"),
               (t + 20 * US, 0, BB, "aten.addmm"), (t + 25 * US, 0, BE, "aten.addmm"),
               (t + 40 * US, 0, BE, "F.linear"),
               (t + 50 * US, 0, BB, "Tensor.__eq__"), (t + 54 * US, 0, BE, "Tensor.__eq__"),
               (t + 60 * US, 0, BB, "Tensor.__eq__"), (t + 64 * US, 0, BE, "Tensor.__eq__"),
               (t + 70 * US, 0, OE, "inference")]
        t += 70 * US
        # simulation: a backend call of 50 us with a 20 us simulator call inside it.
        ev += [(t, 0, OB, "simulation"), (t + 5 * US, 0, BB, "torch.as_tensor"),
               (t + 15 * US, 0, SB, "mujoco.mj_step"), (t + 35 * US, 0, SE, "mujoco.mj_step"),
               (t + 55 * US, 0, BE, "torch.as_tensor"), (t + 60 * US, 0, OE, "simulation")]
        t += 60 * US
    ev.append((t, 0, fmt.PROCESS_END, ""))
    return ev


@pytest.mark.parametrize("batch", [None, 7, 3])
def test_named_calls_exact(batch: int | None):
    a = analyze(Trace(Path("."), {}, [process_trace(_events())]), batch_events=batch)
    df = named_calls(a).groupby(["operation", "category", "name"])[["calls", "seconds"]].sum()
    got = {k: (int(r.calls), round(r.seconds * 1e6, 3)) for k, r in df.iterrows()}
    assert got == {
        ("inference", "Backend", "F.linear"): (10, 300.0),  # nested addmm is linear's
        ("inference", "Backend", "Tensor.__eq__"): (20, 80.0),
        ("simulation", "Backend", "torch.as_tensor"): (10, 300.0),  # 50 - 20 us each
        ("simulation", "Simulator", "mujoco.mj_step"): (10, 200.0),
    }
    # The named calls account for each operation's Backend time exactly.
    ops = a.operations().set_index("operation")
    assert ops.loc["inference", "backend_s"] == pytest.approx(380e-6)
    assert ops.loc["simulation", "backend_s"] == pytest.approx(300e-6)


def test_top_calls_ranked():
    a = analyze(Trace(Path("."), {}, [process_trace(_events())]))
    top = top_calls(a)
    assert top["operation"].tolist() == ["inference", "inference", "simulation"]
    first = top.iloc[0]
    assert (first["name"], first["calls"]) == ("F.linear", 10)
    assert first["per_call_us"] == pytest.approx(30.0)
    assert first["share"] == pytest.approx(300 / 380)
    sim = top_calls(a, "Simulator")
    assert sim[["operation", "name"]].values.tolist() == [["simulation", "mujoco.mj_step"]]
