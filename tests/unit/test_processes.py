"""One run, many processes (docs/multiprocess.md): the process tree, roles, display
names, per-process times, the run summary and folding, on synthetic traces."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rlscope.analysis import analyze
from rlscope.analysis.engine.synthetic import process_trace
from rlscope.analysis.processes import roles as R
from rlscope.analysis.processes import tree as T
from rlscope.reporters import processes as P
from rlscope.reporters import table
from rlscope.trace import format as fmt
from rlscope.trace.data import ProcessTrace, Trace

S = 1_000_000_000  # ns per second
OB, OE, START, END = fmt.OPERATION_BEGIN, fmt.OPERATION_END, fmt.PROCESS_START, fmt.PROCESS_END
LAUNCHER = 1
PY = "/venv/bin/python"
FORKSERVER = (PY, "-B", "-c", "from multiprocessing.forkserver import main; main(3, 4)")
TRACKER = (PY, "-B", "-c", "from multiprocessing.resource_tracker import main;main(12)")
SPAWN = (PY, "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)",
         "--multiprocessing-fork")


def proc(pid: int, ppid: int, t0: float, t1: float, ops: list[tuple[float, float, str]] = (),
         argv: tuple[str, ...] = (PY, "train.py"), metadata: dict | None = None,
         complete: bool = True, **kw) -> ProcessTrace:
    ev = [(int(t0 * S), 0, START, "")]
    for a, b, name in ops:
        ev += [(int(a * S), 0, OB, name), (int(b * S), 0, OE, name)]
    if complete:
        ev.append((int(t1 * S), 0, END, ""))
    else:  # a crash: the last event stands for the end
        ev.append((int(t1 * S), 0, fmt.BACKEND_CALL_BEGIN, "x"))
    return process_trace(ev, pid=pid, ppid=ppid, argv=argv, metadata=metadata or {}, **kw)


def vec_worker(pid: int, ppid: int, t0: float, index: int, n: int = 2) -> ProcessTrace:
    md = {fmt.META_ROLE: fmt.ROLE_VECENV_WORKER, fmt.META_ENV_INDEX: index,
          fmt.META_NUM_ENVS: n, fmt.META_ROLE_DETAIL: "SubprocVecEnv",
          fmt.META_MP_NAME: f"ForkServerProcess-{index + 1}",
          fmt.META_MP_TARGET: "stable_baselines3.common.vec_env.subproc_vec_env:_worker"}
    return proc(pid, ppid, t0, 9.0, [(t0 + 1, t0 + 3, "simulation")], FORKSERVER, md)


def run_of(*procs: ProcessTrace, launcher: int | None = LAUNCHER):
    run = {"command": ["python", "train.py"], "status": "succeeded"}
    if launcher is not None:
        run.update(launcher={"pid": launcher}, duration_s=10.0,
                   start={"monotonic_ns": 0, "realtime_ns": 0}, host={"name": "host"})
    return analyze(Trace(Path("."), run, list(procs)))


def sb3_like():
    """main -> forkserver -> 2 vector-env workers; main -> resource tracker; the
    files in an order unlike the tree's."""
    return run_of(
        vec_worker(13, 11, 2.0, 1),
        proc(10, LAUNCHER, 0.5, 10.0, [(1.0, 4.0, "inference"), (4.0, 9.0, "simulation")],
             ("python3", "-u", "train.py", "--steps", "100")),
        proc(12, 10, 1.5, 10.0, argv=TRACKER),
        proc(11, 10, 1.5, 10.0, argv=FORKSERVER),
        vec_worker(14, 11, 2.5, 0),
    )


def by_pid(tree: pd.DataFrame) -> pd.DataFrame:
    return tree.set_index("pid")


