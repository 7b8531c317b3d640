"""Protobuf message classes of the trace format (proto/rlscope/trace.proto).

The classes are built at run time from the schema's serialized FileDescriptorSet, which the
build compiles into ``rlscope/trace/_descriptor.py``, in a private descriptor pool. No
protoc-generated ``trace_pb2`` is shipped: new gencode refuses protobuf runtimes older than
itself, and rlscope must read traces with whatever protobuf (>= 3.20) the profiled
environment pins. Only the reader and the tests import this module; recording never
imports protobuf (the recorders encode the wire format themselves).

    from rlscope.trace import messages
    rec = messages.Record.FromString(data)
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "rlscope.trace"


def _load_pool() -> descriptor_pool.DescriptorPool:
    try:
        from rlscope.trace._descriptor import FILE_DESCRIPTOR_SET
    except ImportError:
        raise ImportError(
            "rlscope.trace._descriptor is missing: it is generated when rlscope is built; "
            "reinstall rlscope (from a checkout: scripts/setup.sh)") from None
    pool = descriptor_pool.DescriptorPool()
    # AddSerializedFile exists from protobuf 3.x to today (Add() was deprecated in 4.x).
    for f in descriptor_pb2.FileDescriptorSet.FromString(FILE_DESCRIPTOR_SET).file:
        pool.AddSerializedFile(f.SerializeToString())
    return pool


POOL = _load_pool()


def descriptor(name: str) -> Any:
    """The Descriptor of message ``name`` (e.g. "Chunk") of the trace schema."""
    return POOL.FindMessageTypeByName(f"{PACKAGE}.{name}")


def message_class(name: str) -> Any:
    """The message class for ``name``, with the installed protobuf's API: GetMessageClass
    (protobuf >= 4.22) or MessageFactory.GetPrototype (3.20 to 4.21; later removed)."""
    desc = descriptor(name)
    get = getattr(message_factory, "GetMessageClass", None)
    if get is not None:
        return get(desc)
    return message_factory.MessageFactory(POOL).GetPrototype(desc)


Record = message_class("Record")

# EventKind value by name (the proto enum; rlscope.trace.format mirrors it).
EVENT_KIND: dict[str, int] = {
    v.name: v.number for v in POOL.FindEnumTypeByName(f"{PACKAGE}.EventKind").values}


class RecordParseError(ValueError):
    """Bytes that are not a Record."""


def parse_record(data: bytes | memoryview) -> Any:
    """One serialized Record; raises RecordParseError on bytes that do not parse.

    The error chains no exception and keeps no reference to ``data``: the reader passes
    slices of an mmap, which cannot be closed while a view of it lives on in a traceback
    (pure-Python protobuf runtimes parse in Python frames).
    """
    try:
        return Record.FromString(data)
    except Exception as e:  # DecodeError, or others for some damage, by runtime
        why = f"{type(e).__name__}: {e}"
    del data
    raise RecordParseError(why)
