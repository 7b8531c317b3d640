"""The hook microbenchmarks (rlscope.calibration.microbench) with each recorder: every
kind a calibration may fall back on gets a positive cost and a measured inside part."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlscope.calibration import microbench


def _fresh(call: str, tmp: Path) -> Any:
    """``call`` (of rlscope.calibration.microbench, ``TMP`` the directory it may use) in a
    fresh interpreter, as rls-prof runs the benchmarks; its JSON result."""
    import json

    r = subprocess.run([sys.executable, "-c",
                        "import json, sys; from pathlib import Path; "
                        "from rlscope.calibration.microbench import *; "
                        f"TMP = Path(sys.argv[1]); print(json.dumps({call}))", str(tmp)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_every_hook_is_measured(tmp_path: Path, recorder: str):
    import json

    # A fresh interpreter, as rls-prof --calibrate runs it (no recording of this one's).
    r = subprocess.run([sys.executable, "-m", "rlscope.calibration.microbench",
                        str(tmp_path), recorder], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) >= {"annotation", "env_call"}
    if recorder == "native":
        assert {"backend_call", "simulator_call", "wait_call"} <= set(out)
    for kind, m in out.items():
        # The Python twin records no native call wrappers: what it measures of those is a
        # difference of two near-equal loops, around zero (either sign), and no inside part.
        if kind in ("annotation", "phase_marker", "passed_call"):
            # Near what the loops resolve on some days (an annotation read -2..+2 ns, a
            # marker's error bar is a third of it, a passed call's 14 ± 16 ns): never
            # clearly below zero.
            assert m["per_event_ns"] > -3 * m["error_ns"] - 5, kind
            assert math.isfinite(m["inside_ns"]) and m["inside_ns"] >= 0, kind
        elif recorder == "native" or kind == "env_call":
            assert m["per_event_ns"] > 0, kind
            assert math.isfinite(m["inside_ns"]) and m["inside_ns"] >= 0, kind
        else:
            assert math.isfinite(m["per_event_ns"]), kind
    # An env step's wrapper does more than an annotation's hook (a Python-level call,
    # its recorder lookup and the operation check around two native records).
    assert out["env_call"]["per_event_ns"] > out["annotation"]["per_event_ns"]
    # A call passed on through a marked env step (gymnasium is a test dependency): a
    # wrapper's call, well under a microsecond.
    assert out["passed_call"]["per_event_ns"] < 1000


def test_a_module_forward_is_timed_through_the_wrappers(tmp_path: Path):
    """The phase marker's figure: a small policy's forward through rlscope's wrappers. Each
    forward records one marker (the outermost module call; the three nested in it pass
    through) and four backend calls (the input tensor, two linears, a tanh), priced apart
    at the given figure: the marker's cost is what is left."""
    import pytest

    pytest.importorskip("torch")
    out = _fresh("in_situ_marker(TMP, 'native', 40.0)", tmp_path)["phase_marker"]
    assert out["markers"] == 1.0 and out["backend_calls"] == 4.0
    assert math.isfinite(out["per_event_ns"]) and out["error_ns"] > 0
    assert out["inside_ns"] == max(out["per_event_ns"], 0.0)


def test_a_wrapped_call_is_timed_between_torch_ops(tmp_path: Path):
    """Where torch is installed, the native recorder's wrapped call is also timed in situ,
    per recorded call: the loop makes three wrapped calls an iteration, all recorded."""
    import pytest

    pytest.importorskip("torch")
    out = _fresh("in_situ_call(TMP)", tmp_path)
    assert out["in_situ_calls"] == 3.0
    assert math.isfinite(out["in_situ_ns"]) and out["in_situ_error_ns"] > 0


def test_an_env_step_is_timed_around_a_real_one(tmp_path: Path):
    """Where gymnasium is installed, an env's recorded step is also timed in situ, around
    CartPole's: one recorded env step per iteration."""
    import pytest

    pytest.importorskip("gymnasium")
    out = _fresh("in_situ_env_step(TMP)", tmp_path)
    assert out["in_situ_calls"] == 1.0
    assert math.isfinite(out["in_situ_ns"]) and out["in_situ_error_ns"] > 0


def test_a_pool_task_is_timed_in_a_real_pool(tmp_path: Path):
    """A one-worker pool's map calls, recorded and not in turns: every recorded call's
    two tasks are in the worker's trace and every call in the caller's count
    (format.META_POOL_CALLS), and both costs come with an error bar; a call's part paid
    by the pool's task thread, inside the wait for the results, is within its cost."""
    from rlscope.calibration import microbench
    from rlscope.trace import format as fmt
    from rlscope.trace.reader import read_trace

    out = _fresh("in_situ_pool(TMP, 'native', 0.0)", tmp_path)
    assert set(out) == {"pool_task", "pool_call"}
    for m in out.values():
        assert math.isfinite(m["per_event_ns"]) and m["error_ns"] > 0
    assert out["pool_task"]["inside_ns"] == 0
    assert 0 <= out["pool_call"]["inside_ns"] <= max(out["pool_call"]["per_event_ns"], 0)
    calls = microbench.POOL_PAIRS * microbench.POOL_BLOCK
    worker = read_trace(tmp_path / "in-situ-pool" / "worker").processes
    assert sum(k.startswith(fmt.META_TASK_PREFIX) for p in worker for k in p.metadata) \
        == 2 * calls
    caller = read_trace(tmp_path / "in-situ-pool" / "caller").processes
    assert sum(p.metadata.get(fmt.META_POOL_CALLS, 0) for p in caller) == calls


