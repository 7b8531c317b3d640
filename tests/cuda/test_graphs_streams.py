"""CUDA graphs, several streams and several devices through the fake libcupti: every
kernel/copy correlated to its launching call (a graph's kernels to the graph launch),
per stream and device in the tables, the analysis and the timeline's launch flows."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from conftest import app_json, run_traced
from fake_build import Fake

from rlscope.analysis import analyze
from rlscope.analysis.timeline import select as sel
from rlscope.reporters.chrome_trace import write_chrome_trace
from rlscope.trace import gpu as g
from rlscope.trace.reader import read_trace

pytestmark = pytest.mark.usefixtures("cuda_lib")


@pytest.fixture(scope="module")
def graph_run(fake: Fake, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("graph")
    (info,) = app_json(run_traced([str(fake.app), "graph"], out))
    return read_trace(out), info


def test_graph_kernels_carry_the_graph_launch(graph_run):
    trace, info = graph_run
    (p,) = trace.processes
    api, gp = p.api_calls, p.gpu
    names = {int(c): api.strings[int(n)] for c, n in zip(api.correlation_id, api.name,
                                                         strict=True)}
    assert names[info["graph"]] == "cudaGraphLaunch"
    graph = gp.correlation_id == info["graph"]
    assert sorted(gp.strings[int(n)] for n in gp.name[graph]) == [
        "graph_node_a", "graph_node_b", "graph_node_c"]
    assert set(gp.stream[graph].tolist()) == {7, 8} and set(gp.device[graph].tolist()) == {0}
    # Every GPU record has exactly one launching call, on the thread that made it.
    tid_of = dict(zip(api.correlation_id.tolist(), api.tid.tolist(), strict=True))
    assert set(gp.correlation_id.tolist()) <= set(tid_of)
    assert tid_of[info["graph"]] == info["tid"]
    assert {tid_of[info[k]] for k in ("k1", "k2", "copy")} == {info["other_tid"]}


def test_streams_and_devices(graph_run):
    trace, info = graph_run
    (p,) = trace.processes
    gp = p.gpu
    pairs = {(int(d), int(s)) for d, s in zip(gp.device, gp.stream, strict=True)}
    assert pairs == {(0, 7), (0, 8), (1, 3), (1, 4)}
    assert gp.kind.tolist().count(g.MEMCPY) == 1
    copy = gp.correlation_id == info["copy"]
    assert gp.device[copy].tolist() == [1] and gp.copy_kind[copy].tolist() == [2]  # DtoH
    a = analyze(trace)
    per_stream = a.gpu().groupby("stream")["count"].sum().to_dict()
    assert per_stream == {3: 1, 4: 2, 7: 2, 8: 1}
    # Concurrent kernels on two streams each count their own time ...
    assert a.gpu()["seconds"].sum() == pytest.approx(
        float((gp.end_ns - gp.start_ns).sum()) / 1e9)
    # ... while the process-wide GPU time counts each instant once (union over streams).
    busy = a.processes()[["gpu_only_s", "cpu_gpu_s"]].to_numpy().sum()
    assert busy == pytest.approx(6000e-9, abs=1e-9)  # t0+1000 .. t0+7000, no gap


def test_timeline_flows_per_kernel(graph_run):
    trace, _ = graph_run
    buf = io.StringIO()
    write_chrome_trace(sel.plan_timeline(trace), buf)
    events = json.loads(buf.getvalue())["traceEvents"]
    tids = {e["tid"]: e["args"]["name"] for e in events
            if e.get("ph") == "M" and e["name"] == "thread_name"}
    starts = {e["id"]: e for e in events if e.get("ph") == "s"}
    ends = {e["id"]: e for e in events if e.get("ph") == "f"}
    # One arrow per launch, to the first GPU work it launched (a graph launch: to the
    # graph's first kernel; docs/rls-analyze.md#timeline).
    launches = {int(c) for p in trace.processes for c in p.api_calls.correlation_id if c} \
        & {int(c) for p in trace.processes for c in p.gpu.correlation_id}
    assert len(starts) == len(ends) == len(launches) and set(starts) == set(ends)
    from_api = [tids[e["tid"]] for e in starts.values()]
    assert all(name.endswith("CUDA API") for name in from_api)
    to_gpu = {tids[e["tid"]] for e in ends.values()}
    assert {n.split(" stream")[0] for n in to_gpu} == {"GPU 0", "GPU 1"}
    # A flow starts inside its launching call's slice and ends at the GPU slice's start.
    slices = [e for e in events if e.get("ph") == "X"]
    for fid, s in starts.items():
        assert any(x["tid"] == s["tid"] and x["ts"] <= s["ts"] <= x["ts"] + x["dur"]
                   for x in slices)
        f = ends[fid]
        assert any(x["tid"] == f["tid"] and x["ts"] == f["ts"] for x in slices)
    assert np.all([e["bp"] == "e" for e in ends.values()])