def test_tree_order_parents_and_depth():
    tree = sb3_like().process_tree()
    assert tree["pid"].tolist() == [10, 11, 13, 14, 12]  # depth first, siblings by start
    assert tree["depth"].tolist() == [0, 1, 2, 2, 1]
    t = by_pid(tree)
    idx = {pid: int(i) for pid, i in zip(tree["pid"], tree["index"], strict=True)}
    assert t.loc[10, "parent_index"] == -1 and not t.loc[10, "parent_in_run"]
    assert t.loc[13, "parent_index"] == idx[11] and t.loc[11, "parent_index"] == idx[10]
    assert t.loc[12, "parent_in_run"]


def test_roles_from_metadata_command_line_and_tree():
    t = by_pid(sb3_like().process_tree())
    assert t.loc[10, "role"] == fmt.ROLE_MAIN and t.loc[10, "role_source"] == T.FROM_TREE
    assert t.loc[11, "role"] == fmt.ROLE_FORKSERVER
    assert t.loc[11, "role_source"] == T.FROM_COMMAND
    assert t.loc[12, "role"] == fmt.ROLE_RESOURCE_TRACKER
    assert t.loc[13, "role"] == fmt.ROLE_VECENV_WORKER
    assert t.loc[13, "role_source"] == T.FROM_METADATA
    assert t.loc[13, "role_label"] == "vector-env worker (env 1 of 2)"
    assert t.loc[14, "role_label"] == "vector-env worker (env 0 of 2)"
    assert t.loc[13, "env_index"] == 1 and t.loc[13, "num_envs"] == 2


def test_display_names_are_never_python_c():
    t = by_pid(sb3_like().process_tree())
    assert t.loc[10, "name"] == "train.py --steps 100"
    assert t.loc[11, "name"] == "multiprocessing forkserver"
    assert t.loc[12, "name"] == "multiprocessing resource tracker"
    assert t.loc[13, "name"] == "subproc_vec_env._worker [ForkServerProcess-2]"
    assert "-c" in t.loc[11, "command"]  # the full command line is kept beside it


def test_times_relative_to_the_run_and_per_process_split():
    t = by_pid(sb3_like().process_tree())
    assert t.loc[10, "start_s"] == pytest.approx(0.5) and t.loc[10, "end_s"] == 10.0
    assert t.loc[10, "wall_s"] == pytest.approx(9.5)
    assert t.loc[10, "operations_s"] == pytest.approx(8.0)
    assert t.loc[10, "busy_s"] == pytest.approx(9.5)  # one thread, all of it Python
    assert t.loc[10, "operation_calls"] == 2
    assert t.loc[13, "operations_s"] == pytest.approx(2.0)
    assert (t["idle_s"] == 0).all() and (t["waiting_s"] == 0).all()


def test_idle_helpers_fold_but_the_main_process_never_does():
    t = by_pid(sb3_like().process_tree())
    assert t["idle_helper"].to_dict() == {10: False, 11: True, 13: False, 14: False, 12: True}
    idle_main = run_of(proc(10, LAUNCHER, 0, 1), proc(11, 10, 0.1, 1, argv=TRACKER))
    assert by_pid(idle_main.process_tree())["idle_helper"].to_dict() == {10: False, 11: True}


def test_run_summary_per_role_and_for_the_run():
    a = sb3_like()
    s = a.run_summary().set_index("role")
    assert list(s.index) == [fmt.ROLE_MAIN, fmt.ROLE_VECENV_WORKER, fmt.ROLE_FORKSERVER,
                             fmt.ROLE_RESOURCE_TRACKER, "all processes"]
    w = s.loc[fmt.ROLE_VECENV_WORKER]
    assert w["processes"] == 2 and w["idle_helpers"] == 0
    assert w["wall_s"] == pytest.approx(7.0 + 6.5)
    assert w["operations_s"] == pytest.approx(4.0)
    assert s.loc["all processes", "processes"] == 5
    assert s.loc["all processes", "idle_helpers"] == 2
    assert s.loc["all processes", "wall_s"] == pytest.approx(s["wall_s"].iloc[:-1].sum())
    assert s.loc[fmt.ROLE_MAIN, "busy_pct"] == pytest.approx(100.0)
    assert a.run_wall_s() == 10.0  # rls-prof's measurement
    ops = a.role_operations()
    main = ops[ops["role"] == fmt.ROLE_MAIN]
    assert main["operation"].tolist() == ["simulation", "inference"]  # largest first
    sim = ops[(ops["role"] == fmt.ROLE_VECENV_WORKER)].iloc[0]
    assert sim["operation"] == "simulation" and sim["processes"] == 2 and sim["calls"] == 2
    assert sim["wall_s"] == pytest.approx(4.0)


