"""The processes of a run, read straight from /proc (Linux): a command and its
descendants, including orphans re-parented to rls-prof (a child subreaper).

psutil's ``children(recursive=True)`` reads every process's stat on each call (~10 ms
for ~120 processes here, 10% of a core at 10 Hz); :class:`ProcessScanner` reads a new
pid's stat once to learn its parent and then only the run's own processes. Used by the
utilisation sampler (launch.sampler) and by the tree's CPU count (launch.tree_cpu).
"""

from __future__ import annotations

import os

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
TICK_NS = 1_000_000_000 // _CLK_TCK  # one clock tick of /proc's CPU times
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _read_runq(pid: int) -> int:
    """Cumulative ns the process's threads waited on a run queue (runnable, no core):
    /proc/<pid>/schedstat's second field; -1 when unavailable (no schedstats)."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def stat_fields(pid: int) -> list[bytes] | None:
    """/proc/<pid>/stat's fields after the command name (state, ppid, ...: proc(5)'s
    fields 3 onwards, so its field n is ``[n - 3]``); None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    fields = stat[stat.rfind(b")") + 2:].split()
    return fields if len(fields) >= 22 else None


def read_stat(pid: int) -> tuple[int, int, int, bool] | None:
    """(ppid, cumulative CPU ns, RSS bytes, zombie) of a process; None when gone."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    cpu = (int(fields[11]) + int(fields[12])) * TICK_NS  # utime + stime
    return int(fields[1]), cpu, int(fields[21]) * _PAGE, fields[0] == b"Z"


class ProcessScanner:
    """The processes of a run: descendants of ``me`` other than ``exclude`` (children it
    had before the command). Each tick lists /proc; a pid seen for the first time is read
    once for its parent; the run's processes are read every tick."""

    def __init__(self, me: int, exclude: set[int] | frozenset[int] = frozenset()) -> None:
        self.me = me
        self.exclude = set(exclude)
        self.parent: dict[int, int] = {}  # every pid seen: its parent at first sight
        self.run: set[int] = set()
        self.seen: set[int] = set()  # the run's processes ever seen

    def tick(self) -> list[tuple[int, int, int, int]]:
        """(pid, cumulative CPU ns, RSS bytes, cumulative run-queue wait ns or -1) of each
        live process of the run."""
        fresh = self.update()
        out = []
        for p in sorted(self.run):
            st = fresh.get(p) or read_stat(p)
            if st is None or st[3]:  # gone, or a zombie (its CPU time is final)
                continue
            out.append((p, st[1], st[2], _read_runq(p)))
        self.seen.update(r[0] for r in out)
        return out

    def update(self) -> dict[int, tuple[int, int, int, bool]]:
        """Brings :attr:`run` up to date (the run's processes, zombies included); returns
        the stat (read_stat) of the processes seen for the first time."""
        try:
            pids = {int(n) for n in os.listdir("/proc") if n.isdigit()}
        except OSError:
            return {}
        for gone in [p for p in self.parent if p not in pids]:
            del self.parent[gone]
            self.run.discard(gone)
        fresh: dict[int, tuple[int, int, int, bool]] = {}
        new = [p for p in pids if p not in self.parent]
        for p in new:
            st = read_stat(p)
            if st is not None:
                self.parent[p] = st[0]
                fresh[p] = st
        # A parent may be listed after its child: repeat until nothing changes.
        todo = [p for p in new if p in fresh]
        changed = True
        while changed and todo:
            changed = False
            rest = []
            for p in todo:
                pp = self.parent[p]
                if pp in self.run or (pp == self.me and p not in self.exclude):
                    self.run.add(p)
                    changed = True
                else:
                    rest.append(p)
            todo = rest
        return fresh
