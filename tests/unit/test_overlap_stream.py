"""Streaming analysis of trace files equals the analysis of the trace read whole."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from rlscope.analysis import analyze, load
from rlscope.errors import TraceError
from rlscope.trace import format as fmt
from rlscope.trace.reader import read_trace

REPO = Path(__file__).resolve().parents[2]


def _make_trace():
    spec = importlib.util.spec_from_file_location(
        "make_trace", REPO / "scripts" / "bench" / "make_trace.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.make_trace


def _rows(a):
    df = a.breakdown(by=("pid", "thread", "phase", "operation", "category", "region"))
    return sorted((*r[:-1], round(r[-1] * 1e9)) for r in df.itertuples(index=False))


@pytest.mark.parametrize("batch", [997, 1 << 20])
def test_streaming_equals_whole(tmp_path: Path, batch: int):
    d = tmp_path / "t"
    _make_trace()(d, 30000, threads=3, processes=2, chunk_events=4096)
    whole = analyze(read_trace(d))
    streamed = load(d, batch_events=batch)
    assert _rows(streamed) == _rows(whole)
    cols = ["pid", "phase", "operation", "calls", "backend_calls", "simulator_calls"]
    assert (streamed.operations()[cols].values.tolist()
            == whole.operations()[cols].values.tolist())
    assert streamed.processes().drop(columns="metadata").equals(
        whole.processes().drop(columns="metadata"))
    assert streamed.iterations().equals(whole.iterations())


def test_torn_tail_and_corrupt_file(tmp_path: Path):
    d = tmp_path / "t"
    _make_trace()(d, 20000, chunk_events=2048)
    (f,) = d.glob("*" + fmt.FILE_SUFFIX)
    data = f.read_bytes()
    f.write_bytes(data[:-10])
    a = load(d)
    assert len(a.warnings) == 1 and "torn" in a.warnings[0]
    assert not a.processes()["complete"][0]
    f.write_bytes(data[: len(data) // 2] + b"\xff" * 64 + data[len(data) // 2 + 64:])
    with pytest.raises(TraceError, match="corrupt"):
        load(d)
