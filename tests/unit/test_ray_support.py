"""What the Ray and RLlib support does without Ray: roles and names from command lines and
recorded metadata, header-only stubs left out when read, no stub for a subprocess child
that execs, the exit hook flushing a trace, and the lock-step join of a Ray barrier
(docs/ray.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import threading
from pathlib import Path

import pytest

import rlscope
from rlscope.analysis import lockstep as ls
from rlscope.analysis.processes import roles
from rlscope.integrations import ray_workers
from rlscope.trace import format as fmt
from rlscope.trace.reader import read_trace, trace_files
from tests.unit.test_lockstep import MS, STEP_B, STEP_E, proc

SITE = "/venv/lib/python3.11/site-packages/"


def role_of(*argv: str) -> str | None:
    return roles.role_from_command(roles.parse_command(list(argv)))


def test_ray_programs_by_command_line():
    assert role_of("python", "-u", SITE + "ray/_private/workers/default_worker.py",
                   "--node-ip-address=1.2.3.4") == fmt.ROLE_RAY_WORKER
    for script, name in (("ray/dashboard/dashboard.py", "ray dashboard"),
                         ("ray/dashboard/agent.py", "ray dashboard agent"),
                         ("ray/_private/log_monitor.py", "ray log monitor"),
                         ("ray/autoscaler/_private/monitor.py", "ray autoscaler monitor"),
                         ("ray/_private/runtime_env/agent/main.py", "ray runtime env agent"),
                         ("ray/_private/other_service.py", "ray other_service")):
        argv = ("python", SITE + script, "--x=1")
        assert role_of(*argv) == fmt.ROLE_RAY_HELPER, script
        assert roles.display_name(argv, {}) == name
    assert role_of("python", "/home/me/ray/train.py") is None  # a user's own directory
    assert roles.display_name(("python", SITE + "ray/_private/workers/default_worker.py"),
                              {}) == "ray worker (ran no task)"


def test_ray_names_and_labels_from_metadata():
    actor = {fmt.META_RAY: {"kind": "actor", "actor_class": "Worker",
                            "actor_id": "3f2a9c1e77aa00bb", "job_id": "01000000"}}
    assert roles.display_name(("python", "w.py"), actor) == "Worker actor 3f2a9c1e"
    assert roles.role_label(fmt.ROLE_RAY_ACTOR, actor) == "ray actor (Worker)"
    tasks = {fmt.META_RAY: {"kind": "task", "tasks": ["double", "mod.f"]}}
    assert roles.display_name(("python", "w.py"), tasks) == "ray tasks: double, mod.f"
    driver = {fmt.META_RAY: {"kind": "driver", "job_id": "01000000"}}
    assert roles.role_label(fmt.ROLE_MAIN, driver) == "main (ray driver)"
    assert roles.display_name(("python", "train.py", "-n", "2"), driver) == "train.py -n 2"


def test_worker_command_lines_recognised_for_the_shutdown_wait():
    assert ray_workers._is_worker(["ray::Worker", "", ""])
    assert ray_workers._is_worker(["ray::IDLE"])
    assert not ray_workers._is_worker(["ray::DashboardAgent", "", ""])
    assert not ray_workers._is_worker(["ray::RuntimeEnvAgent"])
    assert ray_workers._is_worker(["python", "-u", SITE + "ray/_private/workers/default_worker.py"])
    assert not ray_workers._is_worker(["python", "train.py"])


def _second_record_start(path: Path) -> int:
    """Byte offset where the record after the header begins (its length prefix)."""
    data = path.read_bytes()
    pos = len(fmt.MAGIC)
    n, shift = 0, 0
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    return pos + n


def test_exec_stubs_left_out_when_read(tmp_path: Path):
    d = tmp_path / "run"
    rlscope.start(d, recorder="python")
    with rlscope.operation("a"):
        pass
    rlscope.stop()
    rlscope.start(d, recorder="python")  # same pid, a later file: the "exec'd" program
    with rlscope.operation("b"):
        pass
    rlscope.stop()
    first = d / f"python.{os.getpid()}.rlscope"
    later = d / f"python.{os.getpid()}.1.rlscope"
    assert first.exists() and later.exists()
    data = first.read_bytes()
    first.write_bytes(data[:_second_record_start(first)])  # header only, started first
    _, _, files = trace_files(d)
    assert files == [later]
    assert [p.path for p in read_trace(d).processes] == [later]
    # A header-only file alone is a process that died before its first flush: kept.
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(first, lone / first.name)
    assert trace_files(lone)[2] == [lone / first.name]


def test_subprocess_child_that_execs_leaves_no_stub(tmp_path: Path, recorder: str):
    d = tmp_path / "run"
    code = textwrap.dedent(f"""
        import subprocess, rlscope
        rlscope.start({str(d)!r}, recorder={recorder!r})
        subprocess.run(["true"], preexec_fn=lambda: None, check=True)
        subprocess.run(["true"], check=True)
        rlscope.stop()
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert len(list(d.glob("*.rlscope"))) == 1, sorted(p.name for p in d.iterdir())


@pytest.mark.skipif(not sysconfig.get_config_var("Py_ENABLE_SHARED"),
                    reason="needs a Python built with a shared libpython")
def test_exit_hook_completes_the_trace(tmp_path: Path):
    pytest.importorskip("rlscope._native")
    d = tmp_path / "run"
    code = textwrap.dedent(f"""
        import os, rlscope
        from rlscope import _native
        rlscope.start({str(d)!r}, recorder="native", flush_interval_s=60)
        for _ in range(5):
            with rlscope.operation("work"):
                pass
        assert _native.hook_exit_calls("libpython") >= 1
        os._exit(3)  # libpython's _exit: no atexit, no flush but the hook's
    """)
    r = subprocess.run([sys.executable, "-c", code], timeout=60)
    assert r.returncode == 3
    (p,) = read_trace(d).processes
    assert p.complete
    assert int((p.events.kind == fmt.OPERATION_BEGIN).sum()) == 5


