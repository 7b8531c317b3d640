"""The pool-task table and straggler rule (rlscope.analysis.processes.tasks) on synthetic
task records, and the Task wrapper's calling modes (rlscope.integrations.pooltasks)."""

from __future__ import annotations

import functools
import pickle

import pytest

from rlscope.analysis.processes import tasks
from rlscope.integrations import pooltasks
from rlscope.reporters import tasks as tasks_report
from rlscope.trace import format as fmt

MS = 1_000_000


def _meta(records: list[list[object]]) -> dict[str, object]:
    return {f"{fmt.META_TASK_PREFIX}{i}": r for i, r in enumerate(records)}


def _pool(durations_ms: list[float], name: str = "work", gap_ms: float = 0.0,
          pids: tuple[int, int] = (10, 11)) -> list[tuple[int, dict[str, object]]]:
    """Tasks run back to back, alternating between two workers."""
    clocks = [0, 0]
    per: list[list[list[object]]] = [[], []]
    for i, d in enumerate(durations_ms):
        w = min((0, 1), key=lambda k: clocks[k])
        b = clocks[w]
        e = b + int(d * MS)
        per[w].append([name, 1, i, b, e])
        clocks[w] = e + int(gap_ms * MS)
    return [(pids[0], _meta(per[0])), (pids[1], {"other": 1, **_meta(per[1])})]


def test_rows_and_table() -> None:
    rows = tasks.task_rows(_pool([20.0] * 10 + [200.0] + [20.0] * 9))
    assert len(rows) == 20 and sorted(rows["index"]) == list(range(20))
    assert list(rows["begin_ns"]) == sorted(rows["begin_ns"])
    (t,) = tasks.task_table(rows).to_dict("records")
    assert t["function"] == "work" and t["tasks"] == 20 and t["workers"] == 2
    assert t["p50_s"] == pytest.approx(0.020) and t["max_s"] == pytest.approx(0.200)
    assert t["mean_s"] == pytest.approx((19 * 0.020 + 0.200) / 20)
    assert t["total_s"] == pytest.approx(19 * 0.020 + 0.200)
    assert t["slowest_index"] == 10 and t["p99_s"] <= t["max_s"]
    assert t["wall_s"] > 0


def test_straggler_named() -> None:
    table = tasks.task_table(tasks.task_rows(_pool([20.0] * 17 + [300.0] + [20.0] * 2)))
    (s,) = tasks.stragglers(table)
    assert s["function"] == "work" and s["index"] == 17 and s["ratio"] == pytest.approx(15)
    assert s["text"].startswith("work item 17 took 0.30 s, 15.0x the median 0.02 s of "
                                "its 20 tasks (worker pid")


@pytest.mark.parametrize("durations, why", [
    ([20.0] * 19 + [55.0], "under 3x the median"),
    ([20.0] * 3, "equal tasks"),
    ([20.0, 200.0], "too few tasks"),
])
def test_no_straggler(durations: list[float], why: str) -> None:
    table = tasks.task_table(tasks.task_rows(_pool(durations)))
    assert tasks.stragglers(table) == [], why


def test_straggler_needs_a_share_of_wall_time() -> None:
    # 5x the median, but the tasks are spread over a long time: under 10% of it.
    rows = tasks.task_rows(_pool([10.0] * 99 + [50.0], gap_ms=20.0))
    table = tasks.task_table(rows)
    assert table.loc[0, "max_s"] / table.loc[0, "p50_s"] > tasks.RATIO
    assert tasks.stragglers(table) == []
    assert tasks.stragglers(table, share=0.0)[0]["index"] == 99


def test_malformed_records_skipped_and_metadata_filtered() -> None:
    md = _meta([["f", 1, 0, 0, MS], ["f", "x", 1, 0, MS], "junk", ["g"]])
    assert len(tasks.task_rows([(1, md)])) == 1
    assert tasks.without_tasks({**md, "k": 1}) == {"k": 1}
    assert tasks.task_rows([]).empty


def test_section_text_and_data() -> None:
    rows = tasks.task_rows(_pool([20.0] * 17 + [300.0] + [20.0] * 2)
                           + _pool([5.0] * 4, name="other", pids=(12, 13)))
    s = tasks_report.section(rows)
    data = s.data()
    assert s.key == "tasks" and [f["function"] for f in data["functions"]] == ["work", "other"]
    assert [d["index"] for d in data["stragglers"]] == [17]
    assert "Straggler: work item 17" in s.text()


