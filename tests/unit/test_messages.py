"""rlscope.trace.messages: classes built from the compiled schema, usable with any
protobuf runtime the reader supports."""

from __future__ import annotations

import gc

import pytest

from rlscope.recorder import wire
from rlscope.trace import messages


def test_every_message_has_a_class():
    assert set(messages.CLASSES) >= {"Record", "Header", "Chunk", "CudaChunk", "ClockPair",
                                     "StringDef", "ThreadDef", "Metadata"}
    assert messages.message_class("Chunk") is messages.CLASSES["Chunk"]
    assert messages.descriptor("Chunk").full_name == "rlscope.trace.Chunk"


def test_submessages_survive_garbage_collection():
    # protobuf 4.22-4.24 (upb) segfaulted here when submessage classes were made on the fly.
    data = wire.record(header={"source": "python", "pid": 5, "clock": {"monotonic_ns": 3}})
    rec = messages.parse_record(data)
    del data
    gc.collect()
    assert rec.header.source == "python" and rec.header.clock.monotonic_ns == 3
    rec = messages.parse_record(wire.record(chunk={"strings": [{"id": 1, "value": "x"}],
                                                   "metadata": [{"key": "k"}]}))
    gc.collect()
    assert rec.chunk.strings[0].value == "x" and rec.chunk.metadata[0].key == "k"


def test_parse_error_holds_no_view_of_its_input():
    buf = bytearray(b"\x0a\x05\xff\xff")
    view = memoryview(buf)
    with pytest.raises(messages.RecordParseError) as e:
        messages.parse_record(view[:4])
    assert e.value.__context__ is None or e.value.__suppress_context__
    view.release()
    buf.extend(b"x")  # raises BufferError if any view of buf were still alive
