"""Python stack samples as timeline tracks (rlscope.analysis.timeline.pysamples), on a
known synthetic set of samples: runs of equal frames merge per depth, a gap in the
samples closes every slice, slices nest, threads map to their tracks."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlscope.analysis.engine.synthetic import process_trace
from rlscope.analysis.timeline.pysamples import for_process, sample_tracks, shifted
from rlscope.trace import format as fmt
from rlscope.trace.pystacks_reader import PyStacks

MS = 1_000_000
FUNCS = [("a.py", 1, "main"), ("a.py", 5, "act"), ("a.py", 9, "step")]


def stacks(times_ms: list[int], stack_ids: list[int], tid: int = 1000) -> PyStacks:
    return PyStacks(Path("pystacks.1.rlstacks"), 1, 100.0, FUNCS, [(0, 1), (0, 2), (0,)],
                    np.array(times_ms, np.int64) * MS, np.full(len(times_ms), tid),
                    np.array(stack_ids, np.int32))


def slices(tr) -> list[tuple[str, int, int]]:  # type: ignore[no-untyped-def]
    return [(n.split(" ")[0], int(s // MS), int(e // MS))
            for n, s, e in zip(tr.names, tr.start_ns, tr.end_ns, strict=True)]


def test_runs_merge_per_depth_and_gaps_close_them() -> None:
    p = process_trace([(0, 0, fmt.PROCESS_START, "")], threads={0: 1000})
    # 100 Hz: each sample stands for 10 ms; none at 40 ms: the thread was not sampled.
    (tr,) = sample_tracks(p, stacks([0, 10, 20, 30, 50], [0, 0, 1, 2, 0]))
    assert tr.name.endswith(": Python samples")
    assert slices(tr) == [("main", 0, 40), ("act", 0, 20), ("step", 20, 30),
                          ("main", 50, 60), ("act", 50, 60)]
    order = np.lexsort((-tr.end_ns, tr.start_ns))
    assert (order == np.arange(len(tr))).all()  # by start, the enclosing slice first


def test_a_thread_without_events_gets_its_own_track_after_the_threads() -> None:
    p = process_trace([(0, 0, fmt.PROCESS_START, "")], threads={0: 1000})
    tracks = sample_tracks(p, stacks([0, 10], [0, 0], tid=4242))
    assert [t.name for t in tracks] == ["tid 4242: Python samples"]
    assert tracks[0].sort > 5


def test_samples_outside_the_process_or_window_are_left_out() -> None:
    p = process_trace([(10 * MS, 0, fmt.PROCESS_START, ""), (30 * MS, 0, fmt.PROCESS_START, "")],
                      threads={0: 1000})
    st = stacks([0, 10, 20, 30, 40], [0, 0, 0, 0, 0])
    assert (for_process(st, p).time_ns // MS).tolist() == [10, 20, 30]
    assert (for_process(st, p, (15 * MS, 25 * MS)).time_ns // MS).tolist() == [20]
    assert (shifted(st, 5 * MS).time_ns // MS).tolist() == [5, 15, 25, 35, 45]
