"""A reader of rls-analyze's Perfetto timelines for the tests: decodes the file with
Perfetto's own schema (the ``perfetto`` package's generated classes; tests skip without
it) and replays it as the documented format says a consumer must — per sequence:
incremental state cleared / needed, interned event names, TracePacketDefaults,
incremental clocks set by a ClockSnapshot; per track: begin/end slices on a stack,
counters; flows from ``flow_ids`` to ``terminating_flow_ids`` — and checks it is
well-formed as it goes. trace_processor itself cannot be fetched here (its Python
package downloads the binary on first use).
"""

from __future__ import annotations

import gzip
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest


def perfetto_schema():
    """Perfetto's generated message classes, or skip the test."""
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
    except Exception as e:  # not installed, or built for another protobuf runtime
        pytest.skip(f"the perfetto package's protos are not importable ({e})")
    return pb


@dataclass
class Slice:
    name: str
    start: int
    end: int
    depth: int
    flows_out: list[int] = field(default_factory=list)
    flows_in: list[int] = field(default_factory=list)


@dataclass
class TrackInfo:
    uuid: int
    name: str
    parent: int
    is_counter: bool
    pid: int | None = None  # process tracks
    process_name: str = ""
    rank: int | None = None


@dataclass
class Decoded:
    tracks: dict[int, TrackInfo] = field(default_factory=dict)
    slices: dict[int, list[Slice]] = field(default_factory=lambda: defaultdict(list))
    counters: dict[int, list[tuple[int, float]]] = field(
        default_factory=lambda: defaultdict(list))
    flows: dict[int, tuple[Slice, Slice | None]] = field(default_factory=dict)
    packets: int = 0

    def track(self, name: str) -> int:
        (uuid,) = [u for u, t in self.tracks.items() if t.name == name]
        return uuid

    def by_name(self) -> dict[str, list[Slice]]:
        """Slices per track, keyed "process name / track name"."""
        out: dict[str, list[Slice]] = {}
        for uuid, sl in self.slices.items():
            t = self.tracks[uuid]
            out[f"{self.tracks[t.parent].process_name} / {t.name}"] = sl
        return out


class _Sequence:
    def __init__(self) -> None:
        self.valid = False
        self.names: dict[int, str] = {}
        self.default_track: int | None = None
        self.default_clock: int | None = None
        self.clocks: dict[int, int] = {}  # incremental clock id -> last value


def _no_unknown_fields(msg, where: str) -> None:
    """Every field is one the schema knows, with its wire type (a field written with
    another wire type would be kept aside as unknown, and ignored by trace_processor)."""
    from google.protobuf import unknown_fields

    assert not len(unknown_fields.UnknownFieldSet(msg)), f"unknown fields in {where}"
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        for v in (value if _repeated(fd) else [value]):
            _no_unknown_fields(v, f"{where}.{fd.name}")


def _repeated(fd) -> bool:
    is_repeated = getattr(fd, "is_repeated", None)
    return bool(is_repeated) if is_repeated is not None else fd.label == fd.LABEL_REPEATED


