"""Wait for every process the command started, not only the command itself (Linux).

rls-prof makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``) while the
command runs, so descendants orphaned by their parent's exit (multiprocessing's
forkserver and resource tracker, daemonised helpers, workers their parent never waited
for) are re-parented to rls-prof instead of to init. After the command exits, rls-prof
reaps them until they are all gone or a deadline passes: they normally exit as soon as
their parent's pipes close. Reaping them also adds their CPU time to rls-prof's
``RUSAGE_CHILDREN``, so run.json's ``cpu_s`` covers the whole tree (launch.tree_cpu adds
the processes no one waits for). Elsewhere (no
``prctl``, no ``/proc``) only the command itself is waited for.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
DEFAULT_WAIT_S = 10.0
_POLL_S = 0.02


def set_subreaper(on: bool) -> bool:
    """Make this process a child subreaper (or stop being one); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _ppids() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command name) of every process visible in /proc."""
    out = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue  # exited meanwhile
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        lp, rp = stat.find("("), stat.rfind(")")
        fields = stat[rp + 2:].split()
        if len(fields) > 1 and fields[0] != "Z":
            out[int(name)] = (int(fields[1]), stat[lp + 1:rp])
        elif len(fields) > 1:
            out[int(name)] = (int(fields[1]), "")  # a zombie: ready to reap
    return out


def children(pid: int, exclude: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """Live or zombie children of ``pid`` (not in ``exclude``)."""
    return sorted(p for p, (pp, _) in _ppids().items() if pp == pid and p not in exclude)


def _cmdline(pid: int, comm: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
        line = " ".join(a.decode(errors="replace") for a in args if a)
    except OSError:
        line = ""
    return (line or comm)[:200]


@dataclass
class Descendants:
    """What :func:`reap` found after the command exited."""

    reaped: int = 0  # descendants reaped here (orphans re-parented to rls-prof)
    waited_s: float = 0.0
    still_running: list[dict[str, object]] = field(default_factory=list)  # pid, command
    pids: set[int] = field(default_factory=set)  # the reaped ones

    def as_json(self) -> dict[str, object]:
        return {"reaped": self.reaped, "waited_s": round(self.waited_s, 3),
                "still_running": self.still_running}


def reap(deadline_s: float, exclude: set[int],
         stop: Callable[[], bool] = lambda: False) -> Descendants:
    """Reap this process's children (other than ``exclude``, children it had before the
    command) until none is left, ``deadline_s`` has passed or ``stop()``; then list the
    descendants still running."""
    me = os.getpid()
    out = Descendants()
    t0 = time.monotonic()
    while True:
        kids = children(me, exclude)
        for pid in kids:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not ours after all, or reaped elsewhere
                exclude.add(pid)
                continue
            if done:
                out.reaped += 1
                out.pids.add(pid)
        if len(kids) == 0 or time.monotonic() - t0 >= deadline_s or stop():
            break
        time.sleep(_POLL_S)
    out.waited_s = time.monotonic() - t0
    table = _ppids()
    alive = [p for p in children(me, exclude) if table.get(p, (0, ""))[1]]
    seen = set(alive)
    while alive:  # the whole subtree still running, for the report
        pid = alive.pop(0)
        out.still_running.append({"pid": pid, "command": _cmdline(pid, table[pid][1])})
        for p, (pp, comm) in table.items():
            if pp == pid and comm and p not in seen:
                seen.add(p)
                alive.append(p)
    return out
