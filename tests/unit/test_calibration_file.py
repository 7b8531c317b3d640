"""Calibration file round trip, configuration choice and pruning, the work limit."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest

from rlscope.analysis.overhead.model import (
    Calibration,
    KindCost,
    read_calibration,
    write_calibration,
)
from rlscope.calibration.build import build_calibration
from rlscope.calibration.configs import configurations, prune
from rlscope.calibration.estimate import RunSample
from rlscope.errors import RLScopeError
from rlscope.inprocess.limits import WorkLimitReached, limited, parse_limit


def test_round_trip_keeps_costs_and_writes_no_nan(tmp_path: Path):
    cal = Calibration(["python", "t.py"], {"annotation": KindCost(300, 50, math.nan, "runs")},
                      uninstrumented={"mean_s": 1.0, "std_s": 0.01, "n": 3})
    p = tmp_path / "calibration.json"
    write_calibration(cal, p)
    assert "NaN" not in p.read_text()
    back = read_calibration(p)
    c = back.costs["annotation"]
    assert (c.per_event_ns, c.inside_ns, c.outside_ns) == (300, 50, 250)
    assert math.isnan(c.error_ns) and back.command == ["python", "t.py"]


def test_wrong_files_are_one_line_errors(tmp_path: Path):
    p = tmp_path / "c.json"
    p.write_text("{}")
    with pytest.raises(RLScopeError, match="not an rlscope calibration"):
        read_calibration(p)
    p.write_text(json.dumps({"format": "rlscope-calibration", "version": 99}))
    with pytest.raises(RLScopeError, match="version 99"):
        read_calibration(p)


def test_configurations_follow_the_intercepted_libraries():
    names = [c.name for c in configurations(["torch", "gym", "mujoco"], cuda=True)]
    assert names == ["uninstrumented", "base", "annotations", "annotations+backend",
                     "annotations+simulator", "full-no-cuda", "full-cuda-api", "full"]
    api_only = configurations(["torch"], cuda=True)[-2]
    assert api_only.cuda and not api_only.cuda_activity and api_only.needs == "cuda_api"
    assert [c.name for c in configurations([], cuda=False)] == [
        "uninstrumented", "base", "annotations", "full"]
    waits = configurations(["gym", "wait"], cuda=False)
    assert [c.name for c in waits] == ["uninstrumented", "base", "annotations",
                                       "annotations+wait", "full"]
    assert waits[3].intercept == ("gym", "wait") and waits[3].needs == "wait_call"


def test_prune_drops_configurations_that_tell_nothing_apart():
    cs = configurations(["torch", "gym", "mujoco"], cuda=True)
    counts = {"base": {"process": 1}, "annotations": {"process": 1, "annotation": 10},
              "annotations+backend": {"process": 1, "annotation": 10, "backend_call": 99},
              "annotations+simulator": {"process": 1, "annotation": 10},
              "full-no-cuda": {"process": 1, "annotation": 10, "backend_call": 99},
              "full": {"process": 1, "annotation": 10, "backend_call": 99}}
    assert [c.name for c in prune(cs, counts)] == ["uninstrumented", "base", "annotations",
                                                   "full"]


def test_build_uses_microbenchmark_for_unresolvable_kinds():
    samples = []
    for r in range(4):
        samples.append(RunSample("uninstrumented", r, 10.0))
        samples.append(RunSample("base", r, 10.01, {"process": 1}))
        # annotation overhead drowned in noise: alternating sign
        samples.append(RunSample("full", r, 10.01 + (0.001 if r % 2 else -0.001),
                                 {"process": 1, "annotation": 1000}))
    mb = {"annotation": {"per_event_ns": 120.0, "inside_ns": 40.0}}
    cal = build_calibration(["x"], samples, configurations([], False), 4, mb)
    a = cal.costs["annotation"]
    assert a.source == "microbenchmark" and a.per_event_ns == 120 and a.inside_ns == 40
    assert cal.costs["process"].per_event_ns == pytest.approx(1e7, rel=1e-3)
    assert cal.validation["calibration_rounds"] == [0, 2]


def test_work_limit_counts_reports():
    seen = []
    f = limited(lambda t, total=None, unit="timesteps": seen.append((t, unit)), 2)
    f(1)
    with pytest.raises(WorkLimitReached) as e:
        f(2, 4, unit="episodes")  # the unit passed on
    assert e.value.code == 0 and seen == [(1, "timesteps"), (2, "episodes")]
    # Every argument passed on: a script's report_progress(..., metrics=...) under
    # RLSCOPE_MAX_PROGRESS raised TypeError when the bound took three named ones.
    got = []
    g = limited(lambda t, total=None, **kw: got.append((t, kw)), 1)
    with pytest.raises(WorkLimitReached):
        g(1, 3, metrics={"reward": 1.0})
    assert got == [(1, {"metrics": {"reward": 1.0}})]
    assert parse_limit(None) is None and parse_limit("5") == 5
    with pytest.raises(ValueError):
        parse_limit("0")


def test_an_integrations_progress_is_counted_by_its_librarys_method(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """RLSCOPE_PROGRESS_BY=rllib: the work limit counts ``Algorithm.train`` calls (the
    module already imported here: installed at once); an unknown integration, or a
    library without that method, runs unbounded and says so."""
    import types

    from rlscope.inprocess.limits import install_integration_limit
    from rlscope.libraries import PROGRESS_COUNTED

    module, cls_name, method = PROGRESS_COUNTED["rllib"]
    calls = []

    class Algorithm:
        def train(self) -> dict:
            calls.append(1)
            return {"training_iteration": len(calls)}

    fake = types.ModuleType(module)
    fake.Algorithm = Algorithm  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module, fake)
    assert (cls_name, method) == ("Algorithm", "train")
    assert install_integration_limit("rllib", 2)
    algo = Algorithm()
    assert algo.train() == {"training_iteration": 1}
    with pytest.raises(WorkLimitReached):
        algo.train()
    assert len(calls) == 2  # the second iteration ran whole, then the run ended
    assert not install_integration_limit("nothing-we-know", 2)
    empty = types.ModuleType(module)
    monkeypatch.setitem(sys.modules, module, empty)
    assert install_integration_limit("rllib", 2)
    assert "Algorithm.train not found; its progress is not counted" in \
        capsys.readouterr().err


def test_chunk_configurations_switch_call_categories_by_mask():
    from rlscope.calibration.chunked import chunk_configs

    masks = {c.name: c.mask for c in chunk_configs(
        configurations(["torch", "mujoco", "gym", "wait"], cuda=False))}
    # bit 0 backend, bit 1 simulator, bit 2 wait, bit 3 phase markers, which come with
    # the backend's wrappers as in a profiled run (native/common/calls.h)
    assert masks == {"uninstrumented": 0, "annotations": 0, "annotations+backend": 9,
                     "annotations+simulator": 2, "annotations+wait": 4, "full": 15}
    # Every library (rls-prof's default): the annotating integrations include EnvPool's
    # and PufferLib's, which make Simulator calls; the annotations copy still records
    # no simulator's calls (the bit would switch MuJoCo's on too).
    from rlscope.intercept import parse

    masks = {c.name: c.mask for c in chunk_configs(configurations(parse("auto"),
                                                                  cuda=False))}
    assert masks == {"uninstrumented": 0, "annotations": 0, "annotations+backend": 9,
                     "annotations+simulator": 2, "annotations+wait": 4, "full": 15}


def _disturbed_calibrating_rounds(held_out_full_s: float) -> list[RunSample]:
    """Rounds 0 and 2 calibrate: their full runs 1 s slower for 10,000 annotations (a
    steady 100 µs each, as when other load hits those runs); rounds 1 and 3 validate."""
    samples = []
    for r in range(4):
        samples.append(RunSample("uninstrumented", r, 10.0))
        full_s = (11.0 + 0.001 * r) if r % 2 == 0 else held_out_full_s
        samples.append(RunSample("full", r, full_s, {"annotation": 10_000}))
    return samples


def test_estimates_that_fail_the_held_out_check_give_way_to_the_microbenchmark(
        tmp_path: Path):
    from rlscope.reporters.calibration import summary_lines

    mb = {"annotation": {"per_event_ns": 120.0, "inside_ns": 40.0}}
    cal = build_calibration(["x"], _disturbed_calibrating_rounds(10.001),
                            configurations([], False), 4, mb)
    a = cal.costs["annotation"]
    # The runs' 100 µs per annotation would leave the held-out rounds ~10% under the
    # uninstrumented time; no correction leaves them 0.01% over.
    assert a.estimate_ns == pytest.approx(1e5, rel=0.01) and a.error_ns < 0.1 * a.estimate_ns
    assert (a.source, a.fallback, a.per_event_ns, a.inside_ns) == (
        "microbenchmark", "held-out", 120.0, 40.0)
    failed = cal.validation["estimates_failed"]
    assert failed["total_error_pct"] == pytest.approx(-10.0, abs=0.1)
    assert abs(cal.validation["total_error_pct"]) < 0.1
    text = "\n".join(summary_lines(cal, verbose=True))  # the technical detail
    assert "worse than not correcting" in text and "microbenchmark is used" in text
    plain = "\n".join(summary_lines(cal))  # by default, in plain words
    assert ("an operation or phase beginning or ending: 120 ns, from a benchmark of "
            "rlscope's hooks (the value measured on this workload failed the check below)"
            in plain)
    assert "microbenchmark" not in plain and "held-out" not in plain
    # Still in the file a later run reads.
    write_calibration(cal, tmp_path / "c.json")
    assert read_calibration(tmp_path / "c.json").costs["annotation"].fallback == "held-out"


def test_a_hook_that_benchmarks_at_nothing_is_still_a_fallback():
    """An annotation's tight loop reads -2..+2 ns (below what it resolves): the
    calibration falls back to it all the same (priced at nothing) when the runs'
    estimate fails the held-out check (once an annotation's 1.1 µs chunk estimate
    stayed in, leaving the check -0.8% against +0.6% raw, and the report withheld)."""
    mb = {"annotation": {"per_event_ns": -1.5, "inside_ns": 40.0}}
    cal = build_calibration(["x"], _disturbed_calibrating_rounds(10.001),
                            configurations([], False), 4, mb)
    a = cal.costs["annotation"]
    assert (a.source, a.fallback, a.per_event_ns) == ("microbenchmark", "held-out", 0.0)
    assert abs(cal.validation["total_error_pct"]) < 0.1


def test_estimates_the_held_out_rounds_confirm_are_kept():
    mb = {"annotation": {"per_event_ns": 120.0, "inside_ns": 40.0}}
    cal = build_calibration(["x"], _disturbed_calibrating_rounds(11.0),
                            configurations([], False), 4, mb)
    a = cal.costs["annotation"]
    assert a.source.startswith("runs") and a.fallback == ""
    assert "estimates_failed" not in cal.validation



def test_env_steps_are_costed_by_the_microbenchmark_and_corrected_in_validation(
        tmp_path: Path):
    from rlscope.reporters.calibration import summary_lines

    samples = []
    for r in range(4):  # 10,000 annotations at 100 ns, 5,000 env steps at 2 µs
        samples.append(RunSample("uninstrumented", r, 10.0))
        samples.append(RunSample("full", r, 10.0 + 0.001 + 0.01,
                                 {"annotation": 10_000, "env_call": 5_000}))
    mb = {"annotation": {"per_event_ns": 80.0, "inside_ns": 30.0},
          "env_call": {"per_event_ns": 2000.0, "inside_ns": 700.0}}
    cal = build_calibration(["x"], samples, configurations([], False), 4, mb)
    e, a = cal.costs["env_call"], cal.costs["annotation"]
    assert (e.per_event_ns, e.inside_ns, e.source, e.events) == (
        2000.0, 700.0, "microbenchmark", 5_000)
    assert a.per_event_ns == pytest.approx(100.0, rel=1e-6)  # not 1,100 ns
    assert abs(cal.validation["total_error_pct"]) < 1e-6
    assert "env_call: 2000 ns per env step or reset (tight-loop microbenchmark of the env " \
        "wrappers" in "\n".join(summary_lines(cal, verbose=True))
    assert "an env step or reset: 2.0 µs, from a benchmark of rlscope's hooks (it cannot " \
        "be measured apart from the simulation around it)" in "\n".join(summary_lines(cal))
    write_calibration(cal, tmp_path / "c.json")
    assert read_calibration(tmp_path / "c.json").costs["env_call"].source == "microbenchmark"


def test_estimates_slightly_worse_than_raw_give_way_too():
    """Issue 22: the demo's held-out check was -1.2% corrected against +0.4% raw; any
    estimate that leaves the held-out rounds further off than no correction gives way to
    the microbenchmark when that does better."""
    mb = {"annotation": {"per_event_ns": 120.0, "inside_ns": 40.0}}
    samples = []
    for r in range(4):
        samples.append(RunSample("uninstrumented", r, 10.0))
        full_s = 10.2 if r % 2 == 0 else 10.04  # estimates: 20 µs; held out: +0.4% raw
        samples.append(RunSample("full", r, full_s, {"annotation": 10_000}))
    cal = build_calibration(["x"], samples, configurations([], False), 4, mb)
    assert cal.costs["annotation"].fallback == "held-out"
    assert abs(cal.validation["total_error_pct"]) <= abs(cal.validation["raw_total_error_pct"])


@pytest.mark.parametrize("by", ["", "torch-optimizer"])
def test_a_check_run_tallies_its_main_processs_work_and_nothing_else(tmp_path: Path,
                                                                     by: str):
    """RLSCOPE_WORK_TALLY: a run without rlscope writes how many progress reports (or
    torch optimizer steps) its main process made, at exit; a forked child's are not
    counted, and the processes it starts run without rlscope's bootstrap at all."""
    import json
    import subprocess

    from rlscope.launch import child_env

    script = tmp_path / "work.py"
    script.write_text(
        "import os, subprocess, sys\n"
        "import rlscope\n"
        "if sys.argv[1]:\n"
        "    import torch\n"
        "    w = torch.nn.Parameter(torch.ones(2))\n"
        "    opt = torch.optim.SGD([w], lr=0.1)\n"
        "    unit = lambda: (w.sum().backward(), opt.step())\n"
        "else:\n"
        "    unit = lambda: rlscope.report_progress(1)\n"
        "for _ in range(7):\n"
        "    unit()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    unit()\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "probe = ('import os, sys; print(os.environ.get(\"PYTHONPATH\", \"\"), '\n"
        "         '\"rlscope\" in sys.modules, '\n"
        "         'sorted(k for k in os.environ if k.startswith(\"RLSCOPE_\")))')\n"
        "print(subprocess.run([sys.executable, '-c', probe], capture_output=True,\n"
        "                     text=True).stdout.strip())\n")
    tally = tmp_path / "tally.json"
    env = child_env.uninstrumented(tally=str(tally), by=by)
    env["PYTHONPATH"] = env["PYTHONPATH"] + os.pathsep + str(tmp_path / "mine")
    r = subprocess.run([sys.executable, str(script), by], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(tally.read_text()) == {"count": 7}
    assert r.stdout.strip() == f"{tmp_path / 'mine'} False []"  # the user's path kept


JAX_TALLIED = """
import jax, jax.numpy as jnp

@jax.jit
def inner(x):
    return x * 2

@jax.jit
def update(x):
    return inner(x) + 1  # inner's call while update is traced: nested, not counted

x = jnp.ones(3)
for _ in range(7):
    x = update(x)
inner(x)
assert update.lower(x) is not None  # a jitted function's attributes still work
"""

KERAS_TALLIED = """
import os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np
import keras
model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
opt = keras.optimizers.SGD(0.01)
import tensorflow as tf
for _ in range(5):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(model(np.ones((4, 2), "float32")) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))  # calls apply: once
"""


@pytest.mark.parametrize("library,by,script,count", [
    ("jax", "jax-jit:update", JAX_TALLIED, 7),
    ("jax", "jax-jit:inner", JAX_TALLIED, 1),
    ("keras", "keras-optimizer", KERAS_TALLIED, 5),
])
def test_a_jax_or_keras_loops_work_is_counted_as_the_recorder_sees_it(
        tmp_path: Path, library: str, by: str, script: str, count: int):
    """Loops with neither progress reports nor torch: a run counts a jitted function's
    outermost calls (as the recorder records them: not those made while another jitted
    function is traced), or Keras optimizer steps (``apply_gradients`` calls ``apply``:
    one step), for the check's bound and tally."""
    import json
    import subprocess

    from rlscope.launch import child_env

    pytest.importorskip(library)
    tally = tmp_path / "tally.json"
    (tmp_path / "work.py").write_text(script)
    r = subprocess.run([sys.executable, str(tmp_path / "work.py")],
                       env=child_env.uninstrumented(tally=str(tally), by=by),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(tally.read_text()) == {"count": count}