def read_perfetto(path: Path, check_fields: int = 1_000_000) -> Decoded:
    """``check_fields``: packets checked for unknown fields (all those that are not
    slice events are, whatever their number)."""
    pb = perfetto_schema()
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    trace = pb.Trace()
    trace.ParseFromString(data)
    assert trace.SerializeToString() == data, "the file has fields Perfetto's schema lacks"
    te_type = pb.TrackEvent
    out = Decoded()
    seqs: dict[int, _Sequence] = defaultdict(_Sequence)
    stacks: dict[int, list[Slice]] = defaultdict(list)
    last_ts: dict[int, int] = {}
    for pk in trace.packet:
        out.packets += 1
        if out.packets <= check_fields or not pk.HasField("track_event"):
            _no_unknown_fields(pk, "TracePacket")
        seq_id = pk.trusted_packet_sequence_id
        assert seq_id, "every packet names its sequence"
        seq = seqs[seq_id]
        if pk.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
            seqs[seq_id] = seq = _Sequence()
            seq.valid = True
        if pk.sequence_flags & pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE:
            assert seq.valid, "a packet needs incremental state its sequence never cleared"
        if pk.HasField("trace_packet_defaults"):
            d = pk.trace_packet_defaults
            seq.default_clock = d.timestamp_clock_id if d.HasField("timestamp_clock_id") else None
            seq.default_track = d.track_event_defaults.track_uuid \
                if d.track_event_defaults.HasField("track_uuid") else None
        if pk.HasField("interned_data"):
            for en in pk.interned_data.event_names:
                assert en.iid not in seq.names, "an event name interned twice"
                seq.names[en.iid] = en.name
        which = pk.WhichOneof("data")
        if which == "track_descriptor":
            td = pk.track_descriptor
            assert td.uuid not in out.tracks, "a track described twice"
            info = TrackInfo(td.uuid, td.name, td.parent_uuid, td.HasField("counter"),
                             rank=td.sibling_order_rank if td.HasField("sibling_order_rank")
                             else None)
            if td.HasField("process"):
                info.pid, info.process_name = td.process.pid, td.process.process_name
            if td.parent_uuid:
                assert td.parent_uuid in out.tracks, "a track's parent comes first"
            out.tracks[td.uuid] = info
        elif which == "clock_snapshot":
            clocks = {c.clock_id: c for c in pk.clock_snapshot.clocks}
            assert 6 in clocks, "a snapshot relates its clocks to the trace clock (BOOTTIME)"
            for cid, c in clocks.items():
                if c.is_incremental:
                    assert cid >= 64, "only sequence-scoped clocks are incremental"
                    assert c.timestamp == clocks[6].timestamp, "clock 64 is the trace clock"
                    seq.clocks[cid] = c.timestamp
        elif which == "track_event":
            ev = pk.track_event
            clock = pk.timestamp_clock_id if pk.HasField("timestamp_clock_id") \
                else seq.default_clock
            if clock in seq.clocks:
                ts = seq.clocks[clock] + pk.timestamp
                seq.clocks[clock] = ts
            else:
                assert clock in (None, 6), f"timestamp on an undefined clock {clock}"
                ts = pk.timestamp
            uuid = ev.track_uuid if ev.HasField("track_uuid") else seq.default_track
            assert uuid in out.tracks, "an event on an undescribed track"
            track = out.tracks[uuid]
            assert ts >= last_ts.get(uuid, 0), "events of a track go back in time"
            last_ts[uuid] = ts
            if ev.type == te_type.TYPE_SLICE_BEGIN:
                assert not track.is_counter
                name = seq.names[ev.name_iid] if ev.HasField("name_iid") else ev.name
                s = Slice(name, ts, -1, len(stacks[uuid]), list(ev.flow_ids),
                          list(ev.terminating_flow_ids))
                stacks[uuid].append(s)
                out.slices[uuid].append(s)
                for f in ev.flow_ids:
                    assert f not in out.flows, "a flow id starts twice"
                    out.flows[f] = (s, None)
                for f in ev.terminating_flow_ids:
                    assert f in out.flows and out.flows[f][1] is None, \
                        "a flow ends that never started (or ends twice)"
                    out.flows[f] = (out.flows[f][0], s)
            elif ev.type == te_type.TYPE_SLICE_END:
                assert stacks[uuid], "a slice ends that never began"
                stacks[uuid].pop().end = ts
            elif ev.type == te_type.TYPE_COUNTER:
                assert track.is_counter, "a counter value on a slice track"
                v = ev.double_counter_value if ev.HasField("double_counter_value") \
                    else ev.counter_value
                out.counters[uuid].append((ts, v))
            else:
                raise AssertionError(f"unexpected event type {ev.type}")
    assert not any(stacks.values()), "slices left open at the end of the file"
    return out
