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

from collections.abc import Iterator
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "rlscope.trace"


def _load_pool() -> tuple[descriptor_pool.DescriptorPool, list[str]]:
    """The pool with the schema's files, and the names of those files."""
    try:
        from rlscope.trace._descriptor import FILE_DESCRIPTOR_SET
    except ImportError:
        raise ImportError(
            "rlscope.trace._descriptor is missing: it is generated when rlscope is built; "
            "reinstall rlscope (from a checkout: scripts/setup.sh)") from None
    pool = descriptor_pool.DescriptorPool()
    files = descriptor_pb2.FileDescriptorSet.FromString(FILE_DESCRIPTOR_SET).file
    # AddSerializedFile exists from protobuf 3.x to today (Add() was deprecated in 4.x).
    for f in files:
        pool.AddSerializedFile(f.SerializeToString())
    return pool, [f.name for f in files]


POOL, _FILES = _load_pool()


def descriptor(name: str) -> Any:
    """The Descriptor of message ``name`` (e.g. "Chunk") of the trace schema."""
    return POOL.FindMessageTypeByName(f"{PACKAGE}.{name}")


def _class_of(desc: Any) -> Any:
    # GetMessageClass: protobuf >= 4.22; MessageFactory.GetPrototype: 3.20 to 4.21 (later
    # removed).
    get = getattr(message_factory, "GetMessageClass", None)
    if get is not None:
        return get(desc)
    # (types-protobuf, which EnvPool pulls in, knows only the newer API.)
    return message_factory.MessageFactory(POOL).GetPrototype(  # type: ignore[attr-defined,unused-ignore]
        desc)


def _all_messages(descs: Any) -> Iterator[Any]:
    for d in descs:
        yield d
        yield from _all_messages(d.nested_types)


# A class for every message, held for the life of the process: with protobuf 4.22 to 4.24
# (upb), a submessage whose class was only made on the fly while parsing segfaults on
# access once the garbage collector has run.
CLASSES: dict[str, Any] = {
    d.full_name.removeprefix(PACKAGE + "."): _class_of(d)
    for f in _FILES
    for d in _all_messages(POOL.FindFileByName(f).message_types_by_name.values())}
Record = CLASSES["Record"]


def message_class(name: str) -> Any:
    """The message class for ``name`` (e.g. "Chunk") of the trace schema."""
    return CLASSES[name]

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
