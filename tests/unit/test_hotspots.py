"""Python stack samples: the file's reader, the join to the operation open on the sampled
thread (a real in-process recording, samples taken at known places), the per-operation
rankings, and the flame documents."""

from __future__ import annotations

import json
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import rlscope
from rlscope.analysis import hotspots
from rlscope.analysis.engine import categories as C
from rlscope.analysis.pipeline.run import EVENTS, RunOptions, open_run
from rlscope.inprocess.pysampler import PySampler
from rlscope.reporters import flame
from rlscope.reporters import hotspots as hotspots_report
from rlscope.trace.pystacks_reader import read_stacks, sample_times, stack_files


def test_reader_keeps_whole_lines_and_drops_a_torn_tail(tmp_path: Path):
    p = tmp_path / "pystacks.42.rlstacks"
    p.write_text("rlstacks\t1\t42\t100\n"
                 "f\t0\t/a.py\t3\touter\n"
                 "f\t1\t/a.py\t9\tinner\n"
                 "k\t0\t1 0\n"
                 "s\t1000\t7\t0\n"
                 "s\t2000\t7\t0\n"
                 "s\t30")  # torn: the process was killed while writing it
    st = read_stacks(p)
    assert (st.pid, st.hz) == (42, 100.0)
    assert st.functions == [("/a.py", 3, "outer"), ("/a.py", 9, "inner")]
    assert st.stacks == [(0, 1)]  # outermost first
    assert st.time_ns.tolist() == [1000, 2000] and st.tid.tolist() == [7, 7]
    assert len(st.warnings) == 1 and "torn" in st.warnings[0]
    assert stack_files(tmp_path) == [p]
    # The times alone (the overhead correction's), by a scan of the bytes: the same.
    pid, times = sample_times(p)
    assert pid == 42 and times.tolist() == [1000, 2000]
    p.write_text("rlstacks\t1\t43\t50\ns\t5\t-3\t0\ns\tx\t1\t0\ns\t9\t8\t0\n")
    assert sample_times(p)[0] == 43 and sample_times(p)[1].tolist() == [5, 9]


def _hot_inference(s: PySampler) -> None:
    s.sample(-1)  # this thread's stack: ... > _hot_inference > PySampler.sample


def _step_simulation(s: PySampler) -> None:
    s.sample(-1)


def test_samples_join_the_operation_open_on_their_thread(tmp_path: Path, recorder: str):
    out = tmp_path / "trace"
    rlscope.start(out, recorder=recorder)
    try:
        s = PySampler(str(out / "pystacks.1.rlstacks"), 100)
        for _ in range(3):
            with rlscope.operation("inference"):
                _hot_inference(s)
            with rlscope.operation("simulation"):
                _step_simulation(s)
        s.sample(-1)  # outside every operation

        def worker() -> None:  # another thread's operation, sampled from this one
            with rlscope.operation("background"):
                done.wait(5)

        done = threading.Event()
        th = threading.Thread(target=worker)
        th.start()
        while not any(f.f_code.co_name == "worker" for f in _frames_of(th)):
            done.wait(0.001)
        s.sample(threading.get_ident())  # only the worker, blocked in "background"
        done.set()
        th.join()
        s.flush()
    finally:
        rlscope.stop()
    run = open_run(out, RunOptions(correct=False), (EVENTS,))
    assert run.trace is not None
    samples = hotspots.join(run.trace, [read_stacks(f) for f in stack_files(out)])
    ops = {o.operation: o for o in hotspots.per_operation(samples, top=100)}
    assert set(ops) == {"inference", "simulation", "background"}
    assert ops["inference"].samples == 3 and ops["simulation"].samples == 3
    inf_total = {r.name for r in ops["inference"].by_total}
    sim_total = {r.name for r in ops["simulation"].by_total}
    assert "_hot_inference" in inf_total and "_hot_inference" not in sim_total
    assert "_step_simulation" in sim_total and "_step_simulation" not in inf_total
    assert ops["inference"].by_self[0].name == "PySampler.sample"
    assert ops["inference"].by_self[0].share == 1.0
    row = next(r for r in ops["inference"].by_total if r.name == "_hot_inference")
    assert row.file == __file__ and row.line == _hot_inference.__code__.co_firstlineno
    assert any(r.name.endswith(".worker") for r in ops["background"].by_total)
    assert (samples.operation == -1).sum() == 1  # the sample outside every operation
    data = hotspots_report.to_dict(samples, hotspots.per_operation(samples))
    assert json.dumps(data)  # JSON-able
    assert "_hot_inference" in hotspots_report.render_text(hotspots.per_operation(samples))


