"""The PufferLib integration (rlscope.integrations.pufferlib) on stand-ins shaped like
PufferLib 3's classes, so it is checked where PufferLib itself is not installed (the
real package: tests/integration/test_pufferlib.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import rlscope
from rlscope.analysis import analyze
from rlscope.analysis.lockstep.batches import from_metadata
from rlscope.integrations import pufferlib as integration
from rlscope.intercept.patch import Patcher
from rlscope.trace.reader import read_trace

ENV_SOURCE = '''
from fake_pufferlib_binding import binding

class Cartpole(PufferEnv):
    def __init__(self, num_envs=4):
        self.num_agents = num_envs
        super().__init__()

    def reset(self, seed=None):
        binding.vec_reset([seed])
        return [0.0] * self.num_agents, []

    def step(self, actions):
        binding.vec_step(actions)
        return [0.0] * self.num_agents, [0.0], [False], [False], []
'''


class PufferEnv:
    def __init__(self, buf=None):
        self.buf = buf


def _modules() -> tuple[ModuleType, ModuleType]:
    """A "pufferlib" with PufferEnv, and an env module whose C binding is ``binding``
    (builtins stand in for the extension's functions)."""
    top = ModuleType("fake_pufferlib")
    top.PufferEnv = PufferEnv  # type: ignore[attr-defined]
    binding = ModuleType("pufferlib.ocean.cartpole.binding")
    binding.vec_step = len  # type: ignore[attr-defined]
    binding.vec_reset = len  # type: ignore[attr-defined]
    holder = ModuleType("fake_pufferlib_binding")
    holder.binding = binding  # type: ignore[attr-defined]
    sys.modules["fake_pufferlib_binding"] = holder
    env_mod = ModuleType("fake_pufferlib_cartpole")
    env_mod.PufferEnv = PufferEnv  # type: ignore[attr-defined]
    sys.modules[env_mod.__name__] = env_mod
    exec(compile(ENV_SOURCE, "<fake cartpole>", "exec"), env_mod.__dict__)
    return top, env_mod


def _vector_module() -> ModuleType:
    vector = ModuleType("fake_pufferlib_vector")

    def step(vecenv, actions):  # type: ignore[no-untyped-def]
        vecenv.send(actions)
        return vecenv.recv()

    def reset(vecenv, seed=0):  # type: ignore[no-untyped-def]
        vecenv.async_reset(seed)
        return vecenv.recv()

    class Multiprocessing:
        """Two envs a worker; batches of ``workers_per_batch`` workers. ``recv`` returns
        worker 1's envs (2, 3) in one batch of four when async, else every env."""

        def __init__(self, num_envs: int, workers_per_batch: int = 1) -> None:
            self.num_environments = self.num_agents = num_envs
            self.envs_per_worker, self.workers_per_batch = 2, workers_per_batch
            self.num_workers = num_envs // 2
            self.agents_per_batch = 2 * workers_per_batch
            self.received = 0

        def send(self, actions):  # type: ignore[no-untyped-def]
            self.actions = actions

        def recv(self):  # type: ignore[no-untyped-def]
            self.received += 1
            if self.workers_per_batch == self.num_workers:
                ids = np.arange(self.num_agents)
            else:
                ids = np.array([2, 3] if self.received % 4 == 0 else [0, 1])
            return [0.0], [0.0], [False], [False], [], ids, [True]

        def async_reset(self, seed=0):  # type: ignore[no-untyped-def]
            self.seed = seed

    Multiprocessing.step = step  # type: ignore[attr-defined]
    Multiprocessing.reset = reset  # type: ignore[attr-defined]
    vector.Multiprocessing = Multiprocessing  # type: ignore[attr-defined]
    vector._worker_process = lambda *a: None  # type: ignore[attr-defined]
    return vector


def _operations(out: Path):  # type: ignore[no-untyped-def]
    return analyze(read_trace(out)).operations().set_index("operation")


@pytest.fixture
def patcher():
    p = Patcher()
    yield p
    p.undo()
    for name in ("fake_pufferlib_binding", "fake_pufferlib_cartpole"):
        sys.modules.pop(name, None)


def test_native_env_steps_are_simulation_with_their_c_calls(recording: Path, patcher):
    top, env_mod = _modules()
    assert integration.install(top, patcher) == 1
    env = env_mod.Cartpole(num_envs=4)  # the first instance marks the class
    env.reset(seed=0)
    for _ in range(3):
        env.step([0, 1, 0, 1])
    env_mod.Cartpole(num_envs=2).step([0, 0])  # a second instance: marked already
    rlscope.stop()
    sim = _operations(recording).loc["simulation"]
    assert sim["calls"] == 5
    assert sim["simulator_calls"] == 5  # binding.vec_reset once, vec_step four times


def test_worker_vector_env_recv_is_a_wait(recording: Path, patcher):
    vector = _vector_module()
    assert integration.install_vector(vector, patcher) >= 6  # 5 methods, init, worker
    vec = vector.Multiprocessing(4)
    vec.reset(0)  # async_reset + recv: one operation
    for _ in range(3):
        vec.send([0, 1])
        vec.recv()
    rlscope.stop()
    sim = _operations(recording).loc["simulation"]
    assert sim["calls"] == 1 + 2 * 3
    assert sim["wait_calls"] == 4  # every recv waits for the workers' batch


def test_an_async_worker_backend_tallies_which_envs_its_batches_held(recording: Path,
                                                                      patcher):
    vector = _vector_module()
    integration.install_vector(vector, patcher)
    vec = vector.Multiprocessing(4)  # async: batches of one worker of two
    sync = vector.Multiprocessing(4, workers_per_batch=2)  # every worker in each batch
    vec.reset(0)
    sync.reset(0)
    for _ in range(39):
        vec.send([0, 1])
        vec.recv()
        sync.step([0, 1, 0, 1])
    assert "recv" in vars(vec) and "recv" not in vars(sync)  # only the async one tapped
    rlscope.stop()
    [p] = read_trace(recording).processes
    [b] = from_metadata(p.pid, "p", p.metadata)
    assert (b.library, b.num_envs, b.batch_size) == ("PufferLib", 4, 2)
    assert b.name.startswith("Multiprocessing#")
    assert b.batches == b.tallied == 40  # the first 64 batches are all counted
    assert b.counts.tolist() == [30, 30, 10, 10]
    assert b.lagging() == [2, 3]
