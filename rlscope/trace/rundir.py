"""A run directory: the lock a live ``rls-prof`` holds on it, and what a run leaves in it.

``DIR/rlscope.lock`` is held for the whole of an ``rls-prof`` run, calibration included.
Two things make it: an advisory ``flock`` on the file, which the kernel releases however
the holder ends (crash, Ctrl-C, SIGTERM, SIGKILL), and the holder's identity written in
it (pid, the process's start time in clock ticks since boot, host, command, when), so
that a refusal can say who holds the directory, and a lock left by a holder that is gone
is recognised by its pid and start time even where ``flock`` does nothing (some network
file systems). A pid with another start time is a reused pid: the holder is gone.

The recording side (``rlscope.start``) imports this only when a lock file exists, so it
stays out of every profiled process's start-up.
"""

from __future__ import annotations

import errno
import os

from rlscope.trace import format as fmt

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

LOCK_FILE = fmt.LOCK_FILE

# What rlscope writes into a run directory (rls-prof, --calibrate, rls-analyze's
# defaults): ``--force`` clears exactly these, never anything else.
RUN_FILES = (fmt.RUN_FILE, fmt.RUN_FILE + ".tmp", "calibration.json", "costs.json",
             fmt.WINDOW_REQUEST_FILE,
             *(n + gz for n in fmt.TIMELINE_FILES.values() for gz in ("", ".gz")))
RUN_DIRS = ("calibration", "plots")


class Holder:
    """Who holds (or held) a run directory, as its lock file says."""

    __slots__ = ("command", "host", "pid", "since", "start_ticks", "tool")

    def __init__(self, pid: int, start_ticks: int | None, host: str, tool: str,
                 command: Sequence[str], since: str) -> None:
        self.pid, self.start_ticks, self.host = pid, start_ticks, host
        self.tool, self.command, self.since = tool, list(command), since

    def as_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "start_ticks": self.start_ticks, "host": self.host,
                "tool": self.tool, "command": self.command, "since": self.since}

    @staticmethod
    def from_json(d: Any) -> Holder | None:
        if not isinstance(d, dict) or not isinstance(d.get("pid"), int):
            return None
        ticks = d.get("start_ticks")
        cmd = d.get("command")
        return Holder(d["pid"], ticks if isinstance(ticks, int) else None,
                      str(d.get("host", "")), str(d.get("tool", "rls-prof")),
                      [str(c) for c in cmd] if isinstance(cmd, list) else [],
                      str(d.get("since", "")))

    def describe(self) -> str:
        """``rls-prof pid 123 on host, since ..., running: python train.py``"""
        from rlscope.trace.argv import shell_line

        where = f" on {self.host}" if self.host and self.host != fmt.machine_name() else ""
        cmd = shell_line(self.command, 80)
        return (f"{self.tool} pid {self.pid}{where}"
                + (f", since {self.since}" if self.since else "")
                + (f", running: {cmd}" if cmd else ""))

    def alive(self) -> bool:
        """Whether the holder is still running (on another host: assumed so, as it cannot
        be checked from here)."""
        if self.host and self.host != fmt.machine_name():
            return True
        if self.pid <= 0:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # exists, another user's
        stat = _proc_stat(self.pid)
        if stat is None:  # no /proc: the pid exists
            return True
        state, ticks = stat
        # A zombie (killed, not yet reaped by its parent) holds nothing any more.
        return state not in (b"Z", b"X", b"x") and (
            self.start_ticks is None or ticks == self.start_ticks)


class DirectoryInUse(Exception):
    """The directory is held by a live holder (``holder`` is None when it could not be
    read: another rls-prof is taking the lock at this very moment)."""

    def __init__(self, directory: str, holder: Holder | None) -> None:
        super().__init__(directory)
        self.directory, self.holder = directory, holder


def process_start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22):
    with the pid, it names one process, whatever pids are reused later. None where there
    is no /proc."""
    stat = _proc_stat(pid)
    return None if stat is None else stat[1]


def _proc_stat(pid: int) -> tuple[bytes, int] | None:
    """(state, start time in ticks) from ``/proc/PID/stat``, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        # The command name (field 2) is in parentheses and may hold spaces or ')'.
        fields = stat[stat.rindex(b")") + 2:].split()
        return fields[0], int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def read_holder(directory: str | os.PathLike[str]) -> Holder | None:
    """The holder named by DIR's lock file, or None (no lock, or not readable yet)."""
    try:
        with open(os.path.join(os.fspath(directory), LOCK_FILE), "rb") as f:
            return _parse(f.read())
    except OSError:
        return None


