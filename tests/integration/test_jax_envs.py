"""JAX envs with no code change: an unannotated loop stepping a MuJoCo MJX env through
``jax.jit(mjx.step)`` (workloads/jax_env_loop.py, timing its env calls with perf_counter)
under rls-prof, its trace read back: every env step is one ``simulation`` call (its time
what the loop measured), spent in the Simulator (the XLA execution), its compile apart;
the jitted policy stays Backend. And which functions count as a JAX env's step."""

from __future__ import annotations

import functools
import json
import sys
import types
from pathlib import Path

import pytest

import rlscope.analysis
from rlscope.intercept.jax_envs import env_call
from tests.conftest import run_tool

WORKLOAD = Path(__file__).parent / "workloads" / "jax_env_loop.py"


def _in_module(module: str, qualname: str, name: str) -> types.FunctionType:
    def f(*args: object) -> None:
        return None

    f.__module__, f.__qualname__, f.__name__ = module, qualname, name
    return f


def test_what_counts_as_a_jax_env_step():
    # gymnax jits its base class's step and reset when the class is made (self static).
    step = _in_module("gymnax.environments.environment", "Environment.step", "step")
    assert env_call(step) == "gymnax.Environment.step"
    assert env_call(functools.partial(step, 1)) == "gymnax.Environment.step"
    # brax: jax.jit(env.reset) on an instance of a class derived from brax's Env,
    # also through jax.vmap (functools.wraps: __wrapped__).
    base = type("Env", (), {"__module__": "brax.envs.base"})

    class Hopper(base):  # type: ignore[misc,valid-type]
        def reset(self) -> None:
            return None

    bound = Hopper().reset
    assert env_call(bound) == "brax.Hopper.reset"
    vmapped = functools.wraps(bound)(lambda *a: None)
    assert env_call(vmapped) == "brax.Hopper.reset"
    # MJX's module functions.
    assert env_call(_in_module("mujoco.mjx._src.forward", "step", "step")) == "mjx.step"
    # Not env steps: other functions of these libraries, a user's function, a method
    # named step of an unrelated class, plain mujoco.
    assert env_call(_in_module("gymnax.utils", "helper", "helper")) is None
    assert env_call(_in_module("gymnax.environments.environment", "step", "step")) is None
    assert env_call(_in_module("__main__", "Env.step", "step")) is None
    class Env:
        def step(self) -> None:
            return None

    assert env_call(Env().step) is None
    assert env_call(_in_module("mujoco", "mj_step", "step")) is None
    assert env_call(None) is None and env_call(len) is None


def test_mjx_step_is_simulation(tmp_path: Path):
    pytest.importorskip("mujoco.mjx", reason="mujoco-mjx (the mjx extra)")
    out, truth = tmp_path / "run", tmp_path / "m.json"
    r = run_tool("rls-prof", "-o", str(out), "-q", "--", sys.executable, str(WORKLOAD),
                 str(truth), "150", timeout=300)
    assert r.returncode == 0, r.stderr
    m = json.loads(truth.read_text())
    a = rlscope.analysis.load(out)
    ops = a.operations().set_index("operation")
    sim = ops.loc["simulation"]
    assert sim["calls"] == m["env_calls"]
    assert m["env_s"] * 0.7 <= sim["wall_s"] <= m["env_s"] * 1.05, (sim["wall_s"], m)
    # The XLA execution is the simulator's, the dispatch and compile inside it too; the
    # first call compiled it: compile time apart, within the first call.
    assert sim["simulator_s"] >= 0.5 * sim["self_s"], sim
    assert sim["simulator_calls"] == m["env_calls"]
    assert sim["compiles"] >= 1
    assert 0 < sim["compile_s"] <= m["first_env_s"] * 1.05
    # The jitted policy is Backend, outside simulation.
    assert ops["backend_calls"].sum() - sim["backend_calls"] >= m["forwards"]
