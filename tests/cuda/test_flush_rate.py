"""How often the collector flushes CUPTI and writes a chunk.

The writer flushes every RLSCOPE_FLUSH_INTERVAL_S and is woken early when CUPTI completes
a full buffer. Its own ``cuptiActivityFlushAll`` completes the partly filled buffers too;
waking again for those made a loop: on an H100 (PPO on the GPU, docs/cuda.md) the writer
flushed ~1,000 times a second and CUPTI served ~1,800 buffer requests a second, 12 s of
CUPTI's own overhead in a 15 s run. Launches back to back must give about one chunk per
interval."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import run_traced
from fake_build import Fake

from rlscope.trace.reader import read_trace

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.usefixtures("cuda_lib")


def test_chunks_follow_the_interval_not_the_records(fake: Fake, tmp_path: Path):
    out = tmp_path / "run"
    r = run_traced([sys.executable, str(HERE / "workloads/launch_for.py"),
                    str(fake.libcupti), "1.5", "10", "20"], out, RLSCOPE_FLUSH_INTERVAL_S="0.25")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout.strip().splitlines()[-1])
    (p,) = read_trace(out).processes
    assert p.cuda is not None and len(p.gpu) == len(p.api_calls) == info["launches"]
    # One chunk per interval, one at exit, and one per buffer CUPTI really filled (8 MiB,
    # a kernel record < 256 bytes); a few more for timing.
    full_buffers = info["launches"] * 256 / (8 << 20)
    assert p.cuda.chunks <= info["seconds"] / 0.25 + full_buffers + 6, (p.cuda.chunks, info)