def live_holder(directory: str | os.PathLike[str]) -> Holder | None:
    """The live rls-prof holding DIR, or None: the lock's flock is held, or (where flock
    may do nothing) the process it names still runs. The rule :meth:`RunLock.acquire`
    applies."""
    path = os.path.join(os.fspath(directory), LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        held = _flock_held(fd)
        data = os.read(fd, 1 << 16)
    finally:
        os.close(fd)
    holder = _parse(data)
    if held:
        return holder or Holder(0, None, "", "rls-prof", [], "")
    return holder if holder is not None and holder.alive() else None


def _flock_held(fd: int) -> bool:
    """Whether another open file holds an exclusive flock on it (False also where flock
    does not work)."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def _parse(data: bytes) -> Holder | None:
    import json

    try:
        return Holder.from_json(json.loads(data.decode()))
    except ValueError:  # empty (being written) or damaged
        return None


class RunLock:
    """The lock on a run directory, held until :meth:`release` (or the process ends)."""

    def __init__(self, path: str, fd: int, stale: Holder | None) -> None:
        self.path, self._fd = path, fd
        # The holder the lock file named when it was taken over: one that ended without
        # releasing it (killed), or None.
        self.stale = stale

    @staticmethod
    def acquire(directory: str | os.PathLike[str], command: Sequence[str],
                tool: str = "rls-prof") -> RunLock:
        """Take DIR's lock (DIR must exist); :class:`DirectoryInUse` if a live process
        holds it. A lock whose holder is gone is taken over (``stale`` names it)."""
        import fcntl

        d = os.fspath(directory)
        path = os.path.join(d, LOCK_FILE)
        me = os.getpid()
        for _ in range(20):  # a retry only when a holder released it meanwhile
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                data = os.read(fd, 1 << 16)
                os.close(fd)
                raise DirectoryInUse(d, _parse(data)) from None
            except OSError as e:
                if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS,
                                   errno.EINVAL):
                    os.close(fd)
                    raise
                # No flock on this file system: the pid and start time decide alone.
            # A releasing holder unlinks the file before closing it: if this is such an
            # unlinked file, the lock is a new one at the same path.
            try:
                same = _same_file(os.fstat(fd), os.stat(path))
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            old = _parse(os.pread(fd, 1 << 16, 0))
            if old is not None and old.pid != me and old.alive():
                # flock said free, yet the holder runs: a file system where flock is a
                # no-op, or a holder on another host.
                os.close(fd)
                raise DirectoryInUse(d, old)
            _write_holder(fd, Holder(me, process_start_ticks(me), fmt.machine_name(), tool,
                                     command, _now_iso()))
            return RunLock(path, fd, old if old is not None and old.pid != me else None)
        raise DirectoryInUse(d, None)

    def release(self) -> None:
        """Remove the lock file, then drop the lock (a process waiting on this same file
        then finds it unlinked and takes a new one)."""
        if self._fd < 0:
            return
        try:
            if _same_file(os.fstat(self._fd), os.stat(self.path)):
                os.unlink(self.path)
        except OSError:
            pass
        os.close(self._fd)
        self._fd = -1

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _write_holder(fd: int, h: Holder) -> None:
    import json

    data = (json.dumps(h.as_json()) + "\n").encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def _now_iso() -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())


def host_directories(directory: str | os.PathLike[str]) -> list[str]:
    """Names of DIR's host directories (a run over several hosts: each writes into
    ``DIR/<host>/``, docs/multiprocess.md#several-hosts): the subdirectories, other than
    rlscope's own (calibration, plots), that hold trace files."""
    d = os.fspath(directory)
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return []
    out = []
    for n in names:
        p = os.path.join(d, n)
        if n in RUN_DIRS or n.startswith(".") or not os.path.isdir(p):
            continue
        try:
            if any(f.endswith(fmt.FILE_SUFFIX) for f in os.listdir(p)):
                out.append(n)
        except OSError:
            continue
    return out


def previous_run(directory: str | os.PathLike[str]) -> list[str]:
    """What a previous run left in DIR (names relative to it): trace files, host
    directories, run.json, utilisation and Python stack samples, calibration, plots,
    timeline. Empty when DIR does not exist."""
    d = os.fspath(directory)
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return []
    hosts = set(host_directories(d))
    return [n for n in names if n.endswith((fmt.FILE_SUFFIX, fmt.SAMPLES_SUFFIX, fmt.STACKS_SUFFIX))
            or n in RUN_FILES or n in hosts
            or (n in RUN_DIRS and os.path.isdir(os.path.join(d, n)))]


def live_writers(directory: str | os.PathLike[str]) -> list[tuple[int, str]]:
    """(pid, file) of the trace files in DIR that the process named in their name still
    has open: a live recording (a process rls-prof started that outlived it, or one that
    called ``rlscope.start(DIR)`` itself). Empty where there is no /proc."""
    d = os.path.realpath(os.fspath(directory))
    names = []
    for sub in ["", *host_directories(d)]:  # host directories' files named "host/file"
        try:
            names += sorted(os.path.join(sub, n) for n in os.listdir(os.path.join(d, sub))
                            if n.endswith(fmt.FILE_SUFFIX))
        except OSError:
            continue
    out = []
    for n in names:
        parts = os.path.basename(n).split(".")
        if len(parts) < 3 or not parts[1].isdigit():
            continue
        pid = int(parts[1])
        path = os.path.join(d, n)
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # gone, or another user's
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == path:
                    out.append((pid, n))
                    break
            except OSError:
                continue
    return out


def clear_previous_run(directory: str | os.PathLike[str]) -> None:
    """Delete what :func:`previous_run` lists; OSError names what could not be."""
    import shutil

    d = os.fspath(directory)
    hosts = set(host_directories(d))
    for n in previous_run(d):
        p = os.path.join(d, n)
        if n in hosts:  # only the traces: a host directory may hold the user's files too
            for f in os.listdir(p):
                if f.endswith(fmt.FILE_SUFFIX):
                    os.unlink(os.path.join(p, f))
            if not os.listdir(p):
                os.rmdir(p)
        elif os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)
