"""Timeline exports: Chrome JSON and Perfetto protobuf hold the same tracks and slices,
slices nest, flows join each launch to its GPU work, counters, the selection (window,
processes, kinds of track); the Perfetto file decodes with Perfetto's own schema and
replays as its format says (tests/perfetto_reader.py)."""

from __future__ import annotations

import io
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlscope.analysis.engine.synthetic import process_trace
from rlscope.analysis.timeline import select as sel
from rlscope.analysis.timeline.slices import CounterTrack, Track, nest, process_tracks
from rlscope.errors import UserError
from rlscope.reporters import pbrows, perfetto
from rlscope.reporters.chrome_trace import write_chrome_trace
from rlscope.trace import format as fmt
from rlscope.trace import gpu as G
from rlscope.trace.data import EnvEvents, Trace
from tests.perfetto_reader import perfetto_schema, read_perfetto

OB, OE = fmt.OPERATION_BEGIN, fmt.OPERATION_END
BB, BE = fmt.BACKEND_CALL_BEGIN, fmt.BACKEND_CALL_END
SB, SE = fmt.SIMULATOR_CALL_BEGIN, fmt.SIMULATOR_CALL_END
WB, WE = fmt.WAIT_CALL_BEGIN, fmt.WAIT_CALL_END


def check_nesting(slices: list[tuple[float, float]]) -> None:
    """On one track, any two slices are disjoint or one contains the other."""
    stack: list[float] = []
    for ts, end in sorted(slices, key=lambda s: (s[0], -s[1])):
        while stack and stack[-1] <= ts + 1e-9:
            stack.pop()
        assert not stack or end <= stack[-1] + 1e-9, (ts, end, stack[-1])
        stack.append(end)


def sample_trace() -> Trace:
    p = process_trace(
        events=[(0, 0, fmt.PROCESS_START, ""), (10, 0, OB, "a"), (15, 0, OB, "inner"),
                (20, 0, SB, "sim"), (25, 0, BB, "torch.x"), (28, 0, BE, "torch.x"),
                (30, 0, SE, "sim"), (40, 0, OE, "inner"), (41, 0, WB, "os.read"),
                (44, 0, WE, "os.read"), (90, 0, OE, "a"),
                (95, 0, OB, "open"), (100, 0, fmt.PROCESS_END, ""),
                (20, 1, OB, "w"), (60, 1, OE, "w")],
        threads={0: 7, 1: 8},
        # Two API calls that cross (foreign clock): the second is clipped to nest.
        api=[(7, 12, 30, 1, "cudaLaunchKernel"), (7, 25, 35, 2, "cudaMemcpyAsync"),
             (8, 22, 24, 3, "cudaLaunchKernel"), (8, 26, 27, 9, "cudaStreamSynchronize")],
        gpu=[(G.KERNEL, 1, 40, 70, 1), (G.MEMCPY, 2, 45, 50, 2), (G.KERNEL, 1, 60, 65, 3)],
        progress=[(50, 10, 100), (80, 20, 100)], argv=["python", "train.py"])
    return Trace(Path("."), {}, [p])


def json_tracks(doc: dict) -> dict[str, list[dict]]:
    ev = doc["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
             if e["ph"] == "M" and e["name"] == "thread_name"}
    tracks = defaultdict(list)
    for e in ev:
        if e["ph"] == "X":
            assert e["dur"] >= 0
            tracks[names[(e["pid"], e["tid"])]].append(e)
    return tracks


