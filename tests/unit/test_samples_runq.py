"""The samples file's run-queue column (SampleChunk.proc_runq_ns): read back per process
row, and read as -1 (unknown) from files written before it was sampled."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from rlscope.recorder import wire
from rlscope.trace import format as fmt
from rlscope.trace.samples_reader import read_samples


def _write(path: Path, chunk: dict) -> None:
    c = fmt.read_clock_pair()
    header = wire.record(header={
        "format_version": fmt.FORMAT_VERSION, "source": fmt.SOURCE_SAMPLES,
        "pid": os.getpid(), "ppid": 1, "host": "h", "process_name": "rls-prof",
        "argv": ["rls-prof"], "clock": {"monotonic_ns": c.monotonic_ns,
                                        "realtime_ns": c.realtime_ns, "uncertainty_ns": 0},
        "recorder": "sampler", "rlscope_version": "0"})
    body = wire.record(sample_chunk=chunk)
    path.write_bytes(fmt.MAGIC + wire.varint(len(header)) + header
                     + wire.varint(len(body)) + body)


BASE = {"sequence": 0, "interval_ns": 100, "proc_base_ns": 1000,
        "proc_time_delta_ns": [0, 100, 0, 100], "proc_pid": [7, 8, 7, 8],
        "proc_cpu_ns": [1, 2, 3, 4], "proc_rss_bytes": [10, 10, 10, 10]}


def test_runq_column_read_back(tmp_path: Path):
    f = tmp_path / f"samples.1{fmt.SAMPLES_SUFFIX}"
    _write(f, {**BASE, "proc_runq_ns": [5, 0, 9, 3]})
    got = read_samples([f])
    assert got is not None
    rows = sorted(zip(got.proc_pid.tolist(), got.proc_time_ns.tolist(),
                      got.proc_runq_ns.tolist(), strict=True))
    assert rows == [(7, 1000, 5), (7, 1100, 9), (8, 1100, 0), (8, 1200, 3)]


def test_files_without_it_read_as_unknown(tmp_path: Path):
    f = tmp_path / f"samples.1{fmt.SAMPLES_SUFFIX}"
    _write(f, BASE)
    got = read_samples([f])
    assert got is not None and len(got.proc_pid) == 4
    assert np.all(got.proc_runq_ns == -1)