def test_missing_parents_orphans_and_no_run_json():
    # No run.json: the earliest process whose parent was not traced is the main one;
    # a later root (its parent exited untraced, or was never traced) is a subprocess.
    a = run_of(proc(30, 29, 1.0, 5.0, argv=(PY, "tool.py")),
               proc(20, 7, 0.0, 6.0),
               proc(31, 30, 2.0, 4.0, argv=SPAWN), launcher=None)
    t = by_pid(a.process_tree())
    assert t.loc[20, "role"] == fmt.ROLE_MAIN and t.loc[30, "role"] == fmt.ROLE_SUBPROCESS
    assert not t.loc[30, "parent_in_run"] and t.loc[30, "depth"] == 0
    assert t.loc[31, "role"] == fmt.ROLE_MP_PROCESS  # spawned: seen from its argv alone
    assert t.loc[31, "name"] == "multiprocessing spawn child"
    assert a.run_wall_s() == pytest.approx(6.0)  # first start to last end


def test_pid_reuse_picks_the_parent_alive_at_the_child_start():
    a = run_of(proc(10, LAUNCHER, 0.0, 10.0),
               proc(50, 10, 1.0, 2.0, argv=(PY, "first.py")),
               proc(50, 10, 3.0, 6.0, argv=(PY, "second.py")),  # pid 50 reused
               proc(51, 50, 4.0, 5.0, argv=(PY, "child.py")),
               proc(52, 50, 1.5, 1.8, argv=(PY, "early.py")))
    tree = a.process_tree()
    name = dict(zip(tree["index"], tree["name"], strict=True))
    row = tree.set_index("name")
    assert name[row.loc["child.py", "parent_index"]] == "second.py"
    assert name[row.loc["early.py", "parent_index"]] == "first.py"
    # A child never hangs below a process that started after it.
    late = run_of(proc(10, LAUNCHER, 0.0, 10.0), proc(61, 60, 1.0, 2.0, argv=(PY, "x.py")),
                  proc(60, 10, 3.0, 4.0, argv=(PY, "y.py")))
    assert not late.process_tree().set_index("name").loc["x.py", "parent_in_run"]


def test_a_cycle_of_reused_pids_is_cut():
    t = T.build_tree([T.ProcessFacts(1, 2, "h", 0), T.ProcessFacts(2, 1, "h", 0)])
    assert sorted(t.order) == [0, 1] and T.NO_PARENT in t.parent


def test_other_hosts_are_separate_trees():
    a = run_of(proc(10, LAUNCHER, 0.0, 5.0), proc(11, 10, 1.0, 2.0, host="other"))
    assert not by_pid(a.process_tree()).loc[11, "parent_in_run"]


