"""A process's waits for its pool tasks' results, which rlscope slowed in the workers: a
Pool-like run simulated event by event, true and instrumented, then corrected; the
submitter's corrected timeline must be its true one, exactly."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest

from rlscope.analysis.engine.synthetic import process_trace
from rlscope.analysis.overhead.correction import correct_trace
from rlscope.analysis.overhead.model import KindCost
from rlscope.trace import format as fmt
from rlscope.trace.data import ProcessTrace, Trace
from tests.unit.test_correction import COSTS, _split

OB, OE = fmt.OPERATION_BEGIN, fmt.OPERATION_END
SB, SE = fmt.SIMULATOR_CALL_BEGIN, fmt.SIMULATOR_CALL_END
BB, BE = fmt.BACKEND_CALL_BEGIN, fmt.BACKEND_CALL_END
WB, WE = fmt.WAIT_CALL_BEGIN, fmt.WAIT_CALL_END
START, END = fmt.PROCESS_START, fmt.PROCESS_END
HOLDER, TID = 100, 1000  # the submitter's pid; each worker's thread (process_trace's)
SEND, TRANSFER = 1500, 100  # the submitter hands the tasks out at SEND; a message's time
# The pool kinds: a task's own book-keeping in its worker (paid before its operation's
# begin), a submission's in the submitter (paid before the tasks leave and before its
# next event).
POOL = {**COSTS, "pool_task": KindCost(700, 0, 0, "test"),
        "pool_call": KindCost(900, 0, 0, "test")}


def _record(events: list[tuple[int, int]], wakes: dict[int, int],
            extra: dict[int, float] | None = None) -> tuple[list[int], list[int]]:
    """One thread's events as recording stamps them: each event's costs delay what
    follows, except that a wait ending at index i of ``wakes`` ends when what it waits for
    arrives (``wakes[i]``, recorded time) whatever was paid before; ``extra``: more cost
    paid just before event i's stamp. Returns the stamps and, per event, when the thread
    moved on after it (its costs paid)."""
    stamps, after, offset, delay = [], [], 0, 0.0
    for i, (t, k) in enumerate(events):
        if i in wakes:
            offset, delay = wakes[i] - t, 0.0
        pre, post = _split(k)
        pre += (extra or {}).get(i, 0.0)
        delay += pre
        stamps.append(t + offset + int(delay))
        delay += post
        after.append(t + offset + int(delay))
    return stamps, after


@dataclass
class Worker:
    tasks: list[tuple[int, int]]  # (length ns, simulator calls inside) run back to back


def _worker_events(w: Worker) -> tuple[list[tuple[int, int]], list[int]]:
    """True timeline of a worker: waits for work, runs its tasks (each an operation
    ``task:f`` with simulator calls inside, a queue read between them), waits again.
    Returns the events and the indexes of each task's begin and end."""
    wake = SEND + TRANSFER
    ev, begins, ends, t = [(0, START), (100, WB), (wake, WE)], [], [], wake + 50
    for length, calls in w.tasks:
        begins.append(len(ev))
        ev.append((t, OB))
        gap = length // (2 * calls + 1)
        for c in range(calls):
            ev += [(t + (2 * c + 1) * gap, SB), (t + (2 * c + 2) * gap, SE)]
        ends.append(len(ev))
        ev.append((t + length, OE))
        ev += [(t + length + 10, WB), (t + length + 20, WE)]
        t += length + 40
    ev[-1] = (90_000, WE)
    return [*ev, (100_000, END)], list(zip(begins, ends, strict=True))


_WORKER_NAMES = {START: "", END: "", WB: "multiprocessing.connection.Connection._recv",
                 WE: "multiprocessing.connection.Connection._recv", OB: "task:f",
                 OE: "task:f", SB: "step", SE: "step"}


def _worker(pid: int, events: list[tuple[int, int]], tasks: list[tuple[int, int]],
            end_ns: list[int], submitted: int) -> ProcessTrace:
    meta = {f"{fmt.META_TASK_PREFIX}{j}": ["f", 1, j, events[b][0], end_ns[j], TID,
                                          HOLDER, submitted]
            for j, (b, _) in enumerate(tasks)}
    return process_trace([(t, 0, k, _WORKER_NAMES[k]) for t, k in events], pid=pid,
                         metadata=meta)


