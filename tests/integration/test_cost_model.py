"""rls-prof's cost model of the machine (issue 22): the hooks' microbenchmarks and an
empty process's start-up, measured in a few seconds into DIR/costs.json, found by the
analysis as an unchecked calibration."""

from __future__ import annotations

from pathlib import Path

from rlscope.analysis.overhead.applied import withheld_reason
from rlscope.analysis.overhead.model import find_calibration
from rlscope.calibration import cost_model
from rlscope.launch.child_env import Recording


def test_cost_model_is_measured_and_found(tmp_path: Path):
    out = tmp_path / "run"
    out.mkdir()
    cal, took = cost_model.measure(["python", "x.py"], out, Recording(str(out), cuda=False))
    assert took > 0
    assert cal is not None and (out / "costs.json").exists()
    found = find_calibration(out)
    assert found is not None and found.mode == "model"
    for kind in ("annotation", "backend_call", "env_call", "process"):
        c = found.costs[kind]
        assert c.per_event_ns > 0 and 0 <= c.inside_ns <= c.per_event_ns, (kind, c)
    assert "not been checked" in withheld_reason(found)  # raw numbers until --calibrate
    assert "an annotation" in cost_model.summary(found)