def _double(x: int, y: int = 0) -> int:
    return 2 * x + y


@pytest.mark.parametrize("mode, args, kwargs, want", [
    (pooltasks.ITEM, ((3, 5),), {}, 10),
    (pooltasks.STAR, (3, [5, 1]), {}, 11),
    (pooltasks.COUNTED, (3, 5, 1), {}, 11),
    (pooltasks.FIXED, (5,), {"y": 2}, 12),
])
def test_task_modes_unrecorded(mode: int, args: tuple[object, ...],
                               kwargs: dict[str, object], want: int) -> None:
    t = pooltasks.Task(_double, mode, 1, 7)
    assert t(*args, **kwargs) == want
    back = pickle.loads(pickle.dumps(t))
    assert back(*args, **kwargs) == want and back.name == "_double"


def test_a_task_is_unpickled_once_per_process() -> None:
    # Sent with every job of its call: the worker decodes it once, then looks it up.
    t = pooltasks.Task(_double, pooltasks.ITEM, 1)
    blob = pickle.dumps(t)
    assert pickle.dumps(t) == blob
    first, again = pickle.loads(blob), pickle.loads(blob)
    assert first is again and first is not t
    assert (first.by, first.submitted, first.call) == (t.by, t.submitted, t.call)


def test_a_plain_functions_part_is_pickled_once() -> None:
    # Later calls send the same bytes for the function (the worker looks it up); the
    # call's own numbers travel apart and come back right.
    a, b = pooltasks.Task(_double, pooltasks.ITEM, 1), pooltasks.Task(_double, pooltasks.ITEM, 2)
    fa, fb = pooltasks._fn_blob(a), pooltasks._fn_blob(b)
    assert fa is fb
    back = pickle.loads(pickle.dumps(b))
    assert (back.call, back.fn, back.name) == (2, _double, "_double")


def test_a_partial_is_pickled_with_its_state_at_each_call() -> None:
    # A partial's arguments may change between calls: never a stale copy.
    extra = [1]
    f = functools.partial(_sum_with, extra)
    first = pickle.loads(pickle.dumps(pooltasks.Task(f, pooltasks.FIXED, 0, 0)))
    extra.append(5)
    second = pickle.loads(pickle.dumps(pooltasks.Task(f, pooltasks.FIXED, 0, 1)))
    assert first(1) == 2 and second(1) == 7


def _sum_with(extra: list[int], x: int) -> int:
    return x + sum(extra)


def test_task_name() -> None:
    assert pooltasks.task_name(functools.partial(_double, y=1)) == "_double"
    assert pooltasks.task_name(len) == "len"
    assert pooltasks.task_name(object()) == "object"


def test_a_recorded_task_is_its_operation_and_its_record(tmp_path, recorder: str) -> None:
    """Called while recording (as in a worker: the Task pickled and back), with each
    recorder: the function's result, an operation ``task:<name>`` around the call, and
    one record that times it, says which thread ran it, who submitted it and when; a
    raising function raises and is recorded too."""
    import threading
    import time

    import rlscope
    from rlscope.trace.reader import read_trace

    sent = pickle.dumps(pooltasks.Task(_double, pooltasks.STAR, 4))
    rlscope.start(tmp_path / "t", recorder=recorder)
    try:
        t = pickle.loads(sent)
        before = time.perf_counter_ns()
        assert t(2, [5, 1]) == 11
        with pytest.raises(TypeError):
            t(3, ["x", 1])
        after = time.perf_counter_ns()
    finally:
        rlscope.stop()
    (p,) = read_trace(tmp_path / "t").processes
    records = sorted((v for k, v in p.metadata.items()
                      if k.startswith(fmt.META_TASK_PREFIX)), key=lambda v: v[2])
    assert [r[:3] for r in records] == [["_double", 4, 2], ["_double", 4, 3]]
    for r in records:
        assert before <= r[3] <= r[4] <= after
        assert r[5] == threading.get_native_id() and r[6] == t.by and r[7] == t.submitted
    begins = p.events.time_ns[p.events.kind == fmt.OPERATION_BEGIN]
    ends = p.events.time_ns[p.events.kind == fmt.OPERATION_END]
    assert len(begins) == len(ends) == 2 and set(p.strings) >= {"task:_double"}
    # The operation lies inside its record's [begin, end] (a microsecond of clock
    # mapping allowed, as the correction allows).
    for r, b, e in zip(records, begins.tolist(), ends.tolist(), strict=True):
        assert r[3] - 1000 <= b <= e <= r[4] + 1000
