"""Operations inferred from a training loop's markers (rlscope.analysis.inferred), on
synthetic timelines: where backprop and inference begin and end, user annotations
winning, nesting, the streaming merge and the mode switch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlscope.analysis import api, inferred, inferred_events
from rlscope.analysis.engine.overlap import ProcessAnalyzer
from rlscope.analysis.engine.paths import NameTable, PathTable
from rlscope.analysis.engine.process import process_info
from rlscope.analysis.engine.scopes import operation_intervals
from rlscope.analysis.engine.synthetic import process_trace
from rlscope.analysis.frames import Analysis, ProcessMeta
from rlscope.analysis.inferred_events import Collector
from rlscope.trace import format as fmt
from rlscope.trace.data import Events, Trace

F, Z, S = "torch.nn.Module", "torch.optim.Optimizer.zero_grad", "torch.optim.Optimizer.step"
B = "torch.autograd.backward"


def rows(*items: tuple[str, str, int, int], thread: int = 0) -> list[tuple[int, int, int, str]]:
    """(what, name, start, end): what is "op" (a recorded operation), "mark" or "call"
    (a backend call)."""
    kinds = {"op": fmt.OPERATION_BEGIN, "mark": fmt.MARK_CALL_BEGIN,
             "call": fmt.BACKEND_CALL_BEGIN}
    out = []
    for what, name, s, e in items:
        k = kinds[what]
        out += [(s, thread, k, name), (e, thread, k + 1, name)]
    return sorted(out, key=lambda r: r[0])


def sim(s: int, e: int) -> tuple[str, str, int, int]:
    return ("op", "simulation", s, e)


def fwd(s: int, e: int) -> tuple[str, str, int, int]:
    return ("mark", F, s, e)


def update(t: int) -> list[tuple[str, str, int, int]]:
    """A minibatch step from t: forward, zero_grad, backward, step (ends at t + 40)."""
    return [fwd(t, t + 10), ("mark", Z, t + 12, t + 14), ("call", B, t + 16, t + 30),
            ("mark", S, t + 32, t + 40)]


def ops(events: list[tuple[int, int, int, str]], mode: str = "auto"
        ) -> list[tuple[str, int, int, int]]:
    p = inferred.apply(process_trace(events), mode)
    iv = operation_intervals(p.events)
    return sorted((p.strings[n], int(s), int(e), int(d)) for n, s, e, d in
                  zip(iv.name, iv.start_ns, iv.end_ns, iv.depth, strict=True))


def inferred_only(events: list[tuple[int, int, int, str]], mode: str = "auto"
                  ) -> list[tuple[str, int, int]]:
    return [(n, s, e) for n, s, e, _ in ops(events, mode) if n != "simulation"]


def test_dqn_loop():
    ev = rows(sim(50, 60), fwd(100, 120), sim(130, 150),  # reset, act, step
              *update(200), fwd(250, 260), fwd(262, 270),  # update (2 fwds), act
              sim(300, 320), fwd(400, 420))  # step, act (no env step follows)
    assert inferred_only(ev) == [("backprop", 200, 240), ("inference", 100, 130),
                                 ("inference", 250, 300), ("inference", 400, 420)]


def test_ppo_update_epochs_are_one_backprop():
    ev = rows(sim(0, 10), fwd(20, 30),  # bootstrap value, then minibatch steps
              *update(50), *update(100), *update(150), fwd(300, 310), sim(350, 360))
    assert inferred_only(ev) == [("backprop", 20, 190), ("inference", 300, 350)]


def test_zero_grad_after_the_step_and_before_the_forward():
    ev = rows(sim(0, 10), ("mark", Z, 20, 22), fwd(30, 40), ("call", B, 50, 60),
              ("mark", S, 70, 80), ("mark", Z, 85, 90), fwd(100, 110), sim(120, 130))
    assert inferred_only(ev) == [("backprop", 20, 90), ("inference", 100, 120)]


def test_no_inference_before_the_first_env_step():
    ev = rows(fwd(0, 5), sim(10, 20), fwd(30, 40), sim(50, 60))
    assert inferred_only(ev) == [("inference", 30, 50)]


def test_a_forward_inside_an_env_step_is_simulation():
    ev = rows(sim(0, 50), fwd(10, 20), sim(60, 70))
    assert inferred_only(ev) == []


def test_recorded_operations_win():
    base = [sim(0, 10), fwd(20, 30), sim(40, 50), *update(100), sim(200, 210)]
    # The user annotated backprop (more widely): no inferred backprop, inference still.
    ev = rows(*base, ("op", "backprop", 90, 150))
    assert ops(ev) == [("backprop", 90, 150, 0), ("inference", 20, 40, 0),
                       ("simulation", 0, 10, 0), ("simulation", 40, 50, 0),
                       ("simulation", 200, 210, 0)]
    # ... and inference: nothing inferred at all.
    ev = rows(*base, ("op", "backprop", 90, 150), ("op", "inference", 15, 35))
    assert inferred_only(ev) == [("backprop", 90, 150), ("inference", 15, 35)]
    # An operation of another name across the update's boundary: the update is left out.
    ev = rows(*base, ("op", "update", 110, 145))
    assert inferred_only(ev) == [("inference", 20, 40), ("update", 110, 145)]


def test_the_users_own_breakdown_is_left_alone():
    base = [sim(0, 10), fwd(20, 30), sim(40, 50), *update(100), sim(200, 210)]
    # "learn" around the update (no env step inside): no backprop inferred in it.
    assert inferred_only(rows(*base, ("op", "learn", 95, 145))) == [
        ("inference", 20, 40), ("learn", 95, 145)]
    # "loss" inside the update: the update is still backprop, "loss" nests inside it.
    assert ops(rows(*base, ("op", "loss", 101, 109)))[:2] == [
        ("backprop", 100, 140, 0), ("inference", 20, 40, 0)]
    assert ("loss", 101, 109, 1) in ops(rows(*base, ("op", "loss", 101, 109)))


def test_inferred_operations_nest_inside_other_recorded_ones():
    ev = rows(sim(0, 5), ("op", "evaluate", 6, 100), fwd(10, 20), sim(30, 40),
              fwd(50, 60), sim(70, 80))
    assert ops(ev) == [("evaluate", 6, 100, 0), ("inference", 10, 30, 1),
                       ("inference", 50, 70, 1), ("simulation", 0, 5, 0),
                       ("simulation", 30, 40, 1), ("simulation", 70, 80, 1)]


def test_without_env_steps_updates_split_at_each_optimizer_step():
    """No env step seen: an update begins at its first update marker (zero_grad here),
    never at a forward before it (the gap before may hold env steps rlscope missed); each
    forward outside an update is an inference of its own; the process gets a note."""
    ev = rows(*update(0), *update(100), fwd(200, 210), fwd(220, 230))
    assert inferred_only(ev) == [("backprop", 12, 40), ("backprop", 112, 140),
                                 ("inference", 0, 10), ("inference", 100, 110),
                                 ("inference", 200, 210), ("inference", 220, 230)]
    p = inferred.apply(process_trace(ev))
    assert len(p.warnings) == 1 and "no env step" in p.warnings[0]
    assert 'rlscope.operation("simulation")' in p.warnings[0]


def test_without_env_steps_a_rollout_is_never_in_backprop():
    """Forwards between unseen env steps, then an update: backprop covers the update from
    its zero_grad only."""
    rollout = [fwd(t, t + 5) for t in range(0, 100, 20)]
    ev = rows(*rollout, fwd(100, 110), ("mark", Z, 112, 114), ("call", B, 116, 130),
              ("mark", S, 132, 140))
    got = inferred_only(ev)
    assert [g for g in got if g[0] == "backprop"] == [("backprop", 112, 140)]
    assert sum(g[0] == "inference" for g in got) == 6


def test_with_env_steps_no_note():
    ev = rows(sim(0, 10), fwd(12, 20), sim(25, 30), *update(40))
    assert inferred.apply(process_trace(ev)).warnings == []


def test_threads_are_inferred_separately():
    ev = rows(sim(0, 10), *update(20), thread=0) + rows(sim(1, 2), fwd(5, 15), sim(30, 40),
                                                        thread=1)
    p = inferred.apply(process_trace(sorted(ev)))
    iv = operation_intervals(p.events)
    got = sorted((int(t), p.strings[n], int(s), int(e)) for t, n, s, e in
                 zip(iv.thread, iv.name, iv.start_ns, iv.end_ns, strict=True)
                 if p.strings[n] != "simulation")
    assert got == [(0, "backprop", 20, 60), (1, "inference", 5, 30)]


def test_modes():
    ev = rows(sim(0, 10), ("op", "inference", 15, 35), fwd(20, 30), sim(40, 50))
    assert inferred_only(ev, "auto") == [("inference", 15, 35)]
    assert inferred_only(ev, "only") == [("inference", 20, 40)]  # the recorded one dropped
    assert inferred_only(ev, "off") == [("inference", 15, 35)]
    with pytest.raises(ValueError, match="unknown inference mode"):
        inferred.apply(process_trace(ev), "sometimes")


def test_no_markers_no_change():
    p = process_trace(rows(sim(0, 10), ("op", "inference", 15, 35)))
    assert inferred.apply(p) is p


def test_streamed_batches_match_the_whole_process(tmp_path: Path):
    """The stream merges inferred events into each batch by thread and time: any batch
    size gives the result of the whole process at once."""
    items = [sim(0, 10)]
    for k in range(20):  # act, then update, then step: the act counts as the update's
        t = 100 + 200 * k
        items += [fwd(t, t + 10), *update(t + 20), sim(t + 100, t + 110)]
    ev = sorted(rows(*items, thread=0) + rows(*[fwd(t + 3, t + 5) for t in
                                               range(0, 4000, 50)], thread=1))
    cols = ["operation", "calls", "wall_s"]
    whole = api.analyze(Trace(tmp_path, {}, [process_trace(ev)])).operations()[cols]
    whole = whole.sort_values("operation", ignore_index=True)
    for batch in (3, 17, 64):
        p = process_trace(ev)
        c = Collector()
        c.add(p.events, dict(enumerate(p.strings)))
        plan = inferred.infer_ops(c, p.strings)
        assert plan is not None
        p.strings = plan.strings
        paths, phases = PathTable(), NameTable()
        a = ProcessAnalyzer(p, process_info(p.events, p.strings, phases), paths, phases)
        for lo in range(0, len(p.events), batch):
            a.feed(plan.batch(p.events.take(np.arange(lo, min(lo + batch,
                                                              len(p.events))))))
        a.feed(plan.rest())
        got = Analysis("", {}, [a.finish()], [ProcessMeta(
            p.pid, 1, "x", "synthetic", True, len(p.events), {}, p.progress)], paths,
            phases, []).operations()[cols].sort_values("operation", ignore_index=True)
        assert got.equals(whole), (batch, got, whole)
    ops_ = whole.set_index("operation")
    assert ops_.loc["backprop", "calls"] == 20 and ops_.loc["inference", "calls"] == 80
    assert ops_.loc["backprop", "wall_s"] == pytest.approx(20 * 60e-9)


def test_plan_batches_take_each_threads_events_up_to_its_last_time():
    inf = inferred.Inferred(np.array([0, 0, 1]), np.array([10, 30, 5]),
                            np.array([20, 40, 50]), np.array([0, 1, 0]))
    plan = inferred.InferredOps(inf, [""])
    assert plan.strings[1:] == list(fmt.INFERRED_OPS)
    b1 = Events(np.array([25, 6]), np.array([0, 1], np.uint32), np.zeros(2, np.uint8),
                np.zeros(2, np.uint32))
    out = plan.batch(b1)
    taken = sorted(zip(out.thread.tolist(), out.time_ns.tolist(), strict=True))
    assert taken == [(0, 10), (0, 20), (0, 25), (1, 5), (1, 6)]
    rest = plan.rest()
    assert sorted(zip(rest.thread.tolist(), rest.time_ns.tolist(), strict=True)) == [
        (0, 30), (0, 40), (1, 50)]


@pytest.mark.parametrize("mark_chunk", [None, 0, 3, 7])
def test_a_bounded_collector_keeps_what_an_unbounded_one_does(
        monkeypatch: pytest.MonkeyPatch, mark_chunk: int | None):
    """With a file to read back, a collector keeps few operations while no marker is seen,
    and yields exactly the same events once one is (the dropped chunks read again)."""
    from types import SimpleNamespace

    p = process_trace(rows(*[sim(100 * i, 100 * i + 50) for i in range(80)],
                           *update(100 * 80 + 10), ("call", B, 9000, 9010)))
    is_mark = (p.events.kind == fmt.MARK_CALL_BEGIN) | (p.events.kind == fmt.MARK_CALL_END)
    rest = p.events.take(np.flatnonzero(~is_mark))
    per = len(rest) // 8 + 1
    chunks = [rest.take(np.arange(c * per, min((c + 1) * per, len(rest)))) for c in range(8)]
    if mark_chunk is not None:  # every marker in that chunk
        chunks[mark_chunk] = Events.concat([chunks[mark_chunk],
                                            p.events.take(np.flatnonzero(is_mark))])
    strings = dict(enumerate(p.strings))
    reads: list[int] = []

    def iter_chunks(path: Path):  # type: ignore[no-untyped-def]
        reads.append(1)
        for c in chunks:
            yield SimpleNamespace(events=c)

    monkeypatch.setattr(inferred_events, "iter_chunks", iter_chunks)
    whole, bounded = Collector(), Collector(Path("f"), limit=10)
    for i, c in enumerate(chunks):
        for col in (whole, bounded):
            col.add(c, strings if i == 0 else {})
    a, b = whole.events(), bounded.events()
    if mark_chunk is None:
        assert whole.marks == bounded.marks == 0 and len(b) <= 10 + per and not reads
    else:
        assert bounded.marks == whole.marks > 0
        assert all(np.array_equal(getattr(a, f), getattr(b, f))
                   for f in ("time_ns", "thread", "kind", "name"))
        assert len(reads) == (0 if mark_chunk == 0 else 1)
