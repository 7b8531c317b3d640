"""The record layer of a trace file: the magic, then length-delimited ``Record`` messages
(proto/rlscope/trace.proto), a header first.

:func:`iter_records` yields the raw messages (memory-mapped, so memory stays bounded by
one record); :func:`iter_chunks` decodes a Python trace's event chunks into columnar
arrays. Both the whole-file reader and the streaming analysis read through these.
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlscope.errors import TraceError
from rlscope.trace import format as fmt
from rlscope.trace.data import Aggregates, EnvEvents, Events, Header, Progress, ThreadInfo

_MAX_RECORD = 1 << 30  # far above any chunk a writer produces


def _varint(buf: Any, pos: int, end: int) -> tuple[int, int] | None:
    """(value, next position), or None if the buffer ends inside the varint; raises
    ValueError for a varint longer than 10 bytes (not written by any writer)."""
    result = shift = 0
    while pos < end:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("overlong varint")
    return None


def iter_records(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """(offset, Record) of every intact record of a trace file, header first.

    A torn last record (the writer was killed) ends the iteration with
    ``(offset, None)``; a foreign or damaged file raises :class:`TraceError` with one line.
    """
    from rlscope.trace import messages  # imports protobuf; only reading needs it

    p = Path(path)
    try:
        f = open(p, "rb")  # noqa: SIM115 (closed by the with below)
    except OSError as e:
        raise TraceError(f"cannot read {p}: {e.strerror}") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if size < len(fmt.MAGIC):
            head = f.read()
            if fmt.MAGIC.startswith(head):
                raise TraceError(f"{p} is empty or truncated before its header; the process "
                                 "died as it started, delete the file")
            raise TraceError(f"{p} is not an rlscope trace (unknown file signature); "
                             "remove it from the trace directory")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            data = memoryview(m)
            try:
                if bytes(data[:len(fmt.MAGIC)]) != fmt.MAGIC:
                    raise TraceError(f"{p} is not an rlscope trace (unknown file "
                                     "signature); remove it from the trace directory")
                pos = len(fmt.MAGIC)
                while pos < size:
                    try:
                        got = _varint(m, pos, size)
                        if got is not None and got[0] > _MAX_RECORD:
                            raise ValueError("record too large")
                    except ValueError:
                        raise TraceError(f"{p} is corrupt: bad record length at offset "
                                         f"{pos}; the file was modified or damaged") from None
                    if got is None or got[1] + got[0] > size:
                        yield pos, None
                        return
                    n, start = got
                    try:
                        rec = messages.parse_record(data[start:start + n])
                    except Exception:
                        if start + n == size:
                            yield start, None
                            return
                        raise TraceError(f"{p} is corrupt: record at offset {start} does "
                                         "not parse; the file was modified or damaged"
                                         ) from None
                    yield start, rec
                    pos = start + n
            finally:
                data.release()


def torn_warning(path: Path, offset: int) -> str:
    lost = torn_bytes(path, offset)
    return (f"{path.name}: last record is torn ({lost:,} bytes at offset {offset}, the "
            "process was probably killed while writing it); skipped it, its events are lost")


def torn_bytes(path: Path, offset: int) -> int:
    """Bytes of a torn last record starting at ``offset``: what was lost."""
    try:
        return max(os.path.getsize(path) - offset, 0)
    except OSError:
        return 0


def dropped_warning(path: Path, dropped: int) -> str:
    return (f"{path.name}: {dropped} events were dropped because the recorder's memory "
            "bound was reached; raise it or flush more often")


def header_of(path: Path, rec: Any) -> Header:
    """The Header of a file's first record; checks it is one and its format version."""
    if rec is None or not rec.HasField("header"):
        raise TraceError(f"{path} has no header record; the file is truncated or not an "
                         "rlscope trace")
    h = rec.header
    if h.format_version != fmt.FORMAT_VERSION:
        raise TraceError(f"{path} has trace format version {h.format_version}, this rlscope "
                         f"reads version {fmt.FORMAT_VERSION}; use the matching rlscope")
    return Header(h.format_version, h.source, h.pid, h.ppid, h.host, h.process_name,
                  tuple(h.argv), fmt.ClockPair(h.clock.monotonic_ns, h.clock.realtime_ns,
                                               h.clock.uncertainty_ns),
                  h.recorder, h.rlscope_version)


def read_header(path: Path) -> tuple[Header, Any]:
    """(Header, the raw header message) of a trace file."""
    for _, rec in iter_records(path):
        return header_of(path, rec), rec.header
    raise TraceError(f"{path} has no header record; the file is truncated or not an "
                     "rlscope trace")


@dataclass
class Chunk:
    """One decoded event chunk of a Python trace: its events, progress arguments and the
    definitions it introduced."""

    sequence: int
    events: Events
    progress: Progress  # its PROGRESS events with their arguments
    env: EnvEvents  # its ENV_* events, the env index of each begin
    strings: dict[int, str]
    threads: list[ThreadInfo]
    metadata: dict[str, Any]
    dropped: int
    aggregates: Aggregates | None = None  # a bounded trace's rows in this chunk


_N_ARGS = np.zeros(256, np.int64)  # arguments each event kind carries in Chunk.args
for _kind, _n in fmt.KIND_ARGS.items():
    _N_ARGS[_kind] = _n
_HAS_ARGS = _N_ARGS > 0  # a bool table: one byte per event looked up, not eight
_IS_ENV = np.zeros(256, bool)
_IS_ENV[[fmt.ENV_STEP_BEGIN, fmt.ENV_STEP_END, fmt.ENV_RESET_BEGIN, fmt.ENV_RESET_END]] = True