def test_json_structure_all_events_and_no_overlap():
    buf = io.StringIO()
    stats = write_chrome_trace(sel.plan_timeline(sample_trace()), buf)
    doc = json.loads(buf.getvalue())
    ev = doc["traceEvents"]
    tracks = json_tracks(doc)
    assert stats.slices == sum(len(v) for v in tracks.values())
    for evs in tracks.values():
        check_nesting([(e["ts"], e["ts"] + e["dur"]) for e in evs])
    by = {k: sorted(e["name"] for e in v) for k, v in tracks.items()}
    assert by["MainThread: operations"] == ["a", "inner", "open"]
    assert by["MainThread: native calls"] == ["os.read", "sim", "torch.x"]
    assert by["thread-1: operations"] == ["w"]
    assert by["MainThread: CUDA API"] == ["cudaLaunchKernel", "cudaMemcpyAsync"]
    assert by["thread-1: CUDA API"] == ["cudaLaunchKernel", "cudaStreamSynchronize"]
    assert by["GPU 0 stream 1"] == ["kernel", "kernel"] and by["GPU 0 stream 2"] == ["memcpy"]
    assert [e["args"] for e in ev if e["ph"] == "C" and e["name"] == "timesteps"] == [
        {"timesteps": 10}, {"timesteps": 20}]
    # rlscope's GPU busy counter (0.1 s bins: one here), beside the timesteps.
    (busy,) = [e for e in ev if e["ph"] == "C" and e["name"].startswith("GPU busy")]
    assert busy["args"] == {"%": pytest.approx(100 * 30 / 1e8)}  # 30 ns (union) of 0.1 s
    ops = {e["name"]: e for e in tracks["MainThread: operations"]}
    assert ops["a"]["ts"] == 0.01 and ops["a"]["dur"] == 0.08  # µs, from the first event
    assert ops["open"]["dur"] == 0.005  # unclosed: runs to the process end
    # Flows: each launch (correlation id in both tables) to its GPU work.
    starts = {e["id"]: e for e in ev if e["ph"] == "s"}
    ends = {e["id"]: e for e in ev if e["ph"] == "f"}
    assert stats.flows == len(starts) == len(ends) == 3 and starts.keys() == ends.keys()
    assert sorted(e["ts"] for e in starts.values()) == [0.012, 0.022, 0.025]
    assert sorted(e["ts"] for e in ends.values()) == [0.04, 0.045, 0.06]
    assert all(e["bp"] == "e" for e in ends.values())
    procs = [e["args"]["name"] for e in ev if e["name"] == "process_name"]
    assert procs == ["main: train.py"]


def test_perfetto_holds_what_json_holds(tmp_path: Path):
    trace = sample_trace()
    buf = io.StringIO()
    write_chrome_trace(sel.plan_timeline(trace), buf)
    want = {k: sorted((e["name"], round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000))
                      for e in v) for k, v in json_tracks(json.loads(buf.getvalue())).items()}
    path = tmp_path / "t.pftrace"
    with open(path, "wb") as f:
        stats = perfetto.write_perfetto(sel.plan_timeline(trace), f)
    d = read_perfetto(path)
    got = {d.tracks[u].name: sorted((s.name, s.start, s.end) for s in sl)
           for u, sl in d.slices.items()}
    assert got == want
    assert stats.slices == sum(len(v) for v in got.values())
    (proc,) = [t for t in d.tracks.values() if t.pid is not None]
    assert proc.pid == 100 and proc.process_name == "main: train.py"
    assert all(t.parent == proc.uuid for t in d.tracks.values() if t.pid is None)
    # Flows: launch → its kernel or copy.
    assert stats.flows == len(d.flows) == 3
    pairs = sorted((a.name, a.start, b.name, b.start) for a, b in d.flows.values()
                   if b is not None)
    assert pairs == [("cudaLaunchKernel", 12, "kernel", 40), ("cudaLaunchKernel", 22, "kernel", 60),
                     ("cudaMemcpyAsync", 25, "memcpy", 45)]
    names = {uuid: d.tracks[uuid].name for uuid in d.counters}
    (steps,) = [v for u, v in d.counters.items() if names[u] == "timesteps"]
    assert steps == [(50, 10), (80, 20)]
    (busy,) = [v for u, v in d.counters.items() if names[u].startswith("GPU busy")]
    assert busy == [(0, pytest.approx(100 * 30 / 1e8))]  # one 0.1 s bin from the first event


