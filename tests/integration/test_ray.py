"""Ray and RLlib under rls-prof (docs/ray.md): a job with two actors, one twice as slow,
and an RLlib PPO iteration with no rlscope code. Each run starts a small local Ray
instance (num_cpus=2, no dashboard).

The workloads run with this interpreter when it has Ray (RLlib), else with
``$RLSCOPE_RLLIB_PYTHON`` (scripts/test.sh sets it: RLlib's exact gymnasium pin keeps it
in a venv of its own); skipped when neither has it. Analysis runs here."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import rlscope.analysis
from rlscope.analysis import load_lockstep
from rlscope.trace import format as fmt
from tests.conftest import run_tool, wait_until

pytestmark = pytest.mark.slow

WORKLOADS = Path(__file__).parent / "workloads"
STEPS = 20  # workloads/ray_actors.py


@functools.cache
def python_with(module: str) -> str | None:
    """An interpreter that can import ``module``: this one, or $RLSCOPE_RLLIB_PYTHON."""
    candidates = [sys.executable, os.environ.get("RLSCOPE_RLLIB_PYTHON", "")]
    for py in filter(None, candidates):
        if Path(py).exists() and subprocess.run(
                [py, "-c", f"import {module}"], capture_output=True, timeout=120
        ).returncode == 0:
            return py
    return None


def python_or_skip(module: str) -> str:
    py = python_with(module)
    if py is None:
        pytest.skip(f"{module} is not installed (pip install 'rlscope[{module.split('.')[-1]}]'"
                    ", or let scripts/test.sh make .venv-rllib)")
    return py


def record(out: Path, python: str, script: str, *args: str) -> None:
    r = run_tool("rls-prof", "-o", str(out), "-q", "--", python,
                 str(WORKLOADS / script), *args, timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]


def settled(out: Path, roles: tuple[str, ...]) -> rlscope.analysis.Analysis:
    """The analysis once the driver and every worker of these roles has stopped
    recording (Ray ends its workers as the driver leaves, a moment after it)."""
    seen = [""]

    def complete() -> rlscope.analysis.Analysis | None:
        a = rlscope.analysis.load(out)
        t = a.process_tree()
        ours = t[(t["role"] == fmt.ROLE_MAIN) | t["role"].isin(roles)]
        seen[0] = t[["pid", "role", "name", "complete"]].to_string()
        return a if len(ours) > 1 and ours["complete"].all() else None

    try:
        return wait_until(complete, "the driver and the Ray workers to stop recording")
    except BaseException:
        print("last seen:\n" + seen[0])  # which process never completed, in the report
        raise


def test_ray_actors_complete_roles_and_slow_actor(tmp_path: Path):
    out = tmp_path / "run"
    ids = tmp_path / "actors.json"
    record(out, python_or_skip("ray"), "ray_actors.py", str(ids))
    a = settled(out, (fmt.ROLE_RAY_ACTOR, fmt.ROLE_RAY_TASK))
    scale = json.loads(ids.read_text())
    t = a.process_tree()

    # No header-only stubs: every trace file is one process, each pid shown once.
    files = sorted(p.name for p in out.glob("*" + fmt.FILE_SUFFIX))
    assert len(files) == len(t), (files, t[["pid", "name"]])
    assert not t["pid"].duplicated().any(), t[["pid", "name"]]
    assert not t["name"].str.contains("(forked)", regex=False).any(), t[["pid", "name"]]

    driver = t[t["role"] == fmt.ROLE_MAIN]
    assert len(driver) == 1 and driver.iloc[0]["role_label"] == "main (ray driver)"
    actors = t[t["role"] == fmt.ROLE_RAY_ACTOR]
    assert set(actors["ray_actor_id"]) == set(scale), actors
    assert (actors["role_label"] == "ray actor (Worker)").all()
    assert actors["name"].str.startswith("Worker actor ").all()
    tasks = t[t["role"] == fmt.ROLE_RAY_TASK]
    assert len(tasks) >= 1 and (tasks["ray_tasks"] == "double").all(), tasks
    # Ray's services are helpers, folded; nothing is left a plain "subprocess".
    assert set(t["role"]) <= {fmt.ROLE_MAIN, fmt.ROLE_RAY_ACTOR, fmt.ROLE_RAY_TASK,
                              fmt.ROLE_RAY_WORKER, fmt.ROLE_RAY_HELPER}, set(t["role"])
    helpers = t[t["role"] == fmt.ROLE_RAY_HELPER]
    assert len(helpers) and helpers["idle_helper"].all()

    # Complete traces: every actor_step call survived Ray's shutdown (_Exit).
    ops = a.operations()
    per_actor = {}
    for _, row in actors.iterrows():
        assert row["complete"], row
        mine = ops[(ops["pid"] == row["pid"]) & (ops["operation"] == "actor_step")]
        assert int(mine["calls"].sum()) == STEPS, mine
        per_actor[row["ray_actor_id"]] = float(row["operations_s"])
    # The writer thread's CPU survived it too (the native exit path notes it), so the
    # correction removes it from the tree's CPU.
    from rlscope.trace.reader import read_trace as read

    cpu = {p.pid: int(p.metadata.get(fmt.META_THREAD_CPU_PREFIX + "rlscope-writer", 0))
           for p in read(out).processes}
    assert all(cpu[int(pid)] > 0 for pid in actors["pid"]), cpu
    task_ops = ops[ops["operation"] == "task_op"]
    assert int(task_ops["calls"].sum()) == 4
    # Each operation of a task worker says which task it ran in: its phase.
    assert set(task_ops["phase"]) == {"ray task double"}, task_ops[["pid", "phase"]]
    # The slow actor is the one with twice the scale, by its recorded time.
    slow = max(scale, key=lambda k: scale[k])
    fast = min(scale, key=lambda k: scale[k])
    assert per_actor[slow] > 1.5 * per_actor[fast], per_actor

    # Every actor method and task call says when it ran, and the driver's ray.get waits
    # on them are shortened by what the calls' book-keeping cost (task_waits).
    from rlscope.analysis.overhead.correction import correct_trace
    from rlscope.trace.reader import read_trace
    from tests.unit.test_correction import COSTS

    trace = read_trace(out)
    calls: dict[int, list[str]] = {
        p.pid: [v[0] for k, v in p.metadata.items() if k.startswith(fmt.META_RAY_CALL_PREFIX)]
        for p in trace.processes}
    for pid in actors["pid"]:
        assert calls[int(pid)].count("Worker.step") == STEPS, calls[int(pid)]
    assert sum(calls[int(pid)].count("double") for pid in tasks["pid"]) == 4, calls
    _, summary = correct_trace(trace, COSTS)  # type: ignore[arg-type]
    mine = [c for c in summary.processes if c.pid == int(driver.iloc[0]["pid"])]
    assert len(mine) == 1 and mine[0].waits_ns > 0 and mine[0].ray_waits == 0, mine

    report = run_tool("rls-analyze", "report", str(out))
    assert report.returncode == 0, report.stderr
    assert f"Worker actor {slow[:8]}" in report.stdout
    assert "ray helper" in report.stdout and "(forked)" not in report.stdout


def test_rllib_ppo_operations_in_the_right_processes(tmp_path: Path):
    out = tmp_path / "run"
    record(out, python_or_skip("ray.rllib"), "rllib_ppo.py", "1")
    a = settled(out, (fmt.ROLE_RAY_ACTOR,))
    t = a.process_tree()
    runners = t[t["ray_actor_class"] == "SingleAgentEnvRunner"]
    assert len(runners) == 2, t[["pid", "role", "name"]]
    driver = t[t["role"] == fmt.ROLE_MAIN].iloc[0]
    ops = a.operations()

    def ops_of(pid: int) -> set[str]:
        names = ops[(ops["pid"] == pid) & (ops["calls"] > 0)]["operation"]
        return {str(n).rsplit(" > ", 1)[-1] for n in names}

    for pid in runners["pid"]:
        mine = ops_of(int(pid))
        assert {"inference", "simulation", "connectors"} <= mine, mine
        assert "backprop" not in mine
    mine = ops_of(int(driver["pid"]))
    assert "backprop" in mine and "inference" not in mine, mine
    phases = set(ops[ops["pid"] == driver["pid"]]["phase"])
    assert {"sampling", "training"} <= phases, phases
    progress = a.iterations()
    progress = progress[progress["pid"] == driver["pid"]]
    assert len(progress) == 1 and progress["timesteps"].iloc[0] >= 256, progress

    # The runners are the envs of one barrier the driver waits on.
    ls = load_lockstep(out, correct=False)
    groups = [v for v in ls.vector_envs if v.name == "EnvRunnerGroup"]
    assert len(groups) == 1, [v.name for v in ls.vector_envs]
    g = groups[0]
    assert g.pid == driver["pid"] and g.num_envs == 2 and g.complete_steps >= 1
    assert set(g.envs["pid"]) == set(runners["pid"])
    assert (g.envs["steps"] >= 1).all()
    # Inside each runner, its gymnasium vector env (2 envs, one after another).
    inner = [v for v in ls.vector_envs if v.pid in set(runners["pid"])]
    assert len(inner) == 2 and all(v.num_envs == 2 and not v.workers for v in inner)
    table = pd.DataFrame([vars(s) for s in ls.tables]).set_index("pid")
    assert table.loc[driver["pid"], "optimizing_s"] > 0


def rllib_own(rows: list[dict], key: str) -> list[float]:
    """Each iteration's value of RLlib's timer ``key``: its results report an exponential
    moving average (coefficient 0.01, one value per iteration; the first exact), undone
    here: x_k = (v_k - 0.99 v_{k-1}) / 0.01 (doubles: exact to ~1e-13 s)."""
    v = [float(r["timers"][key]) for r in rows]
    return [v[0]] + [(v[k] - 0.99 * v[k - 1]) / 0.01 for k in range(1, len(v))]


def test_rllib_iterations_match_rllib_timers(tmp_path: Path):
    """The training-iterations table (rlscope.analysis.actors) against RLlib's own
    timers of the same iterations: its sampling phase and learner update sit inside
    RLlib's env_runner_sampling_timer / learner_update_timer, which also time the
    aggregation of the runners' / learner's metrics (0-17 ms measured on a loaded 2-core
    machine): rlscope's figure is at most 5 ms over RLlib's and at most 50 ms + 5% under."""
    from rlscope.analysis.pipeline.run import LOCKSTEP, RunOptions, open_run

    out, timers = tmp_path / "run", tmp_path / "timers.json"
    iterations = 3
    record(out, python_or_skip("ray.rllib"), "rllib_timers.py", str(timers), str(iterations))
    settled(out, (fmt.ROLE_RAY_ACTOR,))
    rows = json.loads(timers.read_text())
    it = open_run(out, RunOptions(correct=False), (LOCKSTEP,)).iterations
    assert it is not None and it.algorithm == "PPO"
    assert len(it.runners) == 2 and it.learners == []
    t = it.table
    assert list(t["iteration"]) == list(range(1, iterations + 1)), t
    for ours, key in (("sampling_s", "env_runner_sampling_timer"),
                      ("learner_s", "learner_update_timer"), ("sync_s", "synch_weights")):
        for k, theirs in enumerate(rllib_own(rows, key)):
            mine = float(t[ours].iloc[k])
            assert theirs - 0.05 - 0.05 * theirs <= mine <= theirs + 0.005, (
                k + 1, ours, mine, key, theirs, t.to_string())
    roles = it.roles
    assert set(roles["role"]) == {"driver", "env runner"}
    assert (roles[roles["role"] == "env runner"]["sampling_s"] > 0).all()

    report = run_tool("rls-analyze", "report", str(out), "--format", "json")
    assert report.returncode == 0, report.stderr[-3000:]
    data = json.loads(report.stdout)
    assert len(data["iterations"]["iterations"]) == iterations
    assert data["iterations"]["steady"] == [2, 3]
    # The verdict on the iterations: the steady iterations' longest part, when it holds
    # 40% of them (rlscope.analysis.diagnosis.actors), with the role and count to scale.
    actors = [v for v in data["run_diagnosis"] if v["kind"].startswith("actors-")]
    steady = t[t["iteration"] >= 2]
    parts = {p: float(steady[f"{p}_s"].sum()) for p in ("sampling", "learner", "sync",
                                                         "driver")}
    longest = max(parts, key=lambda p: parts[p])
    if parts[longest] >= 0.4 * float(steady["wall_s"].sum()):
        assert [v["kind"] for v in actors] == [f"actors-{longest}"], actors
        if longest == "sampling":
            assert "2 -> 4 env runners bounds the gain at" in actors[0]["verdict"]
        if longest == "learner":
            assert "local -> 2 learners bounds the gain at" in actors[0]["verdict"]
        assert actors[0]["bound_s"] >= 0 and actors[0]["evidence"][0].startswith(
            "iterations table")
    else:
        assert actors == []
    text = run_tool("rls-analyze", "report", str(out))
    assert "Training iterations (PPO): 3 iteration(s)" in text.stdout


def test_rllib_runs_check_pairs_end_at_a_training_iteration(tmp_path: Path):
    """A long RLlib run's calibration check (issue 22): RLlib's progress is reported by
    rlscope's rllib integration, only while recording; with RLSCOPE_PROGRESS_BY=rllib
    both runs of a pair count RLlib's training iterations (``Algorithm.train``) and end
    at the same one, recording or not, and the recorded one's trace holds exactly that
    many progress reports."""
    from rlscope.calibration import model_check
    from rlscope.launch.child_env import Recording
    from rlscope.trace.reader import read_trace

    py = python_or_skip("ray.rllib")
    cmd = [py, str(WORKLOADS / "rllib_ppo.py"), "3"]
    rec = Recording(str(tmp_path / "run"), cuda=False, sample_python_hz=0.0)
    (pair,) = model_check.run_bounded_pairs(cmd, tmp_path, rec, 1, 0.1, by="rllib",
                                            timeout_s=400)
    for d in pair.directories:
        log = (Path(d) / "output.log").read_text()
        assert "stopping after 1 progress reports" in log, log[-3000:]
    driver = [p for p in read_trace(pair.directories[0]).processes
              if p.metadata.get(fmt.META_PROGRESS_BY) == "rllib"]
    assert len(driver) == 1 and len(driver[0].progress.time_ns) == 1
    assert pair.profiled.seconds > 0 and pair.unrecorded.seconds > 0
