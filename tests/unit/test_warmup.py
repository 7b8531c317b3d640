"""Warm-up apart on synthetic traces (rlscope.analysis.warmup, engine.firstcalls): the
first calls slower than the steady state are found, nested or not, whatever the batches
the sweep is fed; the extrapolation's rate starts after them."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlscope.analysis import analyze
from rlscope.analysis.engine.synthetic import process_trace
from rlscope.reporters import table
from rlscope.trace import format as fmt
from rlscope.trace.data import Trace

OB, OE = fmt.OPERATION_BEGIN, fmt.OPERATION_END
MS = 1_000_000
STEP_MS = [10, 6, 4] + [1] * 27  # three slow calls, then the steady state


def _run(batch: int | None = None, steps: list[int] = STEP_MS):
    events, progress, t = [(0, 0, fmt.PROCESS_START, "")], [], 5 * MS
    for i, d in enumerate(steps):
        events += [(t, 0, OB, "iteration"), (t + MS // 10, 0, OB, "step"),
                   (t + MS // 10 + d * MS, 0, OE, "step"), (t + (d + 1) * MS, 0, OE, "iteration")]
        t += (d + 1) * MS
        progress.append((t, 10 * (i + 1), 10_000))
    events.append((t + MS, 0, fmt.PROCESS_END, ""))
    p = process_trace(events, progress=progress)
    return analyze(Trace(Path("."), {}, [p]), batch_events=batch)


@pytest.mark.parametrize("batch", [None, 7, 2])
def test_first_slow_calls_are_the_warmup(batch):
    wu = _run(batch).warmup().set_index("operation")
    step = wu.loc["iteration > step"]
    assert step["warmup_calls"] == 3
    assert step["warmup_s"] == pytest.approx(0.020)
    assert step["steady_call_s"] == pytest.approx(0.001)
    assert step["excess_s"] == pytest.approx(0.017)
    assert wu.loc["iteration", "warmup_calls"] == 3  # the enclosing operation too


def test_a_slow_call_near_the_end_does_not_hide_the_warmup():
    # Two compiles (calls 0 and 6) and a descheduled call two before the end, as a loaded
    # machine ran the two-batch-size compile test: the warm-up is up to the second
    # compile, not dropped for the late slow call.
    steps = [50, 1, 1, 1, 1, 1, 40, 1, 1, 1, 5, 1]
    step = _run(steps=steps).warmup().set_index("operation").loc["iteration > step"]
    assert step["warmup_calls"] == 7
    assert step["excess_s"] == pytest.approx(0.095 - 0.007)


def test_steady_calls_have_no_warmup():
    assert not len(_run(steps=[1] * 30).warmup())
    assert not len(_run(steps=[2, 1, 1, 1] + [1] * 26).warmup())  # within 2x: noise
    # slow calls scattered after a fast first one (a loaded machine): not a warm-up
    assert not len(_run(steps=[1, 1, 5, 1, 1, 1, 5] + [1] * 23).warmup())


def test_extrapolation_starts_after_the_warmup():
    a = _run()
    ex = a.extrapolation().iloc[0]
    wu = a.warmup()
    end_s = (wu["end_ns"].max() - a.results[0].span[0]) / 1e9
    assert ex["steady_from_s"] >= end_s
    # 27 steady iterations of 2 ms (1 ms step + 1 ms around it): 10 steps each
    assert ex["steps_per_s"] == pytest.approx(10 / 0.002, rel=0.02)
    assert "Warm-up" in table.render_text(a)
    assert table.to_dict(a)["warmup"][0]["warmup_calls"] == 3