def test_pbrows_bytes_equal_protobufs_own_serialization():
    pb = perfetto_schema()
    rng = np.random.default_rng(1)
    n = 200
    ts = rng.integers(0, 1 << 40, n).astype(np.uint64)
    iid = rng.integers(1, 1 << 20, n).astype(np.uint64)
    has_name = rng.random(n) < 0.5
    flows = rng.integers(0, 1 << 63, n, dtype=np.int64).astype(np.uint64)
    has_flow = rng.random(n) < 0.3
    values = rng.integers(-(1 << 40), 1 << 40, n)
    doubles = rng.normal(size=n)
    is_int = rng.random(n) < 0.5  # counter_value and double_counter_value: a oneof
    rows = pbrows.encode([pbrows.Field(pbrows.tag(1, pbrows.LEN), inner=[
        pbrows.Field(pbrows.tag(8, pbrows.VARINT), values=ts),
        pbrows.Field(pbrows.field(10, 7)),
        pbrows.Field(pbrows.tag(11, pbrows.LEN), inner=[
            pbrows.Field(pbrows.field(9, 1)),
            pbrows.Field(pbrows.tag(10, pbrows.VARINT), values=iid, mask=has_name),
            pbrows.Field(pbrows.tag(30, pbrows.VARINT), values=values.view(np.uint64),
                         mask=is_int),
            pbrows.Field(pbrows.tag(44, pbrows.FIXED64), mask=~is_int,
                         raw=doubles.astype("<f8").view(np.uint8).reshape(-1, 8)),
            pbrows.Field(pbrows.tag(47, pbrows.FIXED64), mask=has_flow,
                         raw=flows.astype("<u8").view(np.uint8).reshape(-1, 8))])])], n)
    want = pb.Trace()
    for i in range(n):
        pk = want.packet.add()
        pk.timestamp = int(ts[i])
        pk.trusted_packet_sequence_id = 7
        pk.track_event.type = 1
        if has_name[i]:
            pk.track_event.name_iid = int(iid[i])
        if is_int[i]:
            pk.track_event.counter_value = int(values[i])
        else:
            pk.track_event.double_counter_value = float(doubles[i])
        if has_flow[i]:
            pk.track_event.flow_ids.append(int(flows[i]))
    assert rows.tobytes() == want.SerializeToString()


@st.composite
def nested_slices(draw):
    """Slices that nest (or touch, or have zero length), as intervals in any order."""
    out: list[tuple[int, int]] = []

    def fill(lo: int, hi: int, depth: int) -> None:
        t = lo
        while t <= hi and len(out) < 60 and draw(st.booleans()):
            s = draw(st.integers(t, hi))
            e = draw(st.integers(s, min(hi, s + 40)))
            out.append((s, e))
            if depth < 4 and e > s:
                fill(s, e, depth + 1)
            t = e
    fill(0, 500, 0)
    return out


@settings(max_examples=150, deadline=None)
@given(nested_slices(), st.sampled_from([1, 2, 3, 1 << 18]))
def test_perfetto_replays_any_nested_slices(tmp_path_factory, slices, batch):
    """Begin/end order at equal times, zero-length slices, batches cut between top-level
    slices: the decoded slices are the slices written."""
    perfetto_schema()
    s = np.array([a for a, _ in slices] or [0], np.int64)
    e = np.array([b for _, b in slices] or [0], np.int64)
    _order, s, e, clipped = nest(s, e)
    assert clipped == 0
    labels = [f"n{i % 5}" for i in range(len(s))]
    tr = Track("t", "track", 0, "x", s + 1000, e + 1000,
               np.array([i % 5 for i in range(len(s))], np.int32), labels[:5])
    path = tmp_path_factory.mktemp("p") / "t.pftrace"
    old = perfetto.BATCH
    perfetto.BATCH = batch
    try:
        with open(path, "wb") as f:
            f.write(perfetto.packet(pbrows.field(perfetto.PK_SEQUENCE_ID, 1), pbrows.message(
                perfetto.PK_TRACK_DESCRIPTOR, pbrows.field(perfetto.TD_UUID, 1),
                pbrows.message(perfetto.TD_PROCESS, pbrows.field(perfetto.PD_PID, 5)))))
            for chunk in perfetto._slice_track(tr, 2, 1, 2, 1000, perfetto.Stats()):
                f.write(chunk)
    finally:
        perfetto.BATCH = old
    d = read_perfetto(path)
    got = sorted((x.start, x.end, x.name) for x in d.slices[2])
    assert got == sorted(zip(s.tolist(), e.tolist(), tr.names, strict=True))