def _run(workers: list[Worker], waits: list[list[tuple[int, int]]], work_ns: int = 400,
         costs: dict[str, KindCost] = COSTS
         ) -> tuple[ProcessTrace, ProcessTrace, list[ProcessTrace]]:
    """The submitter's true and recorded traces, and the recorded workers'. ``waits``:
    per wait of the submitter, the (worker, task) results it waits for; between two waits
    it makes a backend call of ``work_ns``. ``costs``: with the pool kinds, what each
    task and the submission cost as well."""
    true_w = [_worker_events(w) for w in workers]
    done = [[ev[e][0] for _, e in tasks] for ev, tasks in true_w]  # true task ends
    head = [(0, START), (1000, OB)]
    sent = SEND + int(sum(sum(_split(k)) for _, k in head))  # recorded submission
    task_ns = costs["pool_task"].per_event_ns if "pool_task" in costs else 0.0
    call_ns = costs["pool_call"].per_event_ns if "pool_call" in costs else 0.0
    rec_w, rec_done = [], []
    for i, (ev, tasks) in enumerate(true_w):
        stamps, after = _record(ev, {2: sent + int(call_ns) + TRANSFER},
                                {b: task_ns for b, _ in tasks})
        # A task's record ends once its operation's end is paid for: it replies then.
        rec_done.append([after[e] for _, e in tasks])
        rec_w.append(_worker(200 + i, list(zip(stamps, (k for _, k in ev), strict=True)),
                             tasks, rec_done[-1], sent))
    holder, wakes, t = list(head), {}, 1600
    for n, wanted in enumerate(waits):
        if n:
            holder += [(t, BB), (t + work_ns, BE)]
            t += work_ns + 100
        arrive = max(done[w][j] for w, j in wanted) + TRANSFER
        assert arrive > t + 1000, "the submitter must wait"
        wakes[len(holder) + 1] = max(rec_done[w][j] for w, j in wanted) + TRANSFER
        holder += [(t, WB), (arrive, WE)]
        t = arrive + 100
    holder += [(t, OE), (t + 200, END)]
    names = {START: "", END: "", OB: "collect", OE: "collect", BB: "torch.mm",
             BE: "torch.mm", WB: "threading.Event.wait", WE: "threading.Event.wait"}
    meta = {fmt.META_POOL_TASKS: "1"}

    def proc(ev: list[tuple[int, int]]) -> ProcessTrace:
        return process_trace([(t, 0, k, names[k]) for t, k in ev], pid=HOLDER, metadata=meta)

    # The submission's cost: the caller's part before its next event; the pool's task
    # thread pays the inside part meanwhile, before the tasks leave.
    inside = costs["pool_call"].inside_ns if "pool_call" in costs else 0.0
    stamps, _ = _record(holder, wakes, {len(head): call_ns - inside})
    recorded = proc(list(zip(stamps, (k for _, k in holder), strict=True)))
    return proc(holder), recorded, rec_w


def _corrected(recorded: ProcessTrace, workers: list[ProcessTrace],
               costs: dict[str, KindCost] = COSTS) -> ProcessTrace:
    out, _ = correct_trace(Trace(None, {}, [recorded, *workers]), costs)  # type: ignore
    return out.processes[0]


@pytest.mark.parametrize("costs", [COSTS, POOL], ids=["hooks", "hooks+pool kinds"])
def test_a_map_wait_is_corrected_to_its_true_length(costs: dict[str, KindCost]):
    # Worker 0's tasks are shorter but make many more calls: recorded, it answers last.
    true, recorded, workers = _run([Worker([(4_000, 20), (4_000, 20)]),
                                    Worker([(4_500, 1), (4_500, 1)])],
                                   [[(0, 0), (0, 1), (1, 0), (1, 1)]], costs=costs)
    alone = _corrected(recorded, [], costs)
    fixed = _corrected(recorded, workers, costs)
    assert fixed.events.time_ns.tolist() == true.events.time_ns.tolist()
    # Without the workers only the submitter's own costs go: the wait stays longer.
    assert alone.events.time_ns[-1] - fixed.events.time_ns[-1] > 10_000


