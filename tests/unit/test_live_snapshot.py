"""The live view's reading and numbers (rlscope.analysis.live, rlscope.trace.tail,
rlscope.reporters.live): a trace copied into the run directory a few bytes at a time, cut
anywhere (mid-record), is read incrementally without error, and once whole gives the same
operation times and calls as the report; the verdict and TensorBoard scalars follow their
rules."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

import rlscope
from rlscope.analysis import open_run
from rlscope.analysis.live import LiveRun, ProcessView, Snapshot
from rlscope.analysis.pipeline.run import RunOptions
from rlscope.reporters import live as view
from rlscope.trace import format as fmt


def _record(out: Path, recorder: str) -> Path:
    rlscope.start(out, recorder=recorder)
    try:
        for i in range(200):
            with rlscope.phase("training"):
                with rlscope.operation("simulation"), rlscope.operation("env.step"):
                    time.sleep(0.0002)
                with rlscope.operation("inference"):
                    sum(range(2000))
            rlscope.report_progress((i + 1) * 4, 800)
            if i % 50 == 0:
                rlscope.flush()  # several chunks
    finally:
        rlscope.stop()
    (f,) = out.glob("python.*" + fmt.FILE_SUFFIX)
    return f


def test_growing_file_read_incrementally(tmp_path: Path, recorder: str) -> None:
    src = _record(tmp_path / "src", recorder)
    run = tmp_path / "run"
    run.mkdir()
    dst = run / src.name
    data = src.read_bytes()
    live = LiveRun(run)
    step = max(len(data) // 23, 1)  # cuts inside records
    with open(dst, "wb") as f:
        for i in range(0, len(data), step):
            f.write(data[i:i + step])
            f.flush()
            snap = live.poll()
            assert not snap.warnings
    snap = live.poll()
    (p,) = snap.processes
    assert p.ended and not snap.running
    assert p.timesteps == 800 and p.unit == "timesteps"

    a = open_run(run, RunOptions(correct=False, infer="off")).analysis
    assert a is not None
    ops = a.operations().set_index("operation")
    for op in ("simulation", "simulation > env.step", "inference"):
        self_s = sum(v for (ph, path, _), v in p.total.items() if path == op)
        assert self_s == pytest.approx(ops.loc[op, "self_s"], rel=1e-9, abs=1e-9)
        assert p.calls[("training", op)] == ops.loc[op, "calls"] == 200


def _view(last: dict, total: dict | None = None, ended: bool = False) -> ProcessView:
    return ProcessView(1, 0, "train.py", "", ended, total or last, last, {}, 400,
                       "timesteps", 200.0, 180.0, 100, 95.0, 1 << 20, ["training"])


def test_verdict_rule() -> None:
    sim = {("", "simulation", "Simulator"): 0.6, ("", "inference", "Python"): 0.4}
    assert view.verdict(_view(sim)).startswith("simulator-bound (Simulator 60%")
    mixed = {("", "simulation", "Simulator"): 0.45, ("", "inference", "Python"): 0.55}
    assert view.verdict(_view(mixed)).startswith("Python-bound")
    even = {("", "a", "Simulator"): 0.4, ("", "b", "Python"): 0.35, ("", "c", "Backend"): 0.25}
    assert view.verdict(_view(even)).startswith("mixed (Simulator 40%")
    assert view.verdict(_view({}, sim, ended=True)).startswith("whole run: simulator-bound")


def test_scalars() -> None:
    last = {("", "simulation", "Simulator"): 0.3, ("", "simulation > env.step", "Python"): 0.1,
            ("", "inference", "Python"): 0.1}
    snap = Snapshot(Path("."), 10.0, 0.5, [_view(last)], True)
    step, s = view.scalars(snap)
    assert step == 400
    assert s["rlscope/train.py.1/share_pct/simulation"] == pytest.approx(80.0)
    # 100 steps reported with the new events; 0.4 s of simulation -> 4 ms per step
    assert s["rlscope/train.py.1/ms_per_step/simulation"] == pytest.approx(4.0)
    assert s["rlscope/train.py.1/steps_per_s"] == 200.0
    assert not any(math.isnan(v) for v in s.values())
    snap.gpus = {0: (70.0, 3 << 30)}
    lines = view.screen(snap, view.Selection())
    assert "GPUs (NVML, device-wide): 0: 70% busy, 3.0 GiB" in lines
    assert "simulator-bound (Simulator 60%" in "\n".join(lines)


def _framed(rec) -> bytes:  # type: ignore[no-untyped-def]
    body = rec.SerializeToString()
    n, out = len(body), bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out) + body


def test_samples_read_as_they_grow(tmp_path: Path) -> None:
    """rls-prof's samples file, appended to: per process CPU % between its last two
    samples, and each GPU's last NVML sample, in the snapshot, the screen and scalars."""
    from rlscope.trace import messages

    rec = messages.Record
    head = rec()
    head.header.format_version = fmt.FORMAT_VERSION
    head.header.source = fmt.SOURCE_SAMPLES
    path = tmp_path / f"samples.1{fmt.SAMPLES_SUFFIX}"
    path.write_bytes(fmt.MAGIC + _framed(head))
    live = LiveRun(tmp_path)
    live.poll()
    for seq in range(3):  # a process at 50% of a core, a GPU going from 10% to 70% busy
        r = rec()
        c = r.sample_chunk
        c.sequence, c.interval_ns = seq, 100_000_000
        c.proc_base_ns = seq * 100_000_000
        c.proc_time_delta_ns.append(0)
        c.proc_pid.append(42)
        c.proc_cpu_ns.append(seq * 50_000_000)
        c.proc_rss_bytes.append(1 << 20)
        c.gpu_base_ns = seq * 100_000_000
        c.gpu_time_delta_ns.append(0)
        c.gpu_index.append(0)
        c.gpu_util_pct.append(10 + 30 * seq)
        c.gpu_memory_util_pct.append(0)
        c.gpu_memory_used_bytes.append(3 << 30)
        c.gpu_sm_clock_mhz.append(1000)
        data = _framed(r)
        with open(path, "ab") as f:  # in two writes: the first leaves a partial record
            f.write(data[:5])
        live.poll()
        with open(path, "ab") as f:
            f.write(data[5:])
        snap = live.poll()
        assert not snap.warnings
    assert live.proc.cpu_pct()[42] == (pytest.approx(50.0), 1 << 20)
    assert snap.gpus == {0: (70.0, 3 << 30)}
    screen = "\n".join(view.screen(snap, view.Selection()))
    assert "waiting for the run's first trace file" in screen
    assert view.scalars(snap)[1] == {"rlscope/gpu0/util_pct": 70.0}


def test_host_directories_followed(tmp_path: Path, recorder: str) -> None:
    """A run over several hosts: each writes into DIR/<host>/ (docs/multiprocess.md)."""
    src = _record(tmp_path / "src", recorder)
    (tmp_path / "run" / "node1").mkdir(parents=True)
    (tmp_path / "run" / "node1" / src.name).write_bytes(src.read_bytes())
    (p,) = LiveRun(tmp_path / "run").poll().processes
    assert p.ended and p.calls[("training", "inference")] == 200