def test_window_cuts_slices_and_leads_counters():
    trace = sample_trace()
    p = trace.processes[0]
    plan = sel.plan_timeline(trace, window=sel.parse_window("0.016us:0.042us"))
    assert plan.window == (16, 42)
    tracks = {t.name: t for t in process_tracks(p, plan.kinds, plan.window)}
    ops = tracks["MainThread: operations"]
    assert sorted(zip(ops.names, ops.start_ns.tolist(), ops.end_ns.tolist(), strict=True)) == [
        ("a", 16, 42), ("inner", 16, 40)]
    # Flows only where both ends are kept: GPU work from 45 on is out.
    gpu = tracks["GPU 0 stream 1"]
    assert gpu.names == ["kernel"] and gpu.flow_in is not None
    api7 = tracks["MainThread: CUDA API"]
    assert api7.flow_out is not None and np.count_nonzero(api7.flow_out) == 1  # memcpy: out
    api8 = tracks["thread-1: CUDA API"]
    assert api8.flow_out is None  # its kernel (at 60) is outside the window
    # The counter's value at the window's start leads its samples inside.
    plan = sel.plan_timeline(trace, window=sel.parse_window("0.06us:"))
    (c,) = [c for c in _counters(plan)]
    assert c.time_ns.tolist() == [60, 80] and c.values.tolist() == [10, 20]


def _counters(plan: sel.TimelinePlan) -> list[CounterTrack]:
    from rlscope.analysis.timeline.slices import counter_tracks

    return [c for pp in plan.processes for c in counter_tracks(pp.trace, plan.kinds,
                                                               plan.window)]


def test_window_by_timesteps():
    trace = sample_trace()
    assert sel.plan_timeline(trace, window=sel.parse_window("10steps:20steps")).window == (50, 80)
    assert sel.plan_timeline(trace, window=sel.parse_window("0steps:10steps")).window == (0, 50)
    with pytest.raises(UserError, match="reached only 20 timesteps"):
        sel.plan_timeline(trace, window=sel.parse_window("10steps:500steps"))
    with pytest.raises(UserError, match="is empty"):
        sel.plan_timeline(trace, window=sel.parse_window("15steps:20steps"))


@pytest.mark.parametrize("text,err", [("10:20", "needs a unit"), ("10s", "START:END"),
                                      ("20s:10s", "after the start"), (":", "no bound"),
                                      ("1x:2s", "needs a unit")])
def test_window_syntax_errors(text, err):
    with pytest.raises(UserError, match=err):
        sel.parse_window(text)


def test_window_units():
    w = sel.parse_window("1.5s:2min")
    assert (w.start.value, w.end.value) == (1.5, 120.0) and w.start.unit == "s"
    w = sel.parse_window("250ms:")
    assert w.start.value == 0.25 and w.end is None
    assert sel.parse_window(":1e4steps").end == sel.Bound(10000.0, sel.STEPS)


def test_tracks_parsing():
    assert sel.parse_tracks(["operations,calls"]) == {"operations", "backend", "simulator",
                                                      "wait"}
    assert "backend" not in sel.parse_tracks(["all,-backend"])
    assert sel.parse_tracks(["ops", "cuda"]) == {"operations", "cuda-api"}
    with pytest.raises(UserError, match="unknown track 'bogus'"):
        sel.parse_tracks(["bogus"])
    with pytest.raises(UserError, match="leaves no track"):
        sel.parse_tracks(["gpu,-gpu"])