def _split_args(path: Path, c: Any, ev: Events, args: np.ndarray) -> tuple[Progress, EnvEvents]:
    """Hand each event the arguments it carries (fmt.KIND_ARGS, in event order)."""
    has = np.flatnonzero(_HAS_ARGS[ev.kind])  # only the few events with arguments
    kind = ev.kind[has]
    per = _N_ARGS[kind]
    if int(per.sum()) != len(args):
        raise TraceError(f"{path} is corrupt: chunk {c.sequence} has {len(args)} event "
                         f"arguments for events that carry {int(per.sum())}")
    first = np.cumsum(per) - per  # offset of each such event's first argument
    p = kind == fmt.PROGRESS
    pi = has[p]
    progress = Progress(ev.time_ns[pi], ev.thread[pi], args[first[p]], args[first[p] + 1])
    e = np.flatnonzero(_IS_ENV[ev.kind])
    index = np.full(len(e), -1, np.int64)
    begins = np.searchsorted(has, e)  # position among the events with arguments
    with_arg = (begins < len(has)) & (has[np.minimum(begins, len(has) - 1)] == e) \
        if len(has) else np.zeros(len(e), bool)
    index[with_arg] = args[first[begins[with_arg]]]
    env = EnvEvents(ev.time_ns[e], ev.thread[e], ev.kind[e], ev.name[e], index)
    return progress, env


def _decode(path: Path, c: Any) -> Chunk:
    n = len(c.kind)
    if len(c.time_delta_ns) != n or len(c.thread) != n or len(c.name) != n:
        raise TraceError(f"{path} is corrupt: chunk {c.sequence} has columns of different "
                         "lengths")
    deltas = np.array(c.time_delta_ns, dtype=np.int64)
    if n:
        deltas[0] += c.base_time_ns
    events = Events(np.cumsum(deltas), np.array(c.thread, dtype=np.uint32),
                    np.array(c.kind, dtype=np.uint8), np.array(c.name, dtype=np.uint32))
    metadata: dict[str, Any] = {}
    for m in c.metadata:
        try:
            metadata[m.key] = json.loads(m.json_value)
        except ValueError:
            metadata[m.key] = m.json_value
    progress, env = _split_args(path, c, events, np.array(c.args, dtype=np.int64))
    return Chunk(int(c.sequence), events, progress, env, {s.id: s.value for s in c.strings},
                 [ThreadInfo(t.index, t.tid, t.name) for t in c.threads], metadata,
                 int(c.dropped_events), _aggregates(path, c))


def _aggregates(path: Path, c: Any) -> Aggregates | None:
    """The chunk's aggregate rows (None: it has none, as every chunk before budgets)."""
    if not len(c.agg_thread) and not len(c.count_thread) and not len(c.agg_states):
        return None
    rows = [np.array(getattr(c, f), dtype=np.int64) for f in
            ("agg_thread", "agg_gap", "agg_state", "agg_ns", "agg_calls", "agg_events")]
    counts = [np.array(getattr(c, f), dtype=np.int64) for f in
              ("count_thread", "count_gap", "count_kind", "count_n")]
    if len({len(x) for x in rows}) > 1 or len({len(x) for x in counts}) > 1:
        raise TraceError(f"{path} is corrupt: chunk {c.sequence} has aggregate columns of "
                         "different lengths")
    states = {int(s.id): (int(s.parent), int(s.kind), int(s.name)) for s in c.agg_states}
    until = np.array(c.agg_until_ns, dtype=np.int64)
    if len(until) != len(rows[0]):  # written before the field
        until = np.zeros(len(rows[0]), np.int64)
    thread, gap, state, ns, calls, events = rows
    c_thread, c_gap, c_kind, c_n = counts
    return Aggregates(states, thread, gap, state, ns, calls, events, c_thread, c_gap, c_kind,
                      c_n, until)


def iter_chunks(path: Path, warnings: list[str] | None = None,
                torn: list[int] | None = None) -> Iterator[Chunk]:
    """The decoded event chunks of a Python trace file, after its header. A torn last
    record ends the iteration and a chunk missing from the sequence is noted, each as a
    warning appended to ``warnings``; the torn record's size goes to ``torn``."""
    expected = 0
    for i, (pos, rec) in enumerate(iter_records(path)):
        if rec is None:
            if warnings is not None:
                warnings.append(torn_warning(path, pos))
            if torn is not None:
                torn.append(torn_bytes(path, pos))
            return
        if i == 0:
            continue
        if not rec.HasField("chunk"):
            raise TraceError(f"{path} is corrupt: a second header in the middle of the file")
        c = rec.chunk
        if c.sequence != expected and warnings is not None:
            warnings.append(f"{path.name}: chunk {expected} is missing (found "
                            f"{c.sequence}); events were lost")
        expected = c.sequence + 1
        yield _decode(path, c)


def decode_chunk(path: Path, rec: Any) -> Chunk:
    """A chunk record's content, decoded (for readers that parse the records
    themselves: rlscope.trace.tail reads growing files)."""
    return _decode(path, rec.chunk)


def varint(buf: Any, pos: int, end: int) -> tuple[int, int] | None:
    """A record's length prefix: (value, next position), None when ``buf`` ends
    inside it; ValueError for one no writer produces."""
    return _varint(buf, pos, end)


def string_table(strings: dict[int, str]) -> list[str]:
    """Strings by id (ids never defined read as ``<string N>``)."""
    n = max(strings) + 1 if strings else 1
    return [strings.get(i, "" if i == 0 else f"<string {i}>") for i in range(n)]
