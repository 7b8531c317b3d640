"""The live view's reading and numbers (rlscope.analysis.live, rlscope.trace.tail,
rlscope.reporters.live): a trace copied into the run directory a few bytes at a time, cut
anywhere (mid-record), is read incrementally without error, and once whole gives the same
operation times and calls as the report; the verdict and TensorBoard scalars follow their
rules."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

import rlscope
from rlscope.analysis import open_run
from rlscope.analysis.live import LiveRun, ProcessView, Snapshot
from rlscope.analysis.pipeline.run import RunOptions
from rlscope.reporters import live as view
from rlscope.trace import format as fmt


def _record(out: Path, recorder: str) -> Path:
    rlscope.start(out, recorder=recorder)
    try:
        for i in range(200):
            with rlscope.phase("training"):
                with rlscope.operation("simulation"), rlscope.operation("env.step"):
                    time.sleep(0.0002)
                with rlscope.operation("inference"):
                    sum(range(2000))
            rlscope.report_progress((i + 1) * 4, 800)
            if i % 50 == 0:
                rlscope.flush()  # several chunks
    finally:
        rlscope.stop()
    (f,) = out.glob("python.*" + fmt.FILE_SUFFIX)
    return f


def test_growing_file_read_incrementally(tmp_path: Path, recorder: str) -> None:
    src = _record(tmp_path / "src", recorder)
    run = tmp_path / "run"
    run.mkdir()
    dst = run / src.name
    data = src.read_bytes()
    live = LiveRun(run)
    step = max(len(data) // 23, 1)  # cuts inside records
    with open(dst, "wb") as f:
        for i in range(0, len(data), step):
            f.write(data[i:i + step])
            f.flush()
            snap = live.poll()
            assert not snap.warnings
    snap = live.poll()
    (p,) = snap.processes
    assert p.ended and not snap.running
    assert p.timesteps == 800 and p.unit == "timesteps"

    a = open_run(run, RunOptions(correct=False, infer="off")).analysis
    assert a is not None
    ops = a.operations().set_index("operation")
    for op in ("simulation", "simulation > env.step", "inference"):
        self_s = sum(v for (ph, path, _), v in p.total.items() if path == op)
        assert self_s == pytest.approx(ops.loc[op, "self_s"], rel=1e-9, abs=1e-9)
        assert p.calls[("training", op)] == ops.loc[op, "calls"] == 200


def _view(last: dict, total: dict | None = None, ended: bool = False) -> ProcessView:
    return ProcessView(1, 0, "train.py", "", ended, total or last, last, {}, 400,
                       "timesteps", 200.0, 180.0, 100, 95.0, 1 << 20, ["training"])


def test_verdict_rule() -> None:
    sim = {("", "simulation", "Simulator"): 0.6, ("", "inference", "Python"): 0.4}
    assert view.verdict(_view(sim)).startswith("simulator-bound (Simulator 60%")
    mixed = {("", "simulation", "Simulator"): 0.45, ("", "inference", "Python"): 0.55}
    assert view.verdict(_view(mixed)).startswith("Python-bound")
    even = {("", "a", "Simulator"): 0.4, ("", "b", "Python"): 0.35, ("", "c", "Backend"): 0.25}
    assert view.verdict(_view(even)).startswith("mixed (Simulator 40%")
    assert view.verdict(_view({}, sim, ended=True)).startswith("whole run: simulator-bound")


def test_scalars() -> None:
    last = {("", "simulation", "Simulator"): 0.3, ("", "simulation > env.step", "Python"): 0.1,
            ("", "inference", "Python"): 0.1}
    snap = Snapshot(Path("."), 10.0, 0.5, [_view(last)], True)
    step, s = view.scalars(snap)
    assert step == 400
    assert s["rlscope/train.py.1/share_pct/simulation"] == pytest.approx(80.0)
    # 100 steps reported with the new events; 0.4 s of simulation -> 4 ms per step
    assert s["rlscope/train.py.1/ms_per_step/simulation"] == pytest.approx(4.0)
    assert s["rlscope/train.py.1/steps_per_s"] == 200.0
    assert not any(math.isnan(v) for v in s.values())
