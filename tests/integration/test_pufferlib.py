"""PufferLib with no code change: the hand-written, unannotated PPO-style loop
(workloads/handwritten_vec.py, which times itself with perf_counter around the real
calls) on PufferLib's C CartPole and on its vector envs, under rls-prof, its trace read
back and compared with what the loop measured.

PufferLib does not pip-install here; scripts/install_pufferlib.sh puts its Python package
and its C CartPole into the venv (scripts/test.sh runs it), and these tests skip
without them.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import rlscope.analysis
from rlscope.analysis.calls import named_calls
from rlscope.trace import format as fmt
from tests.conftest import run_tool
from tests.integration.vec_loops import check_operations, run

pytest.importorskip("torch")
# Found, not imported: PufferLib's __init__ links "resources" into the cwd.
_spec = importlib.util.find_spec("pufferlib")
if _spec is None or _spec.origin is None or not any(
        Path(_spec.origin).parent.glob("ocean/cartpole/binding*.so")):
    pytest.skip("PufferLib is not installed (scripts/install_pufferlib.sh)",
                allow_module_level=True)


def by_operation(ops, pid: int):  # type: ignore[no-untyped-def]
    return ops[ops.pid == pid].set_index("operation")


def main_pid(ops, measured: dict[str, float]) -> int:  # type: ignore[no-untyped-def]
    sim = ops[ops.operation == "simulation"]
    (pid,) = sim.pid[sim.calls == measured["env_calls"]].tolist()
    return int(pid)


def _c_env_built(name: str) -> bool:
    return any(Path(_spec.origin).parent.glob(f"ocean/{name}/binding*.so"))  # type: ignore


@pytest.mark.parametrize("c_env", ["cartpole", "squared", "pong"])
def test_native_env(tmp_path: Path, c_env: str):
    """A C env (one object stepping 512 envs; CartPole, and two more of PufferLib's C envs,
    found by the same rule): every step and reset one ``simulation`` call holding one
    call into its C extension, where most of its time goes (CartPole's; a large share of
    the others': the rest is PufferLib's Python around it)."""
    if not _c_env_built(c_env):
        pytest.skip(f"PufferLib's C {c_env} is not built (scripts/install_pufferlib.sh)")
    measured, a = run(tmp_path, "--lib", "pufferlib", "--backend", "native", "--envs", "512",
                      "--c-env", c_env)
    ops = a.operations()
    check_operations(measured, ops)
    assert measured["env_calls"] == measured["vector_steps"] + 1  # + the reset
    sim = ops.set_index("operation").loc["simulation"]
    assert sim["simulator_calls"] == measured["env_calls"]  # binding.vec_step / vec_reset
    # CartPole's C step holds most of the time (~75% idle); Squared's and Pong's lighter
    # steps ~70%, and beside other load the Python around them, timed by the wall clock,
    # swells (seen: 49%): a large share, not most.
    share = sim["simulator_s"] / (sim["simulator_s"] + sim["python_s"])
    assert share > (0.5 if c_env == "cartpole" else 0.3), sim
    # Named after the env's class, by the rule that found it (not a list of C envs).
    calls = named_calls(a)
    sim_calls = calls[(calls["category"] == "Simulator") & (calls["operation"] == "simulation")]
    cls = {"cartpole": "Cartpole", "squared": "Squared", "pong": "Pong"}[c_env]
    got = sim_calls.groupby("name")["calls"].sum().to_dict()
    assert got == {f"pufferlib.{cls}.vec_step": measured["vector_steps"],
                   f"pufferlib.{cls}.vec_reset": 1}, got


def test_serial(tmp_path: Path):
    """``pufferlib.vector.Serial`` over gymnasium's CartPole: each vector step one
    ``simulation`` call; the envs' own code is Python."""
    measured, a = run(tmp_path, "--lib", "pufferlib", "--backend", "serial", "--envs", "8")
    ops = a.operations()
    check_operations(measured, ops)
    sim = ops.set_index("operation").loc["simulation"]
    assert sim["python_s"] > 0.5 * sim["self_s"], sim


def test_multiprocessing_async(tmp_path: Path):
    """``pufferlib.vector.Multiprocessing`` in async mode (2 workers, a batch of one
    worker's envs): a ``recv`` and a ``send`` per batch, the recv's wait for the workers
    Waiting; each worker's env steps ``simulation`` in its own trace."""
    measured, a = run(tmp_path, "--lib", "pufferlib", "--backend", "multiprocessing",
                      "--mode", "async", "--envs", "4")
    ops = a.operations()
    pid = main_pid(ops, measured)
    check_operations(measured, ops[ops.pid == pid])
    assert measured["env_calls"] == 2 * measured["vector_steps"] + 1  # + async_reset
    sim = by_operation(ops, pid).loc["simulation"]
    assert sim["waiting_s"] > 0.5 * sim["self_s"], sim
    assert sim["wait_calls"] >= measured["vector_steps"]
    workers = ops[(ops.pid != pid) & (ops.operation == "simulation")]
    assert len(workers) == 2, ops
    # Each worker is named a vector-env worker with its envs.
    tree = a.process_tree().set_index("pid")
    labels = sorted(str(x) for x in tree.loc[sorted(workers.pid), "role_label"])
    assert labels == [f"{fmt.ROLE_VECENV_WORKER} (envs 0-1 of 4)",
                      f"{fmt.ROLE_VECENV_WORKER} (envs 2-3 of 4)"], tree
    # Each send steps one worker's envs; each worker resets once; the last send's step
    # may be cut short by close(), which terminates the workers.
    steps = int(workers.calls.sum()) - 2
    assert measured["vector_steps"] - 1 <= steps <= measured["vector_steps"], workers


def test_a_slow_env_lags(tmp_path: Path):
    """Async ``Multiprocessing`` (4 envs on 2 workers, batches of the first worker done,
    ``sync_traj=False``) where env 3 sleeps 10 ms in each step: its worker's batches come
    back less often. The tally of sampled batches gives each env's share as the loop
    counted it on every batch, and the report names the slow worker's envs lagging."""
    measured, _ = run(tmp_path, "--lib", "pufferlib", "--backend", "multiprocessing",
                      "--mode", "async", "--envs", "4", "--slow-env", "3", "--slow-ms", "10",
                      "--first-done")
    ls = rlscope.analysis.load_lockstep(tmp_path / "run")
    [b] = ls.batches
    assert (b.library, b.num_envs, b.batch_size) == ("PufferLib", 4, 2)
    assert b.batches == measured["vector_steps"]  # one recv each
    assert b.counts.sum() == b.tallied * b.batch_size
    own = np.asarray(measured["batch_envs"], dtype=float)
    own_share = own / (own.sum() / len(own))  # each env's count over an even share
    assert own_share[3] < 0.5, own_share  # the slow worker: clearly fewer batches
    assert np.abs(b.relative() - own_share).max() < 0.2, (b.relative(), own_share)
    assert b.lagging() == [2, 3]  # the slow env and its worker-mate
    report = run_tool("rls-analyze", "lockstep", str(tmp_path / "run"), timeout=120)
    assert report.returncode == 0, report.stderr
    assert "(PufferLib, async: 4 envs, batches of 2)" in report.stdout
    assert "lagging (in clearly fewer batches: slower steps): env 2 (" in report.stdout
