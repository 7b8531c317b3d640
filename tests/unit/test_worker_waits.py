"""The main process's waits on vector-env workers that rlscope slowed: a SubprocVecEnv-like
run simulated event by event, true and instrumented, then corrected; the holder's
corrected timeline must be its true one, exactly."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlscope.analysis import analyze
from rlscope.analysis.engine.synthetic import process_trace
from rlscope.analysis.overhead.correction import correct_trace
from rlscope.trace import format as fmt
from rlscope.trace.data import EnvEvents, ProcessTrace, Trace
from tests.unit.test_correction import COSTS, _split, inject

OB, OE = fmt.OPERATION_BEGIN, fmt.OPERATION_END
SB, SE = fmt.SIMULATOR_CALL_BEGIN, fmt.SIMULATOR_CALL_END
WB, WE = fmt.WAIT_CALL_BEGIN, fmt.WAIT_CALL_END
EB, EE = fmt.ENV_STEP_BEGIN, fmt.ENV_STEP_END
START, END = fmt.PROCESS_START, fmt.PROCESS_END
VEC, WAIT = "SubprocVecEnv#1", "SubprocVecEnv.step_wait"
HOLDER = 100
SEND, TRANSFER = 1500, 100  # the holder sends at SEND; a message takes TRANSFER


def _with_env(p: ProcessTrace, index: list[int]) -> ProcessTrace:
    """The env table the reader builds from a process's ENV events (``index``: per begin)."""
    e = np.isin(p.events.kind, (EB, EE, fmt.ENV_RESET_BEGIN, fmt.ENV_RESET_END))
    idx = np.full(int(e.sum()), -1)
    idx[p.events.kind[e] == EB] = index
    p.env = EnvEvents(p.events.time_ns[e], p.events.thread[e], p.events.kind[e],
                      p.events.name[e], idx)
    return p


def _stamp(events: list[tuple[int, int]], wake: int, woken_at: int
           ) -> tuple[list[tuple[int, int]], list[int]]:
    """A worker's events as recording stamps them: each event's costs delay what follows,
    except that its wait for the command ends when the command arrives (true time
    ``wake``, ``woken_at`` recorded) whatever it paid before. Returns the stamps and, per
    event, when the worker moved on after it (its costs paid)."""
    out, after, delay, shift, woke = [], [], 0.0, 0, False
    for t, k in events:
        if t >= wake and not woke:
            shift, delay, woke = woken_at - wake, 0.0, True
        pre, post = _split(k)
        delay += pre
        out.append((t + shift + int(delay), k))
        delay += post
        after.append(t + shift + int(delay))
    return out, after


def _worker(pid: int, index: int, step_ns: int, calls: int) -> list[tuple[int, int]]:
    """True timeline of a worker: waits for the command, steps its env (``calls``
    simulator calls inside), replies at the step's end, waits again."""
    wake = SEND + TRANSFER
    ev = [(0, START), (100, WB), (wake, WE), (wake + 50, EB), (wake + 60, OB)]
    t, gap = wake + 100, step_ns // (2 * calls + 1)
    for _ in range(calls):
        ev += [(t, SB), (t + gap, SE)]
        t += 2 * gap
    end = wake + 100 + step_ns
    ev += [(end - 20, OE), (end, EE), (end + 10, WB), (90_000, WE), (100_000, END)]
    return ev


_NAMES = {WB: "Connection.recv", WE: "Connection.recv", SB: "step", SE: "step",
          OB: "simulation", OE: "simulation", EB: "CartPole-v1", EE: "CartPole-v1",
          START: "", END: ""}


def _proc(pid: int, events: list[tuple[int, int]], meta: dict[str, Any], index: list[int],
          names: dict[int, str]) -> ProcessTrace:
    rows = [(t, 0, k, names[k]) for t, k in events]
    return _with_env(process_trace(rows, pid=pid, metadata=meta), index)