@pytest.mark.parametrize("costs", [COSTS, POOL], ids=["hooks", "hooks+pool kinds"])
def test_the_worker_that_answers_last_without_recording_sets_the_wait(
        costs: dict[str, KindCost]):
    true, recorded, workers = _run([Worker([(4_000, 30), (4_000, 30)]),
                                    Worker([(4_700, 1), (4_700, 1)])],
                                   [[(0, 0), (0, 1), (1, 0), (1, 1)]], costs=costs)
    assert _corrected(recorded, workers, costs).events.time_ns.tolist() \
        == true.events.time_ns.tolist()


@pytest.mark.parametrize("costs", [COSTS, POOL], ids=["hooks", "hooks+pool kinds"])
def test_successive_waits_on_one_submission_are_each_corrected(costs: dict[str, KindCost]):
    # imap-like: one submission, the submitter waits for each result in turn and works
    # in between; the second wait must not lose again what the first one lost.
    true, recorded, workers = _run([Worker([(6_000, 20), (6_000, 20)])],
                                   [[(0, 0)], [(0, 1)]], costs=costs)
    assert _corrected(recorded, workers, costs).events.time_ns.tolist() \
        == true.events.time_ns.tolist()


def test_the_pool_kinds_are_what_sets_a_pool_of_short_tasks_right():
    # Short tasks with nothing recorded inside: without the pool kinds the corrected
    # wait keeps the per-task and per-submission costs (what rlscope's Pool integration
    # costs), with them it is exact; the workers' own timelines lose each task's cost
    # before its operation, and the tree's overhead counts them.
    true, recorded, workers = _run([Worker([(1_000, 0)] * 4), Worker([(1_000, 0)] * 4)],
                                   [[(0, 3), (1, 3)]], costs=POOL)
    trace = Trace(None, {}, [recorded, *workers])  # type: ignore[arg-type]
    fixed, summary = correct_trace(trace, POOL)
    assert fixed.processes[0].events.time_ns.tolist() == true.events.time_ns.tolist()
    hooks_only = _corrected(recorded, workers, COSTS).events.time_ns
    assert hooks_only[-1] - true.events.time_ns[-1] >= 4 * 700 + 900 - 1
    _, summary_hooks = correct_trace(trace, COSTS)
    assert summary.tree_overhead_s() * 1e9 == pytest.approx(
        summary_hooks.tree_overhead_s() * 1e9 + 8 * 700 + 900, abs=2)
    assert summary_hooks.pool_tasks() == 8 and summary.pool_tasks() == 0


def test_tasks_of_another_submitter_host_or_older_trace_change_nothing():
    _, recorded, workers = _run([Worker([(4_000, 20)])], [[(0, 0)]])
    alone = _corrected(recorded, []).events.time_ns.tolist()
    w = workers[0]
    assert _corrected(recorded, [w]).events.time_ns.tolist() != alone
    records = w.metadata
    for meta in ({k: [*v[:6], HOLDER + 1, v[7]] for k, v in records.items()},  # another pid
                 {k: v[:6] for k, v in records.items()}):  # an older trace: no submitter
        assert _corrected(recorded, [replace(w, metadata=meta)]).events.time_ns.tolist() \
            == alone
    elsewhere = replace(w, header=replace(w.header, host="other"))  # the pid, elsewhere
    assert _corrected(recorded, [elsewhere]).events.time_ns.tolist() == alone


JOB = "01000000"


def _as_ray(recorded: ProcessTrace, workers: list[ProcessTrace]
            ) -> tuple[ProcessTrace, list[ProcessTrace]]:
    """The same run as a Ray job: the submitter a driver waiting in ``ray.get``, each
    worker an actor recording its method calls (format.META_RAY_CALL_PREFIX: when each
    ran, nothing about who called it or when)."""
    driver = replace(recorded, metadata={fmt.META_RAY: {"kind": "driver", "job_id": JOB}},
                     strings=["ray.get" if s == "threading.Event.wait" else s
                              for s in recorded.strings])
    actors = []
    for w in workers:
        calls = {f"{fmt.META_RAY_CALL_PREFIX}{j}": ["Worker.step", v[3], v[4], v[5]]
                 for j, v in enumerate(w.metadata.values())}
        actors.append(replace(w, metadata={fmt.META_RAY: {"kind": "actor", "job_id": JOB},
                                           **calls}))
    return driver, actors


