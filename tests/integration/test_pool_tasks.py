"""Pool and executor tasks (docs/multiprocess.md#pools): rls-prof on a pool of 2 workers
mapping a function over 20 items, item 13 slow; the report names the function and the
item, every item is one task, the slow task's sleep is its own Waiting time and the
workers' waits for their next task are outside every task."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlscope.trace import format as fmt
from rlscope.trace.reader import read_trace
from tests.conftest import run_tool
from tests.integration.test_multiprocess import record


def rlscope_tasks(out: Path):
    import rlscope.analysis

    return rlscope.analysis.load(out).tasks()


ITEMS, SLOW = 20, 13  # as in workloads/pool_tasks.py


def _intervals(p, kinds: tuple[int, int], want) -> list[tuple[int, int]]:
    """(begin, end) of the begin/end pairs of the main thread whose name ``want`` takes
    (tasks do not nest; only the outermost wait per thread is recorded)."""
    ev, names = p.events, p.strings
    out, start = [], None
    for t, k, n in zip(ev.time_ns, ev.kind, ev.name, strict=True):
        if k not in kinds or not want(names[n]):
            continue
        if k == kinds[0]:
            start = int(t)
        elif start is not None:
            out.append((start, int(t)))
            start = None
    return out


def submissions(out: Path) -> list[int]:
    """The submitting processes' counts of submissions to process pools (format.
    META_POOL_CALLS: the cost model's pool_call kind), 0 where a trace has none."""
    return [p.metadata.get(fmt.META_POOL_CALLS, 0) for p in read_trace(out).processes
            if fmt.META_POOL_TASKS in p.metadata]


@pytest.mark.parametrize("how, tasks, calls", [("pool", ITEMS, 1), ("imap", ITEMS, 1),
                                               ("executor", ITEMS + 1, 2)])
def test_pool_straggler_named(tmp_path: Path, how: str, tasks: int, calls: int) -> None:
    out = tmp_path / "run"
    a = record(out, "pool_tasks.py", how)
    assert submissions(out) == [calls]
    rows = a.tasks()
    assert len(rows) == tasks
    mapped = rows[rows["call"] > 0]
    assert sorted(mapped["index"]) == list(range(ITEMS))  # each item once, chunks too
    assert set(rows["function"]) == {"slow_square"}
    assert rows["pid"].nunique() == 2

    r = run_tool("rls-analyze", "report", str(out), "--format", "json")
    assert r.returncode == 0, r.stderr
    whole = json.loads(r.stdout)
    report = whole["tasks"]
    # ... and "what limits this run" names it, with a bound: handing item 13 out first
    # takes the call's makespan from ~0.42 s to ~0.34 s (19 x 0.02 s + 0.3 s on 2 workers).
    (verdict,) = [v for v in whole["run_diagnosis"] if v["kind"] == "straggler-task"]
    assert "slow_square item 13" in verdict["verdict"] and 0.03 < verdict["bound_s"] < 0.2
    (fn,) = report["functions"]
    assert fn["function"] == "slow_square" and fn["tasks"] == tasks
    assert fn["slowest_index"] == SLOW and fn["max_s"] >= 0.29
    (st,) = report["stragglers"]
    assert st["function"] == "slow_square" and st["index"] == SLOW
    slow_pid = int(mapped[mapped["index"] == SLOW]["pid"].iloc[0])
    assert st["pid"] == slow_pid and "slow_square item 13" in st["text"]
    text = run_tool("rls-analyze", "report", str(out)).stdout
    assert "Straggler: slow_square item 13" in text

    # The slow task's sleep is the task's Waiting time.
    ops = a.operations()
    task_ops = ops[ops["operation"] == "task:slow_square"]
    assert task_ops["calls"].sum() == tasks
    slow_op = task_ops[task_ops["pid"] == slow_pid].iloc[0]
    assert slow_op["waiting_s"] >= 0.29

    # The workers' reads of the task queue are Waiting outside every task.
    trace = read_trace(out)
    found = 0
    for p in trace.processes:
        if p.metadata.get(fmt.META_ROLE) != fmt.ROLE_POOL_WORKER:
            continue
        ops_iv = _intervals(p, (fmt.OPERATION_BEGIN, fmt.OPERATION_END),
                            lambda n: n.startswith("task:"))
        recv = _intervals(p, (fmt.WAIT_CALL_BEGIN, fmt.WAIT_CALL_END),
                          lambda n: n.startswith("multiprocessing."))
        assert ops_iv and recv
        b, e = np.array(ops_iv).T
        for w0, w1 in recv:
            assert not ((b < w1) & (e > w0)).any(), (w0, w1)
        found += len(recv)
    assert found


def test_apply_async_counted(tmp_path: Path) -> None:
    """apply_async: one task per call (the function given by position or as func=),
    indexed by the submitting process's count."""
    out = tmp_path / "run"
    record(out, "pool_tasks.py", "apply")
    r = run_tool("rls-analyze", "report", str(out), "--format", "json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)["tasks"]
    assert sorted(f["tasks"] for f in report["functions"]) == [3]
    assert sorted(rlscope_tasks(out)["index"]) == [0, 1, 2]
    assert submissions(out) == [3]
    assert report["stragglers"] == []  # three equal tasks


def test_thread_pool_straggler_named(tmp_path: Path) -> None:
    """multiprocessing's ThreadPool: each item an operation on the pool thread that ran
    it, in the one process; the slow item is named with its bound, as for a process pool
    (the pool's two threads are its workers)."""
    out = tmp_path / "run"
    a = record(out, "pool_tasks.py", "threads")
    rows = a.tasks()
    assert len(rows) == ITEMS + 1 and rows["pid"].nunique() == 1
    assert sorted(rows.loc[rows["call"] > 0, "index"]) == list(range(ITEMS))
    assert submissions(out) == [0]  # a thread pool's: priced by no pool kind
    whole = json.loads(run_tool("rls-analyze", "report", str(out), "--format", "json").stdout)
    (verdict,) = [v for v in whole["run_diagnosis"] if v["kind"] == "straggler-task"]
    assert "slow_square item 13" in verdict["verdict"] and 0.03 < verdict["bound_s"] < 0.2
    ops = a.operations()
    task_ops = ops[ops["operation"] == "task:slow_square"]
    assert task_ops["calls"].sum() == ITEMS + 1
    assert task_ops["waiting_s"].sum() >= 0.29 + ITEMS * 0.02 * 0.9  # their sleeps
    # On the pool's two threads, not the main one.
    trace = read_trace(out)
    (p,) = [p for p in trace.processes if p.pid == int(rows["pid"].iloc[0])]
    begins = p.events.kind == fmt.OPERATION_BEGIN
    names = np.array(p.strings, object)[p.events.name[begins]]
    threads = set(p.events.thread[begins][names == "task:slow_square"].tolist())
    assert len(threads) == 2 and 0 not in threads
