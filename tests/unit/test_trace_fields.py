"""The native encoders' schema constants against proto/rlscope/trace.proto.

native/common/trace_fields.h (field numbers) and the EventKind enum of
native/common/recorder.h are written by hand; trace.proto compiled by protoc (the
``trace_proto`` fixture) is the reference, whatever module Python loads messages from.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIELDS_H = REPO / "native" / "common" / "trace_fields.h"
RECORDER_H = REPO / "native" / "common" / "recorder.h"


def camel(snake: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in snake.split("_"))


def header_constants() -> dict[str, dict[str, int]]:
    """{message namespace: {constant: number}} from trace_fields.h."""
    text = FIELDS_H.read_text()
    out: dict[str, dict[str, int]] = {}
    for ns, body in re.findall(r"namespace (\w+) \{(.*?)\}  // namespace \1", text, re.S):
        consts = re.findall(r"\b(k\w+) = (\d+)", body)
        assert len({c for c, _ in consts}) == len(consts), f"{ns}: a constant appears twice"
        out[ns] = {c: int(n) for c, n in consts}
    return out


def test_header_parses():
    consts = header_constants()
    assert "cuda_chunk" in consts and consts["record"]["kChunk"] == 2


def test_field_numbers_match_proto(trace_proto):
    messages = {m.name: m for m in trace_proto.message_type}
    consts = header_constants()
    # One namespace per message, so a new message cannot be forgotten.
    assert {camel(ns) for ns in consts} == set(messages)
    for ns, got in consts.items():
        want = {"k" + camel(f.name): f.number for f in messages[camel(ns)].field}
        assert got == want, f"trace_fields.h namespace {ns} vs message {camel(ns)}"


def test_event_kinds_match_proto(trace_proto):
    body = re.search(r"enum EventKind : uint32_t \{(.*?)\};", RECORDER_H.read_text(), re.S)
    assert body is not None
    got = {n: int(v) for n, v in re.findall(r"\b([A-Z_]+) = (\d+),", body.group(1))}
    (enum,) = [e for e in trace_proto.enum_type if e.name == "EventKind"]
    assert got == {v.name: v.number for v in enum.value}