def test_a_python_stack_sample_pauses_a_thread_running_python(tmp_path: Path):
    """The sampler takes the GIL from a loop of clock reads: the loop pauses around each
    sample's time (at least three of them matched: else no figure), the pause a real
    stall (over the loop's 5 µs pause threshold) and far below the sampling period."""
    m = _fresh("in_situ_pysample(TMP)", tmp_path)["py_sample"]
    assert 5_000 < m["per_event_ns"] < 20_000_000 and m["error_ns"] >= 0
    assert m["inside_ns"] == 0


def test_a_stack_samples_stall_is_measured_again_while_other_load_delays_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The run-queue wait of the process's threads tells a stall the scheduler lengthened
    (a loaded machine read 2 ms for a 0.1 ms stall): a delayed try is measured again, the
    first clean one kept; when every try is delayed, the lower quartile of all of them."""
    tries: list[tuple[np.ndarray, int]] = []  # per try: its stalls, the run-queue wait
    clock = [0]

    def pauses(_path: Path) -> np.ndarray:
        stalls, waited = tries[len(calls)]
        calls.append(1)
        clock[0] += waited
        return stalls

    monkeypatch.setattr(microbench, "_sampled_pauses", pauses)
    monkeypatch.setattr(microbench, "_runqueue_wait_ns", lambda: clock[0])
    clean = np.array([100_000, 110_000, 120_000, 90_000, 105_000])
    delayed = np.array([100_000, 2_000_000, 3_000_000, 2_500_000, 95_000, 1_500_000])
    calls: list[int] = []
    tries[:] = [(delayed, 5_000_000), (clean, 10_000)]
    m = microbench.in_situ_pysample(tmp_path)["py_sample"]  # type: ignore[index]
    assert len(calls) == 2 and m["per_event_ns"] == 105_000
    assert m["runqueue_share"] == pytest.approx(10_000 / clean.sum()) and not m["loaded"]
    calls = []
    tries[:] = [(delayed, 5_000_000)] * 3
    m = microbench.in_situ_pysample(tmp_path)["py_sample"]  # type: ignore[index]
    assert len(calls) == microbench.PYSAMPLE_TRIES
    assert m["per_event_ns"] == np.percentile(np.concatenate([delayed] * 3), 25)
    assert m["per_event_ns"] < 1_000_000 and m["runqueue_share"] > 0.1 and m["loaded"]
    from rlscope.analysis.overhead.kinds import PY_SAMPLE
    from rlscope.calibration.build import priced

    assert priced(PY_SAMPLE, m)[2].endswith("the lower quartile of the stalls")


def test_in_situ_measurements_only_for_the_kinds_a_run_had(tmp_path: Path):
    """rls-prof passes the profiled run's kinds with events: a run with env steps and no
    backend calls, markers or passed calls gets the env step's in-situ figure and is
    spared the others (torch's import with them: ~2.5 s of a ~5 s benchmark)."""
    import json

    r = subprocess.run([sys.executable, "-m", "rlscope.calibration.microbench",
                        str(tmp_path), "native", "no-pools", "no-samples", "env_call"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert "in_situ_ns" in out["env_call"]
    assert "in_situ_ns" not in out["backend_call"]
    assert out["backend_call"]["per_event_ns"] > 0  # the tight loop, always
    assert "phase_marker" not in out and "passed_call" not in out


def test_in_situ_timings_are_skipped_where_the_runs_events_cannot_matter(tmp_path: Path):
    """A run whose events of a measurement's kinds could cost at most SKIP_SHARE of its
    CPU time even at CEILING_NS each is spared that measurement (SB3 PPO SubprocVecEnv(4):
    ~42k wrapped calls, 750 markers, 2.7k env steps in ~10 s of CPU: at most 0.1%, 0.005%,
    0.008%); its kinds are priced by their tight loop, or at nothing with the ceiling as
    the error bar where no tight loop prices them, and the cost lines say so."""
    import json

    from rlscope.calibration.build import model_costs
    from rlscope.calibration.calibrate import not_timed
    from rlscope.reporters.calibration import cost_line, plain_cost_line

    sb3 = {"backend_call": 37_667, "wait_call": 4_693, "phase_marker": 752,
           "env_call": 2_656, "annotation": 3_200}
    skip = microbench.negligible(sb3, 10.0 * 40)  # 400 s of CPU: every part negligible
    assert set(skip) == {"call", "marker", "env"}
    assert skip["marker"] == pytest.approx(752 * 700 / 400e9)
    assert microbench.negligible(sb3, 10.0) == {  # the call part matters in 10 s
        "marker": pytest.approx(752 * 700 / 10e9), "env": pytest.approx(2656 * 300 / 10e9)}
    assert microbench.negligible(sb3, 0.0) == {}
    r = subprocess.run([sys.executable, "-m", "rlscope.calibration.microbench",
                        str(tmp_path), "native", "no-pools", "no-samples",
                        ",".join(sb3), "marker,env"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    mb = json.loads(r.stdout)
    assert "in_situ_ns" in mb["backend_call"]  # the call part was made
    assert "in_situ_ns" not in mb["env_call"] and "phase_marker" not in mb
    not_timed(mb, {"marker": 1e-5, "env": 2e-5})
    costs = model_costs(mb, math.nan, math.nan, sb3)
    env, marker = costs["env_call"], costs["phase_marker"]
    assert env.per_event_ns == mb["env_call"]["per_event_ns"] > 0  # its tight loop
    assert (marker.per_event_ns, marker.error_ns) == (0.0, microbench.CEILING_NS["marker"])
    assert costs["backend_call"].fallback == ""  # timed in situ: priced as always
    for kind, pct in (("env_call", "0.002%"), ("phase_marker", "0.001%")):
        c = costs[kind]
        assert c.fallback == "not timed" and f"could cost at most {pct} of its CPU" in c.note
        assert c.note in cost_line(kind, c, "runs") and c.note in plain_cost_line(kind, c)