def test_only_chosen_kinds_of_track():
    trace = sample_trace()
    plan = sel.plan_timeline(trace, sel.parse_tracks(["operations,gpu"]))
    names = {t.name for t in process_tracks(trace.processes[0], plan.kinds)}
    assert names == {"MainThread: operations", "thread-1: operations", "GPU 0 stream 1",
                     "GPU 0 stream 2"}
    plan = sel.plan_timeline(trace, sel.parse_tracks(["wait"]))
    (calls,) = process_tracks(trace.processes[0], plan.kinds)
    assert calls.names == ["os.read"]
    assert _counters(plan) == []


def test_select_processes_by_pid_role_and_name():
    main = process_trace([(0, 0, fmt.PROCESS_START, ""), (5, 0, OB, "x"), (9, 0, OE, "x")],
                         pid=10, argv=["python", "train.py"])
    worker = process_trace([(1, 0, fmt.PROCESS_START, ""), (6, 0, OB, "y"), (8, 0, OE, "y")],
                           pid=11, ppid=10, argv=["python", "train.py"],
                           metadata={fmt.META_ROLE: fmt.ROLE_VECENV_WORKER,
                                     fmt.META_MP_TARGET: "pkg.subproc_vec_env:_worker"})
    trace = Trace(Path("."), {}, [main, worker])
    assert sel.select_processes(trace, []) == [0, 1]
    assert sel.select_processes(trace, ["11"]) == [1]
    assert sel.select_processes(trace, ["vector-env worker"]) == [1]
    assert sel.select_processes(trace, ["MAIN"]) == [0]
    assert sel.select_processes(trace, ["_worker"]) == [1]
    with pytest.raises(UserError, match="matches no process"):
        sel.select_processes(trace, ["nothing"])
    plan = sel.plan_timeline(trace, processes=["11"])
    assert [pp.trace.pid for pp in plan.processes] == [11]
    assert plan.origin_ns == 0  # the timeline's zero is the run's, whatever is selected
    assert plan.processes[0].name == "vector-env worker: subproc_vec_env._worker"


def test_env_steps_track():
    p = process_trace([(0, 0, fmt.PROCESS_START, ""), (10, 0, fmt.ENV_STEP_BEGIN, "Vec#1"),
                       (11, 0, fmt.ENV_STEP_BEGIN, "CartPole-v1"),
                       (15, 0, fmt.ENV_STEP_END, "CartPole-v1"),
                       (15, 0, fmt.ENV_STEP_BEGIN, "CartPole-v1"),
                       (18, 0, fmt.ENV_STEP_END, "CartPole-v1"),
                       (20, 0, fmt.ENV_STEP_END, "Vec#1"),
                       (21, 0, fmt.ENV_RESET_BEGIN, "CartPole-v1"),
                       (22, 0, fmt.ENV_RESET_END, "CartPole-v1"), (30, 0, fmt.PROCESS_END, "")])
    ev = p.events
    e = np.flatnonzero((ev.kind >= fmt.ENV_STEP_BEGIN) & (ev.kind <= fmt.ENV_RESET_END))
    index = np.array([-1, 0, -1, 1, -1, -1, 1, -1], np.int64)
    p.env = EnvEvents(ev.time_ns[e], ev.thread[e], ev.kind[e], ev.name[e], index)
    (tr,) = process_tracks(p, {"env"})
    assert tr.name == "MainThread: env steps"
    assert list(zip(tr.names, tr.start_ns.tolist(), tr.end_ns.tolist(), strict=True)) == [
        ("Vec#1 step", 10, 20), ("CartPole-v1 step [env 0]", 11, 15),
        ("CartPole-v1 step [env 1]", 15, 18), ("CartPole-v1 reset [env 1]", 21, 22)]
    counts = sel.plan_timeline(Trace(Path("."), {}, [p])).counts()
    assert counts["env"] == 4


def test_nest_clips_crossing_slices():
    _order, s, e, clipped = nest(np.array([0, 5, 20]), np.array([10, 15, 30]))
    assert clipped == 1 and s.tolist() == [0, 5, 20] and e.tolist() == [10, 10, 30]
