"""Reading traces: torn, corrupt, foreign and missing input give one clear message."""

from __future__ import annotations

from pathlib import Path

import pytest

import rlscope
from rlscope.errors import TraceError
from rlscope.trace import format as fmt
from rlscope.trace import messages
from rlscope.trace.reader import read_process, read_trace


def test_format_constants_match_the_proto():
    for value, name in fmt.KIND_NAMES.items():
        assert messages.EVENT_KIND[name] == value


@pytest.fixture
def small_trace(tmp_path: Path, recorder: str) -> Path:
    out = tmp_path / "t"
    rlscope.start(out, recorder=recorder)
    for _ in range(100):
        with rlscope.operation("a"):
            pass
        rlscope.flush()  # one chunk per iteration, so truncation leaves earlier ones intact
    rlscope.stop()
    return out


def _file(d: Path) -> Path:
    (f,) = d.glob("*" + fmt.FILE_SUFFIX)
    return f


def test_torn_last_chunk_is_skipped_with_one_warning(small_trace: Path):
    f = _file(small_trace)
    full = read_process(f)
    data = f.read_bytes()
    f.write_bytes(data[:-3])
    p = read_process(f)
    assert len(p.warnings) == 1 and "torn" in p.warnings[0]
    assert 0 < len(p.events) < len(full.events)
    assert not p.complete


def test_corrupt_record_in_the_middle_is_an_error(small_trace: Path):
    f = _file(small_trace)
    data = bytearray(f.read_bytes())
    mid = len(data) // 2
    data[mid:mid + 40] = b"\xff" * 40
    f.write_bytes(bytes(data))
    with pytest.raises(TraceError, match="corrupt"):
        read_process(f)


def test_foreign_empty_and_missing(tmp_path: Path):
    with pytest.raises(TraceError, match="does not exist"):
        read_trace(tmp_path / "nope")
    with pytest.raises(TraceError, match="no rlscope trace files"):
        read_trace(tmp_path)
    (tmp_path / "x.rlscope").write_bytes(b"\x89PNG\r\n\x1a\nnot a trace")
    with pytest.raises(TraceError, match="not an rlscope trace"):
        read_trace(tmp_path)
    (tmp_path / "x.rlscope").write_bytes(b"")
    with pytest.raises(TraceError, match="empty or truncated"):
        read_trace(tmp_path)


def test_a_file_of_another_format_version_is_named(small_trace: Path):
    rec = messages.Record()
    rec.header.format_version = 99
    payload = rec.SerializeToString()
    other = small_trace / "python.1.rlscope"
    other.write_bytes(fmt.MAGIC + bytes([len(payload)]) + payload)
    with pytest.raises(TraceError, match="format version 99"):
        read_trace(small_trace)
