"""Trace files that stand for no process of their own: the header-only file a forked
child leaves when it execs another program before its first flush (a pid with a stub
and the real program's file would otherwise show twice). Recording no longer writes
them for ``subprocess`` children (rlscope.annotate); older traces still have them."""

from __future__ import annotations

from pathlib import Path

from rlscope.trace import format as fmt
from rlscope.trace.data import Header
from rlscope.trace.records import header_of, iter_records

_SMALL = 1 << 16  # a header-only file is far smaller


def _pid_of(path: Path) -> int | None:
    """The pid in ``<source>.<pid>[.<n>].rlscope``."""
    parts = path.name[:-len(fmt.FILE_SUFFIX)].split(".")
    return int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else None


def _header(path: Path) -> tuple[Header, bool]:
    """The file's header, and whether nothing follows it."""
    records = iter_records(path)  # a generator: closed (the file too) when dropped here
    _, rec = next(records)
    return header_of(path, rec), next(records, None) is None


def without_exec_stubs(files: list[Path]) -> list[Path]:
    """``files`` less the header-only ones whose pid (on the same host) has a trace file
    that started at or after them: the program the process exec'd."""
    by_pid: dict[int, list[Path]] = {}
    for f in files:
        pid = _pid_of(f)
        if pid is not None:
            by_pid.setdefault(pid, []).append(f)
    stubs: set[Path] = set()
    for group in by_pid.values():
        if len(group) < 2 or not any(f.stat().st_size < _SMALL for f in group):
            continue
        heads = [(f, *_header(f)) for f in group]
        for f, h, only in heads:
            if only and any(g != f and hg.host == h.host and hg.pid == h.pid
                            and hg.source == h.source
                            and hg.clock.monotonic_ns >= h.clock.monotonic_ns
                            for g, hg, _ in heads):
                stubs.add(f)
    return [f for f in files if f not in stubs]