def test_a_ray_get_is_corrected_by_what_the_actors_calls_cost():
    """A driver's ray.get on its actors' method calls: shortened by what the actors'
    book-keeping cost from each call's begin. Ray tells a worker neither who called it
    nor when, so the actor's wake-up before its first call (its wait's end: 35 ns before
    the stamp, 140 after) stays in the wait, exactly."""
    true, recorded, workers = _run([Worker([(4_000, 20), (4_000, 20)]),
                                    Worker([(4_500, 1), (4_500, 1)])],
                                   [[(0, 0), (0, 1), (1, 0), (1, 1)]])
    driver, actors = _as_ray(recorded, workers)
    alone = _corrected(driver, []).events.time_ns
    fixed = _corrected(driver, actors).events.time_ns
    wake = int(sum(_split(WE)))
    assert wake == 175
    after = np.flatnonzero(true.events.kind == OE)[0]  # the wait's end is before it
    assert fixed[after:].tolist() == (true.events.time_ns[after:] + wake).tolist()
    assert fixed[:after - 1].tolist() == true.events.time_ns[:after - 1].tolist()
    assert alone[-1] - fixed[-1] > 10_000
    # The report's count of ray waits left as recorded: the driver's, without its actors.
    for procs, left in (([driver], 1), ([driver, *actors], 0)):
        _, summary = correct_trace(Trace(None, {}, procs), COSTS)  # type: ignore[arg-type]
        assert summary.ray_waits() == left


def test_ray_calls_of_another_job_or_host_change_nothing():
    _, recorded, workers = _run([Worker([(4_000, 20)])], [[(0, 0)]])
    driver, actors = _as_ray(recorded, workers)
    alone = _corrected(driver, []).events.time_ns.tolist()
    a = actors[0]
    assert _corrected(driver, [a]).events.time_ns.tolist() != alone
    other_job = replace(a, metadata={**a.metadata, fmt.META_RAY: {"kind": "actor",
                                                                  "job_id": "02000000"}})
    elsewhere = replace(a, header=replace(a.header, host="other"))
    not_ray = replace(a, metadata={k: v for k, v in a.metadata.items() if k != fmt.META_RAY})
    for w in (other_job, elsewhere, not_ray):
        assert _corrected(driver, [w]).events.time_ns.tolist() == alone


def test_pool_kinds_are_counted_where_they_are_paid():
    from rlscope.analysis.overhead.kinds import count_events, count_process

    _, recorded, workers = _run([Worker([(1_000, 0)] * 3)], [[(0, 2)]], costs=POOL)
    submitter = replace(recorded, metadata={**recorded.metadata, fmt.META_POOL_CALLS: 1})
    counts = count_events(Trace(None, {}, [submitter, *workers]))  # type: ignore[arg-type]
    assert (counts["pool_task"], counts["pool_call"]) == (3, 1)
    # Tasks a process ran for itself (a thread pool's) are not pool tasks.
    mine = replace(workers[0], header=replace(workers[0].header, pid=HOLDER))
    assert count_process(mine)["pool_task"] == 0


def test_what_the_pools_task_thread_paid_is_in_the_wait_not_before_it():
    # A submission's cost paid partly by the pool's task thread (pickling the tasks
    # before they leave): the caller's next event is delayed by its own part only, the
    # results by both. With the split known, the corrected timeline is exact; taken as
    # all the caller's, the wait's begin moves too early by the task thread's part.
    split = {**POOL, "pool_call": KindCost(900, 400, 0, "test")}
    true, recorded, workers = _run([Worker([(2_000, 2)] * 2), Worker([(2_000, 2)] * 2)],
                                   [[(0, 1), (1, 1)]], costs=split)
    assert _corrected(recorded, workers, split).events.time_ns.tolist() \
        == true.events.time_ns.tolist()
    whole = _corrected(recorded, workers, POOL).events
    wait = np.flatnonzero(true.events.kind == WB)[0]
    assert true.events.time_ns[wait] - whole.time_ns[wait] == 400
    assert whole.time_ns[-1] == true.events.time_ns[-1]
