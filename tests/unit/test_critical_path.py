"""The main process's critical path from the tables: parts that add up to its wall time,
vector steps split into the slowest env's work and IPC, waits while pool tasks ran."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from rlscope.analysis.diagnosis.critical import critical_path

COLS = ["python_s", "backend_s", "simulator_s", "cuda_api_s", "waiting_s"]


def _ops(rows):
    """(pid, operation, self_s, python, backend, simulator, cuda_api, waiting)"""
    return pd.DataFrame([{"pid": r[0], "operation": r[1], "self_s": r[2],
                          **dict(zip(COLS, r[3:], strict=True))} for r in rows])


def test_parts_add_up_and_vector_steps_split():
    tree = pd.DataFrame([{"pid": 1, "role": "main", "wall_s": 20.0},
                         {"pid": 2, "role": "vector-env worker", "wall_s": 18.0}])
    ops = _ops([(1, "(start-up)", 2.0, 2.0, 0, 0, 0, 0),
                (1, "simulation", 10.0, 1.0, 0, 0, 0, 9.0),  # the vector steps
                (1, "inference", 5.0, 1.0, 3.0, 0, 0.5, 0.5),
                (1, "rollout", 3.0, 0.5, 0, 0, 0, 2.5),  # a pool map's wait in it
                (2, "simulation", 6.0, 6.0, 0, 0, 0, 0)])
    envs = pd.DataFrame([{"env": 0, "pid": 2, "slowest_steps": 70, "slowest_pct": 70.0},
                         {"env": 1, "pid": 3, "slowest_steps": 30, "slowest_pct": 30.0}])
    v = SimpleNamespace(pid=1, workers=True, step_s=10.0, send_s=1.0, wait_s=9.0,
                        slowest_s=4.0, overhead_s=6.0, name="SubprocVecEnv#1",
                        envs=envs, complete_steps=100)
    tasks = pd.DataFrame({"function": ["f", "f"], "begin_ns": [0, 1_000_000_000],
                          "end_ns": [1_500_000_000, 2_000_000_000]})
    util = pd.DataFrame({"pid": [1], "runq_wait_s": [0.7]})
    c = critical_path(tree, ops, SimpleNamespace(vector_envs=[v]), tasks, util)
    got = dict(zip(c["part"], c["seconds"], strict=True))
    assert got["main process (pid 1): own CPU work"] == pytest.approx(1.5 + 3.0)
    assert got["SubprocVecEnv#1: the slowest env's step"] == 4.0
    assert got["SubprocVecEnv#1: IPC and scheduling"] == 6.0
    assert got["waiting while pool tasks ran"] == pytest.approx(2.0)  # union [0, 2] s
    assert got["CUDA API calls"] == 0.5
    assert got["other waiting"] == pytest.approx(0.5 + 2.5 - 2.0)
    assert got["start-up"] == 2.0
    assert c["seconds"].sum() == pytest.approx(20.0) and c["share"].sum() == pytest.approx(1)
    assert "env 0 (pid 2) slowest in 70% of 100 steps" in c.loc[1, "detail"]
    assert "waited for a core (run queue) 0.7 s" in c.loc[0, "detail"]


def test_no_main_process_gives_no_rows():
    tree = pd.DataFrame([{"pid": 2, "role": "worker", "wall_s": 1.0}])
    assert critical_path(tree, _ops([(2, "x", 1.0, 1.0, 0, 0, 0, 0)])).empty


def test_waiting_inside_env_steps_without_vector_steps_is_the_envs():
    """A native pool or PufferLib's workers: the main process waits inside ``simulation``
    with no recorded vector step; that wait is the env's, not "other waiting"."""
    tree = pd.DataFrame([{"pid": 1, "role": "main", "wall_s": 10.0}])
    ops = _ops([(1, "simulation", 4.0, 1.0, 0, 0, 0, 3.0),
                (1, "rollout > simulation", 1.0, 0.5, 0, 0, 0, 0.5),
                (1, "inference", 5.0, 2.0, 2.0, 0, 0, 1.0)])
    c = critical_path(tree, ops)
    got = dict(zip(c["part"], c["seconds"], strict=True))
    assert got["waiting inside env steps"] == pytest.approx(3.5)
    assert got["other waiting"] == pytest.approx(1.0)
    assert c["seconds"].sum() == pytest.approx(10.0)
