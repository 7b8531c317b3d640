"""CPU time of a command's whole process tree: run.json's ``cpu_s``, and the same measure
of calibration's runs without rlscope, so that the two compare like for like.

Most of it is ``RUSAGE_CHILDREN``: the CPU of every descendant that was waited for, by
its parent or, orphaned, by rls-prof as a child subreaper (launch.descendants). A process
whose parent ignores SIGCHLD is reaped by the kernel instead, and its CPU reaches no one's
``RUSAGE_CHILDREN``. Ray's raylet does this, so a Ray job's workers (most of its CPU) were
missing: 2.1-2.3 s counted of a job using 5.3-5.7 s. :class:`TreeCpuCounter` therefore
reads /proc every tick for the run's processes whose parent ignores SIGCHLD and keeps each
one's last reading (its own CPU and that of its children it waited for); those are added.
What such a process uses after the last tick before it exits is missed (at most a tick of
its CPU). Processes reaped by rls-prof itself (their ignoring parent died first) count
once, by ``RUSAGE_CHILDREN``.
"""

from __future__ import annotations

import resource
import signal
import threading
from dataclasses import dataclass

from rlscope.launch.proctree import TICK_NS, ProcessScanner, stat_fields

TICK_S = 0.1
_SIGCHLD_BIT = 1 << (int(signal.SIGCHLD) - 1)  # in /proc/<pid>/status's SigIgn mask


def children_cpu_s() -> float:
    """User + system CPU seconds of this process's children that were waited for."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def ignores_sigchld(pid: int) -> bool:
    """Whether ``pid`` ignores SIGCHLD (its children are reaped by the kernel)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"SigIgn:"):
                    return bool(int(line.split()[1], 16) & _SIGCHLD_BIT)
    except (OSError, ValueError, IndexError):
        pass
    return False


@dataclass(frozen=True)
class TreeCpu:
    """The tree's CPU seconds, and the part of them read from /proc: processes whose
    parent ignored SIGCHLD (``unreaped``: how many)."""

    cpu_s: float
    unreaped_s: float = 0.0
    unreaped: int = 0


class TreeCpuCounter:
    """Counts the CPU of the processes this process starts from :meth:`start` to
    :meth:`stop`. ``exclude``: children it had before (not the run's)."""

    def __init__(self, me: int, exclude: set[int] | frozenset[int] = frozenset(),
                 tick_s: float = TICK_S) -> None:
        self._scanner = ProcessScanner(me, exclude)
        self._tick_s = tick_s
        self._last: dict[int, int] = {}  # pid -> CPU ns, for processes reaped by the kernel
        self._c0 = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._c0 = children_cpu_s()
        self._thread = threading.Thread(target=self._loop, name="rlscope-tree-cpu",
                                        daemon=True)
        self._thread.start()

    def stop(self, reaped: set[int] | frozenset[int] = frozenset()) -> TreeCpu:
        """The count, once every process that will be waited for has been. ``reaped``:
        pids rls-prof reaped itself (already in ``RUSAGE_CHILDREN``)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.tick()
        extra = {p: ns for p, ns in self._last.items() if p not in reaped}
        unreaped_s = sum(extra.values()) / 1e9
        return TreeCpu(children_cpu_s() - self._c0 + unreaped_s, unreaped_s, len(extra))

    def tick(self) -> None:
        """Read the run's processes once (the thread does this every ``tick_s``)."""
        parents: dict[int, bool] = {}
        self._scanner.update()
        for pid in self._scanner.run:
            fields = stat_fields(pid)
            if fields is None or fields[0] == b"Z":  # gone or final: the last reading stands
                continue
            ppid = int(fields[1])
            if ppid not in parents:
                parents[ppid] = ignores_sigchld(ppid)
            if parents[ppid]:  # utime + stime + cutime + cstime
                self._last[pid] = sum(int(x) for x in fields[11:15]) * TICK_NS
            else:  # waited for by its (new) parent, or by rls-prof
                self._last.pop(pid, None)

    def _loop(self) -> None:
        while True:
            self.tick()
            if self._stop.wait(self._tick_s):
                break