def test_forked_children_and_multiprocessing_names():
    a = run_of(proc(10, LAUNCHER, 0.0, 5.0, argv=(PY, "train.py")),
               proc(11, 10, 1.0, 2.0, argv=(PY, "train.py")),  # os.fork(), no exec
               proc(12, 10, 1.0, 2.0, [(1.1, 1.2, "work")], argv=(PY, "train.py"),
                    metadata={fmt.META_ROLE: fmt.ROLE_POOL_WORKER,
                              fmt.META_ROLE_DETAIL: "multiprocessing.Pool",
                              fmt.META_MP_NAME: "ForkPoolWorker-1",
                              fmt.META_MP_TARGET: "multiprocessing.pool:worker"}))
    t = by_pid(a.process_tree())
    assert t.loc[11, "name"] == "train.py (forked)" and t.loc[11, "role"] == "subprocess"
    assert t.loc[12, "name"] == "pool.worker [ForkPoolWorker-1]"
    assert t.loc[12, "role"] == fmt.ROLE_POOL_WORKER and t.loc[12, "mp_name"] == \
        "ForkPoolWorker-1"


def test_incomplete_processes_are_marked():
    a = run_of(proc(10, LAUNCHER, 0.0, 5.0), proc(11, 10, 1.0, 2.0, [(1.1, 1.5, "w")],
                                                   complete=False))
    t = by_pid(a.process_tree())
    assert t.loc[10, "complete"] and not t.loc[11, "complete"]
    assert "incomplete" in table.render(a, "text")


@pytest.mark.parametrize("argv, kind, target", [
    ((PY, "train.py", "-x"), "script", "train.py"),
    (("python3.11", "-u", "-X", "dev", "-W", "error", "t.py"), "script", "t.py"),
    (("python", "-Xdev", "-OO", "-m", "pkg.mod", "--flag"), "module", "pkg.mod"),
    (("python", "-mpkg"), "module", "pkg"),
    (("python", "-c", "print(1)", "a"), "code", "print(1)"),
    (("python",), "stdin", "-"),
    (("python", "--check-hash-based-pycs", "always", "s.py"), "script", "s.py"),
    (("/usr/bin/ray", "start"), "other", "/usr/bin/ray start"),
])
def test_parse_command(argv, kind, target):
    c = R.parse_command(argv)
    assert (c.kind, c.target) == (kind, target)


def test_role_labels():
    vec = fmt.ROLE_VECENV_WORKER
    assert R.role_label(vec, {fmt.META_ENV_INDEX: [2, 3], fmt.META_NUM_ENVS: 8}) == \
        "vector-env worker (envs 2-3 of 8)"
    assert R.role_label(vec, {fmt.META_ENV_INDEX: 0}) == "vector-env worker (env 0)"
    assert R.role_label(vec, {}) == vec
    assert R.role_label(fmt.ROLE_POOL_WORKER, {fmt.META_ENV_INDEX: 1}) == fmt.ROLE_POOL_WORKER
    assert R.display_name((PY, "-c", "import os\nos.getpid()"), {}) == "-c 'import os'"
    assert R.display_name((PY, "-c", "x" * 200), {}).endswith("…")


def test_text_report_opens_with_the_tree_and_summary_and_folds_helpers():
    out = table.render(sb3_like(), "text")
    tree_at, summary_at = out.index("Processes: 5 (2 idle helpers)"), out.index("Run summary")
    first_table = out.index("Process 10 train.py --steps 100 (main)")
    assert tree_at < summary_at < first_table
    assert "├─ 11 multiprocessing forkserver" in out
    assert "│  ├─ 13 subproc_vec_env._worker" in out
    assert "└─ 12 multiprocessing resource tracker" in out
    assert "Process 11 " not in out and "Process 12 " not in out  # folded
    assert "Idle helpers (2, tables folded" in out
    assert "vector-env worker (env 1 of 2)" in out


def test_single_process_report_is_unchanged():
    out = table.render(run_of(proc(10, LAUNCHER, 0, 1, [(0.1, 0.2, "a")])), "text")
    assert "Processes:" not in out and "Run summary" not in out
    # Its display name (from its command line, as in the tree: "-m pkg.mod", never "-m")
    assert "Process 10 train.py:" in out


