"""duck-env (rlscope.intercept.duckenv): classes of the user's code with env-like
step/reset become ``simulation``, confirmed by their first result; anything else gets
its methods back."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import rlscope
from rlscope.analysis.engine.scopes import operation_intervals
from rlscope.intercept import duckenv
from rlscope.intercept.patch import Patcher
from rlscope.trace.reader import read_trace


def test_env_output_shapes():
    obs = np.zeros((4, 3))
    assert duckenv.looks_like_env_output((obs, {}))
    assert duckenv.looks_like_env_output((obs, np.zeros(4), np.zeros(4), np.zeros(4), {}))
    assert duckenv.looks_like_env_output(obs)
    for other in (None, 3, (1, 2), "x", [obs], (obs,)):
        assert not duckenv.looks_like_env_output(other), other


class Env:
    def reset(self):
        return np.zeros((2, 4)), {}

    def step(self, action):
        return np.zeros((2, 4)), np.ones(2), np.zeros(2, bool), np.zeros(2, bool), {}


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def reset(self):
        self.n = 0

    def step(self, k=1):
        self.n += k
        return self.n


class Static:
    @staticmethod
    def step(a):
        return a

    @staticmethod
    def reset():
        return None


def _simulations(out: Path) -> int:
    (p,) = read_trace(out).processes
    iv = operation_intervals(p.events)
    return sum(p.strings[n] == "simulation" for n in iv.name)


def test_env_like_class_is_simulation_and_others_are_restored(recording: Path):
    p = Patcher()
    original = vars(Counter)["step"]
    try:
        assert duckenv.consider(Env, p) == 2 and duckenv.consider(Counter, p) == 2
        assert duckenv.consider(Static, p) == 0  # not plain functions: left alone
        assert vars(Counter)["step"] is not original
        env, c = Env(), Counter()
        env.reset()
        for _ in range(3):
            env.step(0)
        c.reset()  # returns None: not an env, its methods back
        assert vars(Counter)["step"] is original
        assert c.step(2) == 2 and Static.step(5) == 5
    finally:
        p.undo()
    rlscope.stop()
    assert _simulations(recording) == 4 + 1  # env: reset + 3 steps; Counter's first reset