def _frames_of(th: threading.Thread) -> list:
    import sys

    f = sys._current_frames().get(th.ident or -1)
    out = []
    while f is not None:
        out.append(f)
        f = f.f_back
    return out


def _samples() -> hotspots.Samples:
    import numpy as np

    functions = [("/m.py", 1, "main"), ("/m.py", 5, "policy"), ("/m.py", 9, "helper")]
    stacks = [(0, 1, 2), (0, 1), (0,)]
    # operation 0: 6 Python samples (4 in helper, 2 in policy), 2 in a backend call
    stack = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2])
    cat = np.array([C.PYTHON] * 6 + [C.BACKEND] * 2 + [C.PYTHON])
    op = np.array([0] * 8 + [-1])
    n = len(stack)
    return hotspots.Samples(functions, stacks, np.ones(n, np.int64), np.ones(n, np.int64), op,
                            np.zeros(n, np.int64), cat, stack, ["train > inference"], [""])


def test_rankings_are_shares_of_the_operations_python_samples():
    (o,) = hotspots.per_operation(_samples())
    assert (o.operation, o.samples, o.python_samples) == ("train > inference", 8, 6)
    assert o.by_category == {"Python": 6, "Backend": 2}
    assert o.by_process == {1: 8} and o.by_phase == {"": 8}
    assert [(r.name, r.samples) for r in o.by_self] == [("helper", 4), ("policy", 2)]
    # ties: the innermost first
    assert [(r.name, r.share) for r in o.by_total][:2] == [("policy", 1.0), ("main", 1.0)]
    assert o.by_total[2].share == 4 / 6


def test_flame_documents():
    s = _samples()
    stacks = hotspots.flame_stacks(s, 0)
    assert stacks == {(0, 1, 2): 4, (0, 1): 2, (0, 1, -1 - C.BACKEND): 2}
    doc = flame.speedscope(s, "train > inference", stacks)
    assert doc["$schema"] == flame.SCHEMA
    prof = doc["profiles"][0]
    assert prof["type"] == "sampled" and prof["unit"] == "none"
    assert sum(prof["weights"]) == prof["endValue"] == 8
    frames = doc["shared"]["frames"]
    assert all(0 <= i < len(frames) for st in prof["samples"] for i in st)
    assert {"name": "[Backend]"} in frames
    assert {"name": "helper", "file": "/m.py", "line": 9} in frames
    root = ET.fromstring(flame.svg(s, "train > inference", stacks))
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert any(t.startswith("helper (/m.py:9): 4 samples") for t in titles)
    assert flame.file_stem("train > inference") == "train__inference"
    assert flame.file_stem("a/b c") == "a_b_c"


def test_a_forked_childs_samples_carry_its_own_thread_id(tmp_path: Path):
    """A child forked (os.fork, no multiprocessing bootstrap) while recording samples its
    main thread under its own OS thread id: Python 3.11's threading keeps the parent's
    native_id for the forking thread, and a forked Pool worker's first samples (taken
    before multiprocessing resets it) were tagged with the parent's thread and joined to
    no operation."""
    import os
    import time

    from rlscope.inprocess import pysampler

    out = tmp_path / "trace"
    rlscope.start(out)
    pysampler.start(str(out), 200)
    try:
        pid = os.fork()
        if pid == 0:  # the child: busy until it has been sampled, then leaves
            try:
                with rlscope.operation("child_op"):
                    deadline = time.monotonic() + 60
                    while time.monotonic() < deadline:
                        sampler = pysampler.active()
                        if sampler is not None and sampler.samples >= 3:
                            break
                        sum(range(200))
                rlscope.stop()
            finally:
                os._exit(0)
        _pid, status = os.waitpid(pid, 0)
        assert status == 0
    finally:
        pysampler.stop()
        rlscope.stop()
    mine = [f for f in stack_files(out) if f".{pid}." in f.name]
    assert mine, [f.name for f in stack_files(out)]
    tids = {int(line.split("\t")[2]) for f in mine for line in f.read_text().splitlines()
            if line.startswith("s\t")}
    assert tids == {pid}, tids
