"""One unit per kind of figure in the text reports (rlscope.reporters.units): totals in
seconds however short or long the run, per-step and per-call figures in milliseconds, the
unit in the column header. A run whose vector steps take under 10 s but whose envs idle
longer than that used to say "envs idle at the barrier: 26994.000 ms"."""

from __future__ import annotations

import re

from rlscope.analysis import lockstep as ls
from rlscope.reporters import lockstep as render
from rlscope.reporters import table
from rlscope.reporters.units import millis, ms, s, seconds
from tests.unit.test_lockstep import vector_run
from tests.unit.test_report import GPU_CASE, _analysis

# Where a millisecond figure may stand in the lock-step text: per vector step, per env step.
PER_STEP = re.compile(r"\d\.\d+ ms (each|per vector step|vs|\(median)")


def test_the_formats():
    assert (seconds(1.23456), seconds(0.0002), seconds(0.0), seconds(float("nan"))) == \
        ("1.235", "<0.001", "0.000", "-")
    assert (seconds(0.25, signed=True), seconds(-0.0002, signed=True)) == ("+0.250", "-<0.001")
    assert (s(17.8968456), ms(0.0037412), millis(0.0037412)) == ("17.897 s", "3.74 ms", "3.74")


def test_lockstep_totals_in_seconds_per_step_in_milliseconds():
    # 4 envs in workers; one takes 3 s a step: the vector steps take ~9 s in all (the old
    # text chose ms for that), the three others idle ~27 s at the barrier.
    r = ls.analyze(vector_run([[1, 1, 1, 3000]] * 3))
    (v,) = r.vector_envs
    (t,) = r.tables
    assert v.step_s < 10 < v.idle_env_s
    text = render.render(r, "text")
    assert f"envs idle at the barrier: {v.idle_env_s:.3f} s in all" in text
    assert f"Vector steps: {v.step_s:.3f} s ({1e3 * v.step_s / 3:.2f} ms each)" in text
    assert f"Lock-step loss: {v.lockstep_loss_s:.3f} s = " in text
    assert f"now take {v.step_s:.3f} s)" in text
    # Every millisecond figure in the prose is a per-step one; nothing else is in ms.
    assert len(re.findall(r"\d\.\d+ ms\b", text)) == len(PER_STEP.findall(text)) > 0
    lines = text.splitlines()
    head = next(ln for ln in lines if "Share" in ln).split()
    assert head[:2] == ["Time", "s"] and head[-3:] == ["vector", "step", "ms"]
    (total,) = [ln.split() for ln in lines if ln.strip().startswith("Total")]
    assert total[1] == f"{t.total_s:.3f}"
    envs = next(ln for ln in lines if ln.strip().startswith("Env "))
    assert "Mean ms" in envs and "Barrier wait s" in envs and "Barrier wait ms" not in envs
    assert "Step s  Saved s" in text


def test_operations_table_in_seconds_for_a_short_run():
    out = table.render(_analysis(**GPU_CASE), "text")
    head = next(ln for ln in out.splitlines() if "Operation" in ln and "Calls" in ln)
    assert "Wall s" in head and "Self s" in head and "Python s" in head
    assert " ms" not in head
    assert "Wall ms" not in out and "Self ms" not in out