def test_json_and_one_table_formats_carry_the_same():
    a = sb3_like()
    doc = json.loads(table.render(a, "json"))
    assert {"run", "processes", "operations", "extrapolation", "process_tree",
            "run_summary", "warnings"} <= set(doc)
    assert [p["pid"] for p in doc["process_tree"]] == [10, 11, 13, 14, 12]
    assert doc["run_summary"]["wall_s"] == 10.0 and doc["run_summary"]["idle_helpers"] == 2
    assert doc["run_summary"]["roles"][-1]["role"] == "all processes"
    assert doc["run_summary"]["operations"][0]["operation"] == "simulation"
    csv = table.render_frame(P.table_frame(a, "processes"), "csv").splitlines()
    assert csv[0].startswith("index,depth,pid,ppid,parent_index,parent_in_run,role")
    assert csv[0].endswith(",idle_helper,ray_actor_class,ray_actor_id,ray_tasks,session,"
                           "continues,sampled_cpu_s")
    assert len(csv) == 6
    md = table.render_frame(P.table_frame(a, "summary"), "markdown").splitlines()
    assert md[0].startswith("| role | processes |")
    assert table.render(a, "csv") == table.render_frame(P.table_frame(a, "operations"), "csv")


def test_many_idle_helpers_fold_into_one_line_by_role():
    pool = {fmt.META_ROLE: fmt.ROLE_POOL_WORKER}
    a = run_of(proc(10, LAUNCHER, 0.0, 5.0, [(1, 2, "a")]),
               *[proc(100 + k, 10, 1.0 + k / 100, 4.0, metadata=pool) for k in range(10)],
               proc(99, 10, 0.5, 4.0, argv=TRACKER))
    line = P.folded_lines(a)[-1]
    assert line.startswith("Idle helpers (11, tables folded")
    assert "resource tracker 99; 10 × pool worker: 100 101 102 103 104 105 106 107 …" in line
    assert a.run_summary().set_index("role").loc[fmt.ROLE_POOL_WORKER, "idle_helpers"] == 10


def test_sessions_of_one_process_are_kept_apart():
    """rlscope.start/stop twice in one process: two traces of one pid, each its own
    section with its own operations and percentages of its own time; one process in
    the tree's count, the same role, the later one marked."""
    first = proc(10, 5, 0.0, 2.0, [(0.5, 1.5, "a")])
    second = proc(10, 5, 5.0, 6.0, [(5.2, 5.8, "b")],
                  metadata={fmt.META_SESSION: 1})
    reused = proc(10, 5, 8.0, 9.0, [(8.1, 8.2, "c")])  # a reused pid: no session mark
    a = run_of(first, second, reused, launcher=None)
    procs = a.processes()
    assert list(zip(procs["pid"], procs["session"], strict=True)) == [(10, 0), (10, 1),
                                                                     (10, 2)]
    ops = a.operations()
    for n, name, wall in ((0, "a", 1.0), (1, "b", 0.6), (2, "c", 0.1)):
        rows = ops[(ops["session"] == n) & (ops["operation"] != "(unannotated)")]
        # a later session's start is no process start-up
        assert list(rows["operation"]) == ([name] if n == 1 else ["(start-up)", name])
        rows = rows[rows["operation"] == name]
        assert rows["wall_s"].iloc[0] == pytest.approx(wall)
    assert (ops["wall_pct"] <= 100.0 + 1e-9).all()
    tree = a.process_tree().set_index("index")
    assert list(tree["role"]) == ["main", "main", "subprocess"]
    assert tree.loc[1, "continues"] == 0 and tree.loc[2, "continues"] == -1
    assert tree.loc[1, "name"].endswith("[session 2]")
    summary = a.run_summary().set_index("role")
    assert summary.loc["all processes", "processes"] == 2  # two processes, three traces
    text = table.render_text(a)
    assert "Processes: 2 in 3 recording sessions" in text
    assert text.count("Process 10 ") == 3
    assert "[session 2] (main)" in text
