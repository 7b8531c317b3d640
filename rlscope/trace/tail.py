"""Incremental reading of files that are still being written (the live view): each
:meth:`TailFile.poll` reads only the bytes appended since the last one and returns the
complete records in them; a record not yet whole is left for the next poll, so a file
caught mid-write is never an error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlscope.errors import TraceError
from rlscope.trace import format as fmt
from rlscope.trace.data import Header
from rlscope.trace.records import Chunk, decode_chunk, header_of, varint

MAX_READ = 64 << 20  # bytes read per poll at most: a long run is caught up over polls


class TailFile:
    """A growing trace (or samples) file, read from where the last poll stopped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0  # the first byte not yet parsed
        self.header: Header | None = None

    def poll(self) -> list[Any]:
        """The complete records appended since the last poll (the header is taken into
        :attr:`header`, not returned)."""
        from rlscope.trace import messages  # imports protobuf: only readers need it

        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read(MAX_READ)
        except OSError as e:
            raise TraceError(f"cannot read {self.path}: {e.strerror}") from None
        pos = 0
        out: list[Any] = []
        if self.offset == 0:
            if len(data) < len(fmt.MAGIC):
                return out  # the file is being created
            if data[:len(fmt.MAGIC)] != fmt.MAGIC:
                raise TraceError(f"{self.path} is not an rlscope trace (unknown file "
                                 "signature)")
            pos = len(fmt.MAGIC)
        while pos < len(data):
            try:
                got = varint(data, pos, len(data))
            except ValueError:
                raise TraceError(f"{self.path} is corrupt at offset {self.offset + pos}"
                                 ) from None
            if got is None or got[1] + got[0] > len(data):
                break  # the rest of the record is still being written
            n, start = got
            rec = messages.parse_record(data[start:start + n])
            pos = start + n
            if self.header is None:
                self.header = header_of(self.path, rec)
                continue
            out.append(rec)
        self.offset += pos
        return out


def chunks(tail: TailFile, records: list[Any]) -> list[Chunk]:
    """The event chunks among a Python trace's new records, decoded."""
    return [decode_chunk(tail.path, r) for r in records if r.HasField("chunk")]


@dataclass
class ProcSamples:
    """rls-prof's per-process samples taken so far: (time, pid, cumulative CPU ns, RSS)."""

    time_ns: list[np.ndarray] = field(default_factory=list)
    pid: list[np.ndarray] = field(default_factory=list)
    cpu_ns: list[np.ndarray] = field(default_factory=list)
    rss: list[np.ndarray] = field(default_factory=list)
    interval_ns: int = 0
    # The GPUs' last NVML sample: index -> (time, utilisation %, memory used bytes).
    gpus: dict[int, tuple[int, float, int]] = field(default_factory=dict)

    def add(self, records: list[Any]) -> None:
        for r in records:
            if not r.HasField("sample_chunk"):
                continue
            c = r.sample_chunk
            self.interval_ns = int(c.interval_ns) or self.interval_ns
            g = np.array(c.gpu_time_delta_ns, np.int64)
            if len(g):
                g[0] += c.gpu_base_ns
                for t, i, u, m in zip(np.cumsum(g).tolist(), c.gpu_index, c.gpu_util_pct,
                                      c.gpu_memory_used_bytes, strict=True):
                    if t >= self.gpus.get(int(i), (-1, 0.0, 0))[0]:
                        self.gpus[int(i)] = (t, float(u), int(m))
            d = np.array(c.proc_time_delta_ns, np.int64)
            if not len(d):
                continue
            d[0] += c.proc_base_ns
            self.time_ns.append(np.cumsum(d))
            self.pid.append(np.array(c.proc_pid, np.int64))
            self.cpu_ns.append(np.array(c.proc_cpu_ns, np.int64))
            self.rss.append(np.array(c.proc_rss_bytes, np.int64))
        self._compact()

    def _compact(self) -> None:
        """Keep the last two samples of each process: all a rate needs."""
        if len(self.time_ns) <= 1:
            return
        t, p, c, m = (np.concatenate(x) for x in (self.time_ns, self.pid, self.cpu_ns,
                                                   self.rss))
        o = np.lexsort((t, p))
        t, p, c, m = t[o], p[o], c[o], m[o]
        last2 = np.r_[p[2:] != p[:-2], True, True] if len(p) > 2 else np.ones(len(p), bool)
        self.time_ns, self.pid, self.cpu_ns, self.rss = ([x[last2]] for x in (t, p, c, m))

    def cpu_pct(self) -> dict[int, tuple[float, int]]:
        """Per pid: CPU % of one core between its last two samples, and its RSS bytes."""
        self._compact()
        if not self.time_ns:
            return {}
        t, p, c, m = (x[0] for x in (self.time_ns, self.pid, self.cpu_ns, self.rss))
        out: dict[int, tuple[float, int]] = {}
        for i in range(1, len(p)):
            if p[i] == p[i - 1] and t[i] > t[i - 1]:
                out[int(p[i])] = (100.0 * (c[i] - c[i - 1]) / (t[i] - t[i - 1]), int(m[i]))
        return out


def size_of(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
