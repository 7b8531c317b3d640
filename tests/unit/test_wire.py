"""The Python recorder's wire encoder (rlscope.recorder.wire) against the schema: field
numbers and types as compiled from the proto, bytes as protobuf serializes them; and
recording imports no protobuf."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import json_format
from google.protobuf.descriptor_pb2 import FieldDescriptorProto, FileDescriptorSet
from hypothesis import given, settings
from hypothesis import strategies as st
from rlscope.trace._descriptor import FILE_DESCRIPTOR_SET

from rlscope.recorder import wire
from rlscope.trace import messages

_TYPES = {"int64": FieldDescriptorProto.TYPE_INT64, "uint64": FieldDescriptorProto.TYPE_UINT64,
          "uint32": FieldDescriptorProto.TYPE_UINT32, "sint64": FieldDescriptorProto.TYPE_SINT64,
          "string": FieldDescriptorProto.TYPE_STRING}
# Fields of the schema the Python recorder never writes (the CUDA collector's).
_NOT_WRITTEN = {"Record": {"cuda_chunk"},
                # Bounded traces' aggregates: the native writer only (the Python
                # recorder keeps every event).
                "Chunk": {"agg_states", "agg_thread", "agg_gap", "agg_state", "agg_ns",
                          "agg_calls", "agg_events", "count_thread", "count_gap",
                          "count_kind", "count_n", "agg_until_ns"},
                "Header": {"cupti_offset_ns", "cupti_offset_error_ns", "cupti_version"}}


def _compiled_messages() -> dict[str, dict[str, FieldDescriptorProto]]:
    """message -> field name -> FieldDescriptorProto, from the descriptor set the build
    compiled from proto/rlscope/trace.proto (stable across protobuf versions)."""
    (f,) = FileDescriptorSet.FromString(FILE_DESCRIPTOR_SET).file
    assert f.package == messages.PACKAGE
    return {m.name: {fd.name: fd for fd in m.field} for m in f.message_type}


@pytest.mark.parametrize("message", sorted(wire.SCHEMA))
def test_schema_matches_the_compiled_proto(message: str):
    fields = _compiled_messages()[message]
    assert set(fields) - set(wire.SCHEMA[message]) == _NOT_WRITTEN.get(message, set())
    for name, (number, typ, repeated) in wire.SCHEMA[message].items():
        f = fields[name]
        where = f"{message}.{name}"
        assert f.number == number, where
        assert (f.label == FieldDescriptorProto.LABEL_REPEATED) == repeated, where
        if typ in wire.SCHEMA:
            assert f.type == FieldDescriptorProto.TYPE_MESSAGE, where
            assert f.type_name == f".{messages.PACKAGE}.{typ}", where
        else:
            assert f.type == _TYPES[typ], where


def _protobuf_bytes(body: dict) -> bytes:
    # ParseDict takes proto field names and int64 values as ints.
    return json_format.ParseDict(body, messages.Record()).SerializeToString()


def test_header_bytes_equal_protobufs():
    header = {"format_version": 1, "source": "python", "pid": 123, "ppid": 1,
              "host": "h", "process_name": "p", "argv": ["python", "", "-c", "é"],
              "clock": {"monotonic_ns": 5, "realtime_ns": 1 << 62, "uncertainty_ns": 0},
              "recorder": "python", "rlscope_version": "0.1.0"}
    data = wire.record(header=header)
    assert data == _protobuf_bytes({"header": header})
    h = messages.Record.FromString(data).header
    assert list(h.argv) == header["argv"] and h.clock.realtime_ns == 1 << 62


def test_empty_bodies_are_present():
    rec = messages.Record.FromString(wire.record(chunk={"sequence": 0}))
    assert rec.WhichOneof("body") == "chunk"
    assert wire.record(chunk={}) == _protobuf_bytes({"chunk": {}})
    rec = messages.Record.FromString(wire.record(header={}))
    assert rec.WhichOneof("body") == "header"


def test_unknown_field_is_an_error():
    with pytest.raises(KeyError, match="nope"):
        wire.record(chunk={"nope": 1})


_i64 = st.integers(-(1 << 63), (1 << 63) - 1)
_u32 = st.integers(0, (1 << 32) - 1)
_small = st.integers(0, 127)
_text = st.text(max_size=8)


@settings(max_examples=200, deadline=None)
@given(sequence=st.integers(0, (1 << 64) - 1), base=_i64,
       deltas=st.lists(_i64, max_size=20), threads=st.lists(_small | _u32, max_size=20),
       kinds=st.lists(_small, max_size=20), names=st.lists(_u32, max_size=20),
       args=st.lists(_i64, max_size=6), dropped=st.integers(0, (1 << 64) - 1),
       strings=st.lists(st.tuples(_u32, _text), max_size=4),
       thread_defs=st.lists(st.tuples(_u32, _i64, _text), max_size=3),
       metadata=st.lists(st.tuples(_text, _text, _i64), max_size=3))
def test_chunk_bytes_equal_protobufs(sequence, base, deltas, threads, kinds, names, args,
                                     dropped, strings, thread_defs, metadata):
    chunk = {"sequence": sequence, "base_time_ns": base, "time_delta_ns": deltas,
             "thread": threads, "kind": kinds, "name": names, "args": args,
             "dropped_events": dropped,
             "strings": [{"id": i, "value": v} for i, v in strings],
             "threads": [{"index": i, "tid": t, "name": n} for i, t, n in thread_defs],
             "metadata": [{"key": k, "json_value": v, "time_ns": t} for k, v, t in metadata]}
    data = wire.record(chunk=chunk)
    assert data == _protobuf_bytes({"chunk": chunk})
    c = messages.Record.FromString(data).chunk
    assert list(c.time_delta_ns) == deltas and list(c.args) == args
    assert list(c.thread) == threads and c.dropped_events == dropped


@pytest.mark.parametrize("recorder", ["native", "python"])
def test_recording_imports_no_protobuf(tmp_path: Path, recorder: str):
    if recorder == "native":
        pytest.importorskip("rlscope._native")
    code = (
        "import sys, rlscope\n"
        f"rlscope.start({str(tmp_path / 't')!r}, recorder={recorder!r})\n"
        "with rlscope.operation('op'):\n"
        "    rlscope.report_progress(1, 2)\n"
        "rlscope.set_metadata(key='value')\n"
        "rlscope.stop()\n"
        "print(sorted(m for m in sys.modules if m.startswith('google.protobuf')))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
