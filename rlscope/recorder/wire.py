"""Protobuf wire encoding of the records the Python recorder writes (proto/rlscope/trace.proto),
so that recording needs no protobuf runtime (the native recorder has its own encoder,
native/common/pb_encode.h).

Messages are plain dicts keyed by field name. Fields are written in field-number order and
proto3 defaults (0, "", empty lists) are left out, as protobuf's serializer does, so the
bytes equal ``SerializeToString()`` of the same message (tests/unit/test_wire.py checks
that, and checks ``SCHEMA`` against the compiled descriptor). A message-typed field given
as a dict is always written, even when empty: that is how Record says which body it has.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# The fields of proto/rlscope/trace.proto this encoder writes: message -> field name ->
# (field number, type, repeated). A type is a scalar type name or a message name.
# The single place on the Python side that knows field numbers.
SCHEMA: dict[str, dict[str, tuple[int, str, bool]]] = {
    "Record": {
        "header": (1, "Header", False),
        "chunk": (2, "Chunk", False),
        "sample_chunk": (4, "SampleChunk", False),
    },
    "ClockPair": {
        "monotonic_ns": (1, "int64", False),
        "realtime_ns": (2, "int64", False),
        "uncertainty_ns": (3, "int64", False),
    },
    "Header": {
        "format_version": (1, "uint32", False),
        "source": (2, "string", False),
        "pid": (3, "int64", False),
        "ppid": (4, "int64", False),
        "host": (5, "string", False),
        "process_name": (6, "string", False),
        "argv": (7, "string", True),
        "clock": (8, "ClockPair", False),
        "recorder": (9, "string", False),
        "rlscope_version": (10, "string", False),
    },
    "StringDef": {
        "id": (1, "uint32", False),
        "value": (2, "string", False),
    },
    "ThreadDef": {
        "index": (1, "uint32", False),
        "tid": (2, "int64", False),
        "name": (3, "string", False),
    },
    "Metadata": {
        "key": (1, "string", False),
        "json_value": (2, "string", False),
        "time_ns": (3, "int64", False),
    },
    "Chunk": {
        "sequence": (1, "uint64", False),
        "strings": (2, "StringDef", True),
        "threads": (3, "ThreadDef", True),
        "base_time_ns": (4, "int64", False),
        "time_delta_ns": (5, "sint64", True),
        "thread": (6, "uint32", True),
        "kind": (7, "uint32", True),
        "name": (8, "uint32", True),
        "args": (9, "sint64", True),
        "dropped_events": (10, "uint64", False),
        "metadata": (11, "Metadata", True),
    },
    # rls-prof's sampler (rlscope/launch/sampler.py).
    "GpuDef": {
        "index": (1, "uint32", False),
        "name": (2, "string", False),
        "uuid": (3, "string", False),
        "memory_total_bytes": (4, "uint64", False),
    },
    "SampleChunk": {
        "sequence": (1, "uint64", False),
        "interval_ns": (2, "uint64", False),
        "gpus": (3, "GpuDef", True),
        "proc_base_ns": (4, "int64", False),
        "proc_time_delta_ns": (5, "sint64", True),
        "proc_pid": (6, "int64", True),
        "proc_cpu_ns": (7, "uint64", True),
        "proc_rss_bytes": (8, "uint64", True),
        "core_base_ns": (9, "int64", False),
        "core_time_delta_ns": (10, "sint64", True),
        "core_index": (11, "uint32", True),
        "core_busy_ns": (12, "uint64", True),
        "gpu_base_ns": (13, "int64", False),
        "gpu_time_delta_ns": (14, "sint64", True),
        "gpu_index": (15, "uint32", True),
        "gpu_util_pct": (16, "uint32", True),
        "gpu_memory_util_pct": (17, "uint32", True),
        "gpu_memory_used_bytes": (18, "uint64", True),
        "gpu_sm_clock_mhz": (19, "uint32", True),
        "gpu_status": (20, "string", False),
        "sampler_cpu_ns": (21, "uint64", False),
        "ticks": (22, "uint64", False),
        "gpm_base_ns": (23, "int64", False),
        "gpm_time_delta_ns": (24, "sint64", True),
        "gpm_index": (25, "uint32", True),
        "gpm_sm_active_cpct": (26, "uint32", True),
        "gpm_sm_occupancy_cpct": (27, "uint32", True),
        "gpm_graphics_cpct": (28, "uint32", True),
        "gpm_status": (29, "string", False),
        "proc_runq_ns": (30, "int64", True),
    },
}

_VARINT_TYPES = {"int64", "uint64", "uint32", "sint64"}
_MASK64 = (1 << 64) - 1


def varint(n: int) -> bytes:
    """Base-128 varint of a non-negative int (negative int64s: two's complement, 10 bytes).
    The package's one varint encoder: the offline writers (reporters/pbrows.py) use it too."""
    return varints((n,))


def varints(values: Sequence[int]) -> bytes:
    """The varints of ``values``, one after the other (a packed repeated field's payload)."""
    if min(values) >= 0 and max(values) < 0x80:
        return bytes(values)  # one byte each: the common case for kinds, threads, names
    out = bytearray()
    append = out.append
    for v in values:
        v &= _MASK64
        while v > 0x7F:
            append((v & 0x7F) | 0x80)
            v >>= 7
        append(v)
    return bytes(out)


def _zigzag(values: Iterable[int]) -> list[int]:
    return [(v << 1) ^ (v >> 63) for v in values]


def _delimited(tag: bytes, payload: bytes) -> bytes:
    return tag + varint(len(payload)) + payload


def encode(message: str, values: Mapping[str, Any]) -> bytes:
    """The serialized ``message`` (a SCHEMA name) with the given field values."""
    fields = SCHEMA[message]
    unknown = set(values) - set(fields)
    if unknown:
        raise KeyError(f"{message} has no fields {sorted(unknown)}")
    out = []
    for name, (number, typ, repeated) in sorted(fields.items(), key=lambda f: f[1][0]):
        v = values.get(name)
        if v is None:
            continue
        if typ in SCHEMA:  # message
            tag = varint(number << 3 | 2)
            for m in (v if repeated else [v]):
                out.append(_delimited(tag, encode(typ, m)))
        elif typ == "string":
            tag = varint(number << 3 | 2)
            for s in (v if repeated else [v]):
                if s or repeated:
                    out.append(_delimited(tag, s.encode()))
        elif typ in _VARINT_TYPES:
            if repeated:  # proto3 packs repeated scalars
                if len(v):
                    vals = _zigzag(v) if typ == "sint64" else v
                    out.append(_delimited(varint(number << 3 | 2), varints(vals)))
            elif v:
                out.append(varint(number << 3))
                out.append(varint(_zigzag([v])[0] if typ == "sint64" else v))
        else:
            raise TypeError(f"{message}.{name}: unsupported type {typ}")
    return b"".join(out)


def record(**body: Mapping[str, Any]) -> bytes:
    """A serialized Record: ``record(header={...})`` or ``record(chunk={...})``."""
    return encode("Record", body)