def test_ray_barrier_joined_by_job_and_event_name():
    """A driver's rounds of remote sample() calls over two runners; each runner also
    steps its own vector env of two envs (events of another name, joined apart)."""
    group = "EnvRunnerGroup"
    key = {"ray_job": "01000000", "name": group}
    driver_env, runners = [], [[], []]
    inner = [[], []]
    t = 10 * MS
    busy = [(5, 10), (6, 12), (5, 11)]
    for row in busy:
        driver_env.append((t, STEP_B, group, -1))
        for i, b in enumerate(row):
            s = t + MS
            runners[i] += [(s, STEP_B, group, i), (s + b * MS, STEP_E, group, -1)]
            # the runner's own vector env inside the sample() call
            inner[i] += [(s + MS, STEP_B, "SyncVectorEnv#1", -1),
                         (s + MS + 100, STEP_B, "CartPole-v1", 0),
                         (s + MS + 200, STEP_E, "CartPole-v1", -1),
                         (s + MS + 300, STEP_B, "CartPole-v1", 1),
                         (s + MS + 400, STEP_E, "CartPole-v1", -1),
                         (s + MS + 500, STEP_E, "SyncVectorEnv#1", -1)]
        t += (max(row) + 3) * MS
        driver_env.append((t, STEP_E, group, -1))
        t += 20 * MS
    meta = {fmt.META_VECENVS: [{"name": group, "class": group, "num_envs": 2,
                                "workers": True, "key": key}]}
    procs = [proc(1, driver_env, meta)]
    for i in range(2):
        events = sorted(runners[i] + inner[i], key=lambda r: r[0])
        procs.append(proc(10 + i, events, {
            fmt.META_VECENV: key, fmt.META_ENV_INDEX: i,
            fmt.META_VECENVS: [{"name": "SyncVectorEnv#1", "class": "SyncVectorEnv",
                                "num_envs": 2, "workers": False}]}))
    result = ls.analyze(procs)
    assert not result.warnings, result.warnings
    (g,) = [v for v in result.vector_envs if v.name == group]
    assert g.complete_steps == 3 and list(g.envs["pid"]) == [10, 11]
    assert g.straggler == 1
    loss = sum(max(r) - sum(r) / 2 for r in busy) / 1e3
    assert g.lockstep_loss_s == pytest.approx(loss)
    runners_v = [v for v in result.vector_envs if v.name == "SyncVectorEnv#1"]
    assert len(runners_v) == 2
    for v in runners_v:  # only the gymnasium envs, not the sample() calls
        assert v.complete_steps == 3 and list(v.envs["steps"]) == [3, 3]
    # A runner's Sampling is its sample() calls, not the time it waits for the driver.
    table = {s.pid: s for s in result.tables}
    assert table[10].sampling_s == pytest.approx(sum(r[0] for r in busy) / 1e3)


def test_actor_methods_and_tasks_record_when_they_ran(tmp_path: Path):
    """get_execution_info's wrapper (no Ray needed: Ray's objects faked): a synchronous
    actor method and a task record [name, begin, end, tid]; the task also runs in its
    phase; an actor method executor keeps the attributes Ray reads (``name``, ``method``);
    Ray's own methods, coroutine and generator methods are left as they are."""
    from collections import namedtuple
    from types import SimpleNamespace

    Info = namedtuple("Info", "function function_name max_calls")

    def executor_for(method):  # what Ray's _make_actor_method_executor returns
        def actor_method_executor(actor, *args, **kwargs):
            return method(actor, *args, **kwargs)
        actor_method_executor.name = method.__name__
        actor_method_executor.method = method
        return actor_method_executor

    class Worker:
        def step(self, x):
            return x + 1

        async def fetch(self):
            return 1

        def stream(self):
            yield 1

        def __ray_ready__(self):
            return True

    infos = {n: Info(executor_for(getattr(Worker, n)), n, 0)
             for n in ("step", "fetch", "stream", "__ray_ready__")}
    get = ray_workers._tasks_in_phases(
        lambda self, job, d: infos[d.function_name] if d.class_name else
        Info(lambda x: 2 * x, "__main__.double", 0))
    manager = SimpleNamespace(_worker=None)
    rlscope.start(tmp_path / "run")
    try:
        step = get(manager, None, SimpleNamespace(class_name="Worker", function_name="step"))
        assert step.function is not infos["step"].function
        assert (step.function.name, step.function.method) == ("step", Worker.step)
        assert step.function(Worker(), 1) == 2
        for n in ("fetch", "stream", "__ray_ready__"):
            d = SimpleNamespace(class_name="Worker", function_name=n)
            assert get(manager, None, d).function is infos[n].function
        ray_workers._set(kind="task")  # what loading a task's function records
        task = get(manager, None, SimpleNamespace(class_name="", function_name="double"))
        assert task.function(3) == 6
    finally:
        rlscope.stop()
        ray_workers._state.clear()
    p = read_trace(tmp_path / "run").processes[0]
    calls = sorted((v[0], v[3]) for k, v in p.metadata.items()
                   if k.startswith(fmt.META_RAY_CALL_PREFIX))
    tid = threading.get_native_id()
    assert calls == [("Worker.step", tid), ("double", tid)], calls
    assert all(v[1] <= v[2] for k, v in p.metadata.items()
               if k.startswith(fmt.META_RAY_CALL_PREFIX))
    assert p.strings.count(ray_workers.TASK_PHASE + "double") == 1
