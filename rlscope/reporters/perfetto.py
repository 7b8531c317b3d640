"""Perfetto's protobuf trace format (opens in ui.perfetto.dev and trace_processor):
compact, and written as it is produced, track by track, in batches.

A trace is a sequence of TracePacket fields (``Trace.packet``). The few messages and
fields written here are those of Perfetto's documented format
(perfetto.dev/docs/reference/trace-packet-proto, its TrackEvent, TrackDescriptor,
InternedData, ClockSnapshot pages, and docs/concepts/clock-sync):

- one packet per process, on sequence 1: a TrackDescriptor with a ProcessDescriptor;
- per track, its own packet sequence (``trusted_packet_sequence_id``), opening with a
  packet that clears the sequence's incremental state and holds the TrackDescriptor
  (a child of the process's track; a CounterDescriptor for counters) and
  TracePacketDefaults (the track, and clock 64 for timestamps), then a ClockSnapshot
  defining clock 64 as incremental (each timestamp is the delta from the previous packet
  on the sequence; the first from the snapshot) and equal to the trace clock, then the
  interned event names of the track;
- slices as TYPE_SLICE_BEGIN / TYPE_SLICE_END events (names by interned id; a launch
  carries ``flow_ids``, the GPU work it launched ``terminating_flow_ids``); counters as
  TYPE_COUNTER events with ``counter_value`` or ``double_counter_value``.

Timestamps are ns from the timeline's zero (the run's first event) on the trace clock.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import IO

import numpy as np

from rlscope.analysis.timeline.select import TimelinePlan
from rlscope.analysis.timeline.slices import CounterTrack, Track, counter_tracks, process_tracks
from rlscope.reporters.chrome_trace import Stats
from rlscope.reporters.pbrows import FIXED64, LEN, VARINT, Field, encode, field, message, tag

# Field numbers of Perfetto's trace format, per message.
TRACE_PACKET = 1  # Trace.packet
# TracePacket
PK_CLOCK_SNAPSHOT = 6
PK_TIMESTAMP = 8
PK_SEQUENCE_ID = 10  # trusted_packet_sequence_id
PK_TRACK_EVENT = 11
PK_INTERNED_DATA = 12
PK_SEQUENCE_FLAGS = 13
PK_DEFAULTS = 59  # trace_packet_defaults
PK_TRACK_DESCRIPTOR = 60
SEQ_INCREMENTAL_STATE_CLEARED = 1
SEQ_NEEDS_INCREMENTAL_STATE = 2
# TracePacketDefaults / TrackEventDefaults
DEF_TIMESTAMP_CLOCK_ID = 58
DEF_TRACK_EVENT_DEFAULTS = 11
TED_TRACK_UUID = 11
# ClockSnapshot / ClockSnapshot.Clock
CS_CLOCKS = 1
CLK_ID = 1
CLK_TIMESTAMP = 2
CLK_IS_INCREMENTAL = 3
CLOCK_BOOTTIME = 6  # the default trace clock
CLOCK_INCREMENTAL = 64  # first of the sequence-scoped clock ids
# TrackDescriptor
TD_UUID = 1
TD_NAME = 2
TD_PROCESS = 3
TD_PARENT_UUID = 5
TD_COUNTER = 8
TD_CHILD_ORDERING = 11
TD_SIBLING_ORDER_RANK = 12
CHILD_ORDERING_EXPLICIT = 3
# ProcessDescriptor
PD_PID = 1
PD_CMDLINE = 2
PD_PROCESS_NAME = 6
# CounterDescriptor
CD_UNIT_NAME = 6
# InternedData / EventName
ID_EVENT_NAMES = 2
EN_IID = 1
EN_NAME = 2
# TrackEvent
TE_TYPE = 9
TE_NAME_IID = 10
TE_COUNTER_VALUE = 30
TE_DOUBLE_COUNTER_VALUE = 44
TE_FLOW_IDS = 47
TE_TERMINATING_FLOW_IDS = 48
TYPE_SLICE_BEGIN = 1
TYPE_SLICE_END = 2
TYPE_COUNTER = 4

BATCH = 1 << 18  # slices encoded at a time: bounds the writer's memory
BYTES_PER_SLICE = 30  # a begin and an end packet, for size estimates (measured: 26-30)
BYTES_PER_COUNTER_VALUE = 16


def packet(*parts: bytes) -> bytes:
    return message(TRACE_PACKET, *parts)


def write_perfetto(plan: TimelinePlan, out: IO[bytes]) -> Stats:
    """Write the planned timeline; return what it holds."""
    stats = Stats()
    uuids = itertools.count(1)
    sequences = itertools.count(2)  # sequence 1: the process descriptors
    for pp in plan.processes:
        p = pp.trace
        proc_uuid = next(uuids)
        out.write(packet(field(PK_SEQUENCE_ID, 1), message(
            PK_TRACK_DESCRIPTOR, field(TD_UUID, proc_uuid),
            message(TD_PROCESS, field(PD_PID, p.pid),
                    *[field(PD_CMDLINE, a) for a in p.header.argv],
                    field(PD_PROCESS_NAME, pp.name)),
            field(TD_CHILD_ORDERING, CHILD_ORDERING_EXPLICIT))))
        for tr in itertools.chain(process_tracks(p, plan.kinds, plan.window, pp.ordinal),
                                  pp.samples):
            for chunk in _slice_track(tr, next(uuids), proc_uuid, next(sequences),
                                      plan.origin_ns, stats):
                out.write(chunk)
        for c in [*counter_tracks(p, plan.kinds, plan.window), *pp.counters]:
            for chunk in _counter_track(c, next(uuids), proc_uuid, next(sequences),
                                        plan.origin_ns, stats):
                out.write(chunk)
    for g in plan.groups:  # run-wide counters (cores, NVML devices) as their own process
        group_uuid = next(uuids)
        out.write(packet(field(PK_SEQUENCE_ID, 1), message(
            PK_TRACK_DESCRIPTOR, field(TD_UUID, group_uuid),
            message(TD_PROCESS, field(PD_PID, g.pid), field(PD_PROCESS_NAME, g.name)))))
        for c in g.tracks:
            for chunk in _counter_track(c, next(uuids), group_uuid, next(sequences),
                                        plan.origin_ns, stats):
                out.write(chunk)
    return stats


def _track_head(uuid: int, parent: int, name: str, rank: int, seq: int, base_ns: int,
                counter: CounterTrack | None = None) -> bytes:
    """The packets that open a track's sequence: defaults and descriptor, clock. (Fields
    in field-number order, as protobuf serializers write them.)"""
    desc = [field(TD_UUID, uuid), field(TD_NAME, name), field(TD_PARENT_UUID, parent)]
    if counter is not None:
        desc.append(message(TD_COUNTER, *([field(CD_UNIT_NAME, counter.unit)]
                                          if counter.unit else [])))
    desc.append(field(TD_SIBLING_ORDER_RANK, rank))
    defaults = message(PK_DEFAULTS,
                       message(DEF_TRACK_EVENT_DEFAULTS, field(TED_TRACK_UUID, uuid)),
                       field(DEF_TIMESTAMP_CLOCK_ID, CLOCK_INCREMENTAL))
    seq_id = field(PK_SEQUENCE_ID, seq)
    clocks = message(PK_CLOCK_SNAPSHOT,
                     message(CS_CLOCKS, field(CLK_ID, CLOCK_INCREMENTAL),
                             field(CLK_TIMESTAMP, base_ns), field(CLK_IS_INCREMENTAL, 1)),
                     message(CS_CLOCKS, field(CLK_ID, CLOCK_BOOTTIME),
                             field(CLK_TIMESTAMP, base_ns)))
    return (packet(seq_id, field(PK_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED), defaults,
                   message(PK_TRACK_DESCRIPTOR, *desc))
            + packet(clocks, seq_id))


def _event_rows(seq: int, delta: np.ndarray, te: list[Field]) -> list[Field]:
    """The shape of an event packet inside Trace.packet."""
    return [Field(tag(TRACE_PACKET, LEN), inner=[
        Field(tag(PK_TIMESTAMP, VARINT), values=delta),
        Field(field(PK_SEQUENCE_ID, seq)),
        Field(tag(PK_TRACK_EVENT, LEN), inner=te),
        Field(field(PK_SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE)),
    ])]


def _batches(start: np.ndarray, end: np.ndarray) -> list[tuple[int, int]]:
    """Slice ranges of about BATCH slices, cut only where no earlier slice is still open
    (so each range's begin and end events can be ordered on their own)."""
    n = len(start)
    if n <= BATCH:
        return [(0, n)]
    prev_max = np.r_[np.iinfo(np.int64).min, np.maximum.accumulate(end)[:-1]]
    free = np.flatnonzero(start >= prev_max)  # top-level slices: a cut may go before
    cuts = np.unique(free[np.minimum(np.searchsorted(free, np.arange(0, n, BATCH)),
                                     len(free) - 1)])
    bounds = [int(c) for c in cuts if c > 0] + [n]
    return list(zip([0, *bounds[:-1]], bounds, strict=True))


def _event_order(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Begin and end events of nested slices (in nesting order) in the order a stack
    replays them: by time; at one time, ends of slices that started earlier (innermost
    first), then begins in nesting order, a zero-length slice's end right after its begin.
    Returns (slice index, is_begin) per event."""
    n = len(s)
    idx = np.arange(n)
    zero = s == e
    t = np.r_[s, e]
    group = np.r_[np.ones(n, np.int8), np.where(zero, 1, 0).astype(np.int8)]
    sub = np.r_[2 * idx, np.where(zero, 2 * idx + 1, -idx)]
    order = np.lexsort((sub, group, t))
    return order % n, order < n


def _slice_track(tr: Track, uuid: int, parent: int, seq: int, origin: int,
                 stats: Stats) -> Iterator[bytes]:
    s = tr.start_ns - origin
    e = tr.end_ns - origin
    base = int(s[0])
    counts = np.bincount(tr.label, minlength=len(tr.labels))
    by_use = np.argsort(-counts, kind="stable")
    iid = np.empty(len(by_use), np.uint64)
    iid[by_use] = np.arange(1, len(by_use) + 1, dtype=np.uint64)  # frequent: short ids
    names = b"".join(message(ID_EVENT_NAMES, field(EN_IID, int(iid[k])),
                             field(EN_NAME, tr.labels[k])) for k in by_use.tolist())
    yield (_track_head(uuid, parent, tr.name, tr.sort, seq, base)
           + packet(field(PK_SEQUENCE_ID, seq), message(PK_INTERNED_DATA, names),
                    field(PK_SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE)))
    prev = base
    for a, b in _batches(s, e):
        which, begin = _event_order(s[a:b], e[a:b])
        rows = which + a
        t = np.where(begin, s[rows], e[rows])
        delta = np.diff(t, prepend=prev).astype(np.uint64)
        prev = int(t[-1])
        te = [Field(tag(TE_TYPE, VARINT),
                    values=np.where(begin, TYPE_SLICE_BEGIN, TYPE_SLICE_END).astype(np.uint64)),
              Field(tag(TE_NAME_IID, VARINT), values=iid[tr.label[rows]], mask=begin)]
        for number, flows in ((TE_FLOW_IDS, tr.flow_out), (TE_TERMINATING_FLOW_IDS, tr.flow_in)):
            if flows is not None:
                f = flows[rows]
                has = begin & (f != 0)
                te.append(Field(tag(number, FIXED64), mask=has,  # fixed64 in the schema
                                raw=f.astype("<u8").view(np.uint8).reshape(-1, 8)))
                stats.flows += int(np.count_nonzero(has)) if number == TE_FLOW_IDS else 0
        yield encode(_event_rows(seq, delta, te), len(t)).tobytes()
    stats.slices += len(s)
    stats.tracks += 1


def _counter_track(c: CounterTrack, uuid: int, parent: int, seq: int, origin: int,
                   stats: Stats) -> Iterator[bytes]:
    t = c.time_ns - origin
    base = int(t[0])
    yield _track_head(uuid, parent, c.name, 1_000_000_000 + c.sort, seq, base, c)
    prev = base
    for a in range(0, len(t), BATCH):
        tt = t[a:a + BATCH]
        v = c.values[a:a + BATCH]
        delta = np.diff(tt, prepend=prev).astype(np.uint64)
        prev = int(tt[-1])
        if np.issubdtype(v.dtype, np.integer):
            value = Field(tag(TE_COUNTER_VALUE, VARINT), values=v.astype(np.int64).view(np.uint64))
        else:
            raw = v.astype("<f8").view(np.uint8).reshape(-1, 8)
            value = Field(tag(TE_DOUBLE_COUNTER_VALUE, FIXED64), raw=raw)
        te = [Field(field(TE_TYPE, TYPE_COUNTER)), value]
        yield encode(_event_rows(seq, delta, te), len(tt)).tobytes()
    stats.counter_values += len(t)
    stats.tracks += 1
