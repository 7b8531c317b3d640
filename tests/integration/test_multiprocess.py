"""One run, many processes: rls-prof on multiprocessing, SB3 SubprocVecEnv and gymnasium
AsyncVectorEnv workloads; the process tree and the roles in the report
(docs/multiprocess.md)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

import rlscope.analysis
from rlscope.trace import format as fmt
from tests.conftest import run_tool, wait_until

WORKLOADS = Path(__file__).parent / "workloads"


def record(out: Path, script: str, *args: str, timeout: float = 300) -> rlscope.analysis.Analysis:
    r = run_tool("rls-prof", "-o", str(out), "-q", "--", sys.executable,
                 str(WORKLOADS / script), *args, timeout=timeout)
    assert r.returncode == 0, r.stderr
    return settled(out)


def settled(out: Path) -> rlscope.analysis.Analysis:
    """The analysis once every process has stopped recording: helpers such as the
    forkserver can outlive the main process by a moment."""
    def complete() -> rlscope.analysis.Analysis | None:
        a = rlscope.analysis.load(out)
        return a if a.processes()["complete"].all() else None

    return wait_until(complete, "every process of the run to stop recording")


def main_row(a: rlscope.analysis.Analysis, tree: pd.DataFrame) -> pd.Series:
    mains = tree[tree["role"] == fmt.ROLE_MAIN]
    assert len(mains) == 1, tree[["pid", "ppid", "role", "name"]]
    m = mains.iloc[0]
    assert m["ppid"] == a.run["launcher"]["pid"] and m["depth"] == 0
    return m


def chain(tree: pd.DataFrame, index: int) -> list[str]:
    """Roles from a process up to its root."""
    rows = tree.set_index("index")
    out = []
    while index != -1:
        out.append(rows.loc[index, "role"])
        index = int(rows.loc[index, "parent_index"])
    return out


def parent_role(tree: pd.DataFrame, row: pd.Series) -> str:
    return str(tree.set_index("index").loc[int(row["parent_index"]), "role"])


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_multiprocessing_pool_and_processes(tmp_path: Path, method: str):
    a = record(tmp_path / method, "multiproc.py", method)
    tree = a.process_tree()
    main = main_row(a, tree)
    assert main["name"] == f"multiproc.py {method}"
    procs = tree[tree["role"] == fmt.ROLE_MP_PROCESS]
    prefix = {"fork": "Fork", "spawn": "Spawn", "forkserver": "ForkServer"}[method]
    assert len(procs) == 2
    for _, p in procs.iterrows():
        assert re.fullmatch(rf"{prefix}Process-\d+", p["mp_name"]), p["mp_name"]
        assert p["name"].startswith("work [") and p["role_source"] == "recorded"
    pool = tree[tree["role"] == fmt.ROLE_POOL_WORKER]
    assert len(pool) == 2 and (pool["mp_target"] == "multiprocessing.pool:worker").all()
    assert pool["mp_name"].str.fullmatch(rf"{prefix}PoolWorker-\d+").all()
    # Every process hangs below the main one.
    for i in tree["index"]:
        assert chain(tree, int(i))[-1] == fmt.ROLE_MAIN
    workers = pd.concat([procs, pool])
    servers = tree[tree["role"] == fmt.ROLE_FORKSERVER]
    if method == "forkserver":
        assert len(servers) == 1 and parent_role(tree, servers.iloc[0]) == fmt.ROLE_MAIN
        assert all(parent_role(tree, w) == fmt.ROLE_FORKSERVER for _, w in workers.iterrows())
    else:
        assert servers.empty
        assert all(parent_role(tree, w) == fmt.ROLE_MAIN for _, w in workers.iterrows())
    trackers = tree[tree["role"] == fmt.ROLE_RESOURCE_TRACKER]
    if method != "fork":  # spawn and forkserver start one for the pool's semaphores
        assert len(trackers) == 1
    for _, t in trackers.iterrows():
        assert t["idle_helper"] and parent_role(tree, t) == fmt.ROLE_MAIN
        assert t["name"] == "multiprocessing resource tracker"
    assert not (tree["name"].str.contains("python -c")).any()


def vec_workers(tree: pd.DataFrame, target: str, n: int) -> pd.DataFrame:
    """The vector env's workers: vector-env workers once the vector-env integration
    records their role (then env index k of n), multiprocessing processes before."""
    w = tree[tree["mp_target"] == target]
    assert len(w) == n, tree[["pid", "role", "name", "mp_target"]]
    if (w["role"] == fmt.ROLE_VECENV_WORKER).any():
        assert (w["role"] == fmt.ROLE_VECENV_WORKER).all()
        index = sorted(i for x in w["env_index"] for i in (x if isinstance(x, list) else [x]))
        assert index == list(range(n)) and (w["num_envs"] == n).all()
        assert w["role_label"].str.fullmatch(rf".*\(envs? [\d-]+ of {n}\)").all()
    else:
        assert (w["role"] == fmt.ROLE_MP_PROCESS).all()
    for i in w["index"]:
        assert chain(tree, int(i))[-1] == fmt.ROLE_MAIN
    return w


def test_sb3_ppo_subproc_vec_env(tmp_path: Path):
    pytest.importorskip("stable_baselines3")
    out = tmp_path / "run"
    a = record(out, "sb3_vec.py", "4", "256", timeout=600)
    tree = a.process_tree()
    main = main_row(a, tree)
    assert main["name"] == "sb3_vec.py 4 256" and not main["idle_helper"]
    assert len(tree) == 7, tree[["pid", "ppid", "role", "name"]]
    server = tree[tree["role"] == fmt.ROLE_FORKSERVER]
    tracker = tree[tree["role"] == fmt.ROLE_RESOURCE_TRACKER]
    assert len(server) == 1 and len(tracker) == 1
    for helper in (server.iloc[0], tracker.iloc[0]):
        assert parent_role(tree, helper) == fmt.ROLE_MAIN and helper["idle_helper"]
    workers = vec_workers(tree, "stable_baselines3.common.vec_env.subproc_vec_env:_worker", 4)
    assert all(parent_role(tree, w) == fmt.ROLE_FORKSERVER for _, w in workers.iterrows())
    assert workers["name"].str.startswith("subproc_vec_env._worker [ForkServerProcess-").all()
    assert (workers["operations_s"] > 0).all() and not workers["idle_helper"].any()

    summary = a.run_summary().set_index("role")
    assert summary.loc["all processes", "processes"] == 7
    assert summary.loc["all processes", "idle_helpers"] == 2
    ops = a.role_operations()
    assert {"inference", "simulation", "backprop"} <= set(ops[ops["role"] == "main"]
                                                           ["operation"])

    r = run_tool("rls-analyze", "report", str(out))
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert text.index("Processes: 7 (2 idle helpers)") < text.index("Run summary") \
        < text.index(f"Process {main['pid']} sb3_vec.py 4 256 (main)")
    assert "Idle helpers (2, tables folded" in text
    assert f"Process {server.iloc[0]['pid']} " not in text  # folded
    doc = json.loads(run_tool("rls-analyze", "report", "--format", "json", str(out)).stdout)
    assert len(doc["process_tree"]) == 7 and doc["run_summary"]["idle_helpers"] == 2
    csv = run_tool("rls-analyze", "report", "--format", "csv", "--table", "processes",
                   str(out)).stdout.splitlines()
    assert csv[0].startswith("index,depth,pid,ppid") and len(csv) == 8


def test_gymnasium_async_vector_env(tmp_path: Path):
    pytest.importorskip("gymnasium")
    a = record(tmp_path / "run", "gym_async.py", "4", "50")
    tree = a.process_tree()
    main_row(a, tree)
    workers = vec_workers(tree, "gymnasium.vector.async_vector_env:_async_worker", 4)
    assert workers["name"].str.contains(r"\[Worker<AsyncVectorEnv>-\d\]").all()
    assert (workers["operation_calls"] > 0).all()