def _run(workers: list[tuple[int, int]]
         ) -> tuple[list[ProcessTrace], list[ProcessTrace], int]:
    """The holder and its workers (step length, simulator calls each): the true run, the
    recorded one, and how much later the recorded holder's wait ended because of the
    workers' book-keeping (besides its own)."""
    true_w = [_worker(200 + i, i, step_ns, calls) for i, (step_ns, calls) in enumerate(workers)]
    head = [(0, START), (1000, OB), (1100, EB), (SEND, WB)]
    # Recorded, the holder sends after its own costs so far (not the wait's own).
    sent = SEND + int(sum(sum(_split(k)) for _, k in head[:-1]))
    replies, recorded_w = [], []
    for ev in true_w:
        stamps, after = _stamp(ev, SEND + TRANSFER, sent + TRANSFER)
        replies.append(after[next(i for i, (_, k) in enumerate(ev) if k == EE)])
        recorded_w.append(stamps)
    answer = max(t for ev in true_w for t, k in ev if k == EE) + TRANSFER
    # Recorded, the wait ends when the last reply arrives (then its end's own pre-stamp
    # cost): what the holder paid after the send (the wait's begin) overlapped the
    # workers' steps. ``inject`` below delays the end by that too: ``extra`` takes it out.
    extra = max(replies) + TRANSFER - (answer + sent - SEND) - sum(_split(WB))

    def holder(late: int) -> list[tuple[int, int]]:
        return [*head, (answer + late, WE), (answer + late + 100, EE),
                (answer + late + 200, OE), (answer + late + 300, END)]

    names = {START: "", END: "", OB: "simulation", OE: "simulation", EB: VEC, EE: VEC,
             WB: WAIT, WE: WAIT}
    holder_meta = {fmt.META_VECENVS: [{"name": VEC, "class": "SubprocVecEnv",
                                       "num_envs": len(workers), "workers": True}]}
    serve = {fmt.META_VECENV: {"pid": HOLDER, "name": VEC}}

    def procs(h: list[tuple[int, int]], ws: list[list[tuple[int, int]]]
              ) -> list[ProcessTrace]:
        return [_proc(HOLDER, h, holder_meta, [fmt.VECTOR_ENV_INDEX], names),
                *(_proc(200 + i, w, serve, [i], _NAMES) for i, w in enumerate(ws))]

    recorded_h = [(t, k) for t, _, k, _ in inject([(t, 0, k, "") for t, k in holder(extra)])]
    return procs(holder(0), true_w), procs(recorded_h, recorded_w), extra


def _wait(p: ProcessTrace) -> int:
    ev = p.events
    return int(ev.time_ns[ev.kind == WE][0] - ev.time_ns[ev.kind == WB][0])


def test_wait_on_slowed_workers_is_corrected_to_its_true_length():
    # Worker 1's step is the longer one, worker 0 makes many more wrapped calls: recorded,
    # worker 0 answers last.
    true, measured, extra = _run([(9_000, 40), (10_000, 1)])
    assert extra > 10_000  # its 40 calls' costs, less the 1 us its step is shorter
    corrected, summary = correct_trace(Trace(None, {}, measured), COSTS)  # type: ignore
    assert _wait(corrected.processes[0]) == _wait(true[0])
    assert corrected.processes[0].events.time_ns.tolist() == true[0].events.time_ns.tolist()
    root = summary.root()
    assert root is not None and root.waits_ns == extra
    # Off the CPU: the tree's CPU overhead is the events' costs, not the shorter wait.
    alone = [correct_trace(Trace(None, {}, [p]), COSTS)[1].tree_overhead_s()  # type: ignore
             for p in measured]
    assert abs(summary.tree_overhead_s() - sum(alone)) < 1e-9


def test_the_worker_that_answers_last_without_recording_sets_the_wait():
    # Recorded, worker 0 (many calls) answers last; without recording worker 1 would
    # have: the wait shrinks only to worker 1's answer.
    true, measured, _ = _run([(9_900, 60), (10_000, 1)])
    corrected, _ = correct_trace(Trace(None, {}, measured), COSTS)  # type: ignore
    assert _wait(corrected.processes[0]) == _wait(true[0])


def test_without_the_workers_traces_only_the_holders_own_costs_go():
    _, measured, extra = _run([(9_000, 3), (10_000, 1)])
    alone, summary = correct_trace(Trace(None, {}, measured[:1]), COSTS)  # type: ignore
    with_workers, _ = correct_trace(Trace(None, {}, measured), COSTS)  # type: ignore
    assert _wait(alone.processes[0]) - _wait(with_workers.processes[0]) == extra
    root = summary.root()
    assert root is not None and root.waits_ns == 0


def test_breakdown_of_the_holder_is_its_true_one():
    true, measured, _ = _run([(9_000, 40), (10_000, 1)])
    corrected, _ = correct_trace(Trace(None, {}, measured), COSTS)  # type: ignore

    def holder_rows(procs: list[ProcessTrace]) -> dict[tuple, int]:
        df = analyze(Trace(None, {}, procs[:1])).breakdown(  # type: ignore[arg-type]
            by=("operation", "category"))
        return {tuple(r[:-1]): round(r[-1] * 1e9) for r in df.itertuples(index=False)
                if round(r[-1] * 1e9)}

    assert holder_rows(corrected.processes) == holder_rows(true)
