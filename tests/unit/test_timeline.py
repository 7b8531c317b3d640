"""Chrome/Perfetto timeline export: valid JSON, every event present, tracks that nest."""

from __future__ import annotations

import io
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from rlscope.analysis.slices import nest
from rlscope.analysis.synthetic import process_trace
from rlscope.reporters.timeline import write_chrome_trace
from rlscope.trace import format as fmt
from rlscope.trace import gpu as G
from rlscope.trace.data import Trace

OB, OE = fmt.OPERATION_BEGIN, fmt.OPERATION_END
BB, BE = fmt.BACKEND_CALL_BEGIN, fmt.BACKEND_CALL_END
SB, SE = fmt.SIMULATOR_CALL_BEGIN, fmt.SIMULATOR_CALL_END


def check_nesting(slices: list[tuple[float, float]]) -> None:
    """On one track, any two slices are disjoint or one contains the other."""
    stack: list[float] = []
    for ts, end in sorted(slices, key=lambda s: (s[0], -s[1])):
        while stack and stack[-1] <= ts + 1e-9:
            stack.pop()
        assert not stack or end <= stack[-1] + 1e-9, (ts, end, stack[-1])
        stack.append(end)


def test_structure_all_events_and_no_overlap():
    p = process_trace(
        events=[(0, 0, fmt.PROCESS_START, ""), (10, 0, OB, "a"), (15, 0, OB, "inner"),
                (20, 0, SB, "sim"), (25, 0, BB, "torch.x"), (28, 0, BE, "torch.x"),
                (30, 0, SE, "sim"), (40, 0, OE, "inner"), (90, 0, OE, "a"),
                (95, 0, OB, "open"), (100, 0, fmt.PROCESS_END, ""),
                (20, 1, OB, "w"), (60, 1, OE, "w")],
        threads={0: 7, 1: 8},
        # Two API calls that cross (foreign clock): the second is clipped to nest.
        api=[(7, 12, 30, 1, "cudaLaunchKernel"), (7, 25, 35, 2, "cudaMemcpyAsync"),
             (8, 22, 24, 3, "cudaLaunchKernel")],
        gpu=[(G.KERNEL, 1, 40, 70, 1), (G.MEMCPY, 2, 45, 50, 2), (G.KERNEL, 1, 60, 65, 3)],
        progress=[(50, 10, 100)])
    buf = io.StringIO()
    n = write_chrome_trace(Trace(Path("."), {}, [p]), buf)
    doc = json.loads(buf.getvalue())
    ev = doc["traceEvents"]
    assert len(ev) == n
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
             if e["ph"] == "M" and e["name"] == "thread_name"}
    tracks = defaultdict(list)
    for e in ev:
        if e["ph"] == "X":
            assert e["dur"] >= 0
            tracks[names[(e["pid"], e["tid"])]].append(e)
    for evs in tracks.values():
        check_nesting([(e["ts"], e["ts"] + e["dur"]) for e in evs])
    by = {k: sorted(e["name"] for e in v) for k, v in tracks.items()}
    assert by["MainThread: operations"] == ["a", "inner", "open"]
    assert by["MainThread: native calls"] == ["sim", "torch.x"]
    assert by["thread-1: operations"] == ["w"]
    assert by["MainThread: CUDA API"] == ["cudaLaunchKernel", "cudaMemcpyAsync"]
    assert by["thread-1: CUDA API"] == ["cudaLaunchKernel"]
    assert by["GPU 0 stream 1"] == ["kernel", "kernel"] and by["GPU 0 stream 2"] == ["memcpy"]
    assert sum(e["ph"] == "C" and e["name"] == "timesteps" for e in ev) == 1
    # rlscope's GPU busy counter (0.1 s bins: one here) and one launch flow per GPU record.
    (busy,) = [e for e in ev if e["ph"] == "C" and e["name"].startswith("GPU busy")]
    assert busy["args"] == {"GPU 0": pytest.approx(100 * 30 / 1e8)}  # 30 ns (union) of 0.1 s
    assert sum(e["ph"] == "s" for e in ev) == sum(e["ph"] == "f" for e in ev) == 3
    ops = {e["name"]: e for e in tracks["MainThread: operations"]}
    assert ops["a"]["ts"] == 0.01 and ops["a"]["dur"] == 0.08  # µs, from the first event
    assert ops["open"]["dur"] == 0.005  # unclosed: runs to the process end


def test_nest_clips_crossing_slices():
    _order, s, e, clipped = nest(np.array([0, 5, 20]), np.array([10, 15, 30]))
    assert clipped == 1 and s.tolist() == [0, 5, 20] and e.tolist() == [10, 10, 30]
