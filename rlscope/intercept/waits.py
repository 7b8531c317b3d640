"""Blocking standard-library calls as Waiting time (the thread is off the CPU).

Installed on ``os`` (always imported, so at once) and from there on each module as it is
imported: ``time``, ``select``, ``threading`` (usually at once), ``selectors``, ``queue``,
``socket``, ``subprocess`` and multiprocessing's ``connection``, ``synchronize``,
``resource_tracker`` (through the post-import hook: start-up imports none of them).

Only the outermost wait per thread is recorded (the wait category's own flag), so
``queue.Queue.get`` -> ``Condition.wait`` or ``Connection.recv`` -> ``_recv`` -> ``os.read``
count once, and a wait inside a backend or simulator call is the innermost category.
Not seen (docs/attribution.md): C-level blocking (``_thread.lock.acquire`` on a bare
``threading.Lock``/``RLock``, file objects' ``read``, ``select.poll().poll()`` and
``epoll`` objects used directly, blocking writes), and names bound before the hook ran.
Nor the waits of a library's plumbing threads (``_PLUMBING``: a pool's handler threads, a
``multiprocessing.Queue``'s feeder, a process pool executor's manager thread): the
program waits for their work on its own threads, where it is recorded.
"""

from __future__ import annotations

import functools
import os
import sys

from rlscope import libraries
from rlscope.intercept import importhook
from rlscope.intercept.patch import WAIT, Patcher, plain_wrappable, recorder_wrap

TYPE_CHECKING = False  # typing is for the type checker: every profiled process imports this
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from types import ModuleType
    from typing import Any

    from rlscope.intercept.patch import Nonblocking

# os: pipe/file reads and waiting for children. multiprocessing.connection binds
# ``_read = os.read`` as a default argument at its import, so os goes first.
_OS = ("read", "readv", "waitpid", "wait", "wait3", "wait4", "waitid")
_SELECT = ("select",)
_TIME = ("sleep",)
_THREADING = (("Condition", ("wait", "wait_for")), ("Event", ("wait",)),
              ("Thread", ("join",)), ("Semaphore", ("acquire", "__enter__")),
              ("Barrier", ("wait",)))
_SELECTORS = ("SelectSelector", "_PollLikeSelector", "EpollSelector", "DevpollSelector",
              "KqueueSelector")
# Queue.put blocks only on a bounded queue and is mostly its own Python: not wrapped.
_QUEUE = (("Queue", ("get", "join")),)
_SOCKET = ("recv", "recv_into", "recvfrom", "recvfrom_into", "recvmsg", "recvmsg_into",
           "accept")
_SUBPROCESS = (("Popen", ("wait", "communicate")),)
# Connection._recv is the read loop of recv/recv_bytes (unpickling is outside it); _poll
# and wait() block in a selector.
_CONNECTION = (("Connection", ("_recv", "_poll")),)
_SYNCHRONIZE = (("SemLock", ("__enter__",)), ("Condition", ("wait", "wait_for")),
                ("Event", ("wait",)), ("Barrier", ("wait",)))

# Calls that cannot block when an argument says so are not waits, and are not recorded
# (patch.Nonblocking: its position, self included for a method, its keyword, and 0 for
# a zero timeout or a false ``block``, else the flag bits): a pool's worker-handler
# thread polls its workers this way ~100 times per pool.map (os.waitpid with WNOHANG,
# Connection._poll(0)).
_WNOHANG = getattr(os, "WNOHANG", 0)
_TIMEOUT_1: Nonblocking = (1, "timeout", 0)
_NONBLOCKING: dict[str, Nonblocking] = {
    "os.waitpid": (1, None, _WNOHANG), "os.wait3": (0, None, _WNOHANG),
    "os.wait4": (1, None, _WNOHANG), "os.waitid": (2, None, _WNOHANG),
    "select.select": (3, None, 0),
    "threading.Condition.wait": _TIMEOUT_1, "threading.Condition.wait_for": (2, "timeout", 0),
    "threading.Event.wait": _TIMEOUT_1, "threading.Thread.join": _TIMEOUT_1,
    "threading.Semaphore.acquire": (1, "blocking", 0),
    "queue.Queue.get": (1, "block", 0),
    "subprocess.Popen.wait": _TIMEOUT_1,
    "multiprocessing.connection.Connection._poll": (1, None, 0),
    "multiprocessing.connection.wait": _TIMEOUT_1,
    "multiprocessing.synchronize.Condition.wait": _TIMEOUT_1,
    "multiprocessing.synchronize.Condition.wait_for": (2, "timeout", 0),
    "multiprocessing.synchronize.Event.wait": _TIMEOUT_1,
}
if not _WNOHANG:  # no such flag here: every wait for a child may block
    for _k in ("os.waitpid", "os.wait3", "os.wait4", "os.waitid"):
        del _NONBLOCKING[_k]


def _patch(p: Patcher, owner: Any, attr: str, name: str) -> int:
    return int(p.patch(owner, attr, WAIT, name, plain_wrappable, _NONBLOCKING.get(name)))


def _patch_all(p: Patcher, owner: Any, attrs: Iterable[str], prefix: str) -> int:
    return sum(_patch(p, owner, a, f"{prefix}.{a}") for a in attrs)


def _classes(module: ModuleType, p: Patcher, table: tuple[tuple[str, tuple[str, ...]], ...],
             prefix: str) -> int:
    n = 0
    for cls_name, methods in table:
        cls = getattr(module, cls_name, None)
        if isinstance(cls, type):
            n += _patch_all(p, cls, methods, f"{prefix}.{cls_name}")
    return n


def _make_methods_wrapper(original: Callable[[Any], None]) -> Callable[[Any], None]:
    """multiprocessing's SemLock binds its C ``acquire`` to each instance (at creation
    and unpickling): wrap it there, one wrapper per instance (not cached by the
    Patcher: instances come and go). Instances made while enabled keep their wrapper
    after ``disable()``; it is transparent and records nothing once recording stops."""
    def _make_methods(self: Any) -> None:
        original(self)
        acquire = getattr(self, "acquire", None)
        if acquire is not None:  # a bound method: acquire(block=True, timeout=None)
            self.acquire = recorder_wrap()(acquire, WAIT,
                                           f"multiprocessing.{type(self).__name__}.acquire",
                                           (0, "block", 0))
    return _make_methods


def install(os_module: ModuleType, p: Patcher) -> int:
    """Wrap ``os`` now and each other module as it is imported (counted as "wait")."""
    n = _patch_all(p, os_module, [a for a in _OS if hasattr(os_module, a)], "os")
    for name, fn in _LATER.items():
        importhook.when_imported(name, _counted(fn, p))
    return n


def _counted(fn: Callable[[ModuleType, Patcher], int], p: Patcher) -> Callable[[ModuleType], None]:
    def callback(module: ModuleType) -> None:
        libraries.count("wait", fn(module, p))
    return callback


def _time(m: ModuleType, p: Patcher) -> int:
    return _patch_all(p, m, _TIME, "time")


def _select(m: ModuleType, p: Patcher) -> int:
    return _patch_all(p, m, _SELECT, "select")


def _threading(m: ModuleType, p: Patcher) -> int:
    return _classes(m, p, _THREADING, "threading")


def _selectors(m: ModuleType, p: Patcher) -> int:
    n = 0
    for cls_name in _SELECTORS:
        cls = getattr(m, cls_name, None)
        if isinstance(cls, type) and "select" in vars(cls):
            n += int(p.patch(cls, "select", WAIT, f"selectors.{cls_name}.select",
                             plain_wrappable, _TIMEOUT_1))
    return n


def _queue(m: ModuleType, p: Patcher) -> int:
    return _classes(m, p, _QUEUE, "queue")


def _socket(m: ModuleType, p: Patcher) -> int:
    cls = getattr(m, "socket", None)
    if not isinstance(cls, type):
        return 0
    # recv* are C methods of _socket.socket, set on the Python subclass (undo deletes).
    return _patch_all(p, cls, [a for a in _SOCKET if hasattr(cls, a)], "socket.socket")


def _subprocess(m: ModuleType, p: Patcher) -> int:
    return _classes(m, p, _SUBPROCESS, "subprocess")


def _connection(m: ModuleType, p: Patcher) -> int:
    n = _classes(m, p, _CONNECTION, "multiprocessing.connection")
    return n + _patch(p, m, "wait", "multiprocessing.connection.wait")


def _synchronize(m: ModuleType, p: Patcher) -> int:
    n = _classes(m, p, _SYNCHRONIZE, "multiprocessing.synchronize")
    sem = getattr(m, "SemLock", None)
    original = vars(sem).get("_make_methods") if isinstance(sem, type) else None
    if original is not None:
        p.replace(sem, "_make_methods", _make_methods_wrapper(original))
        n += 1
    return n


def _resource_tracker(m: ModuleType, p: Patcher) -> int:
    # The tracker process's main loop blocks reading its pipe line by line in C
    # (``for line in f``), which no wrapper sees; its own work is negligible, so its
    # main function is one wait.
    return p.patch(m, "main", WAIT, "multiprocessing.resource_tracker.main", plain_wrappable)


# Threads that are a library's plumbing: their waits (a pool's worker handler polls its
# workers ~20 times per ``pool.map``; the result handler reads each result; a queue's
# feeder waits for each put) are not the program's, which waits for results on its own
# thread. Their waits are quiet from the thread's start (the recorders' quiet_waits).
_PLUMBING = {
    "multiprocessing.pool": (("Pool", ("_handle_workers", "_handle_tasks", "_handle_results")),),
    "multiprocessing.queues": (("Queue", ("_feed",)),),
    "concurrent.futures.process": (("_ExecutorManagerThread", ("run",)),),
}


def quiet_waits() -> None:
    """This thread's waits are never recorded, by either recorder (one whose module is
    not loaded has no wrappers to quiet)."""
    for name in ("rlscope._native", "rlscope.recorder.pyrecorder"):
        recorder = sys.modules.get(name)
        if recorder is not None:
            recorder.quiet_waits()


def _quieted(raw: Any) -> Any:
    """``raw`` (a function, or a static or class method, from a class's dict) made to
    quiet its thread's waits first."""
    kind = type(raw) if isinstance(raw, (staticmethod, classmethod)) else None
    func = raw.__func__ if kind is not None else raw

    @functools.wraps(func)
    def quiet(*args: Any, **kwargs: Any) -> Any:
        quiet_waits()
        return func(*args, **kwargs)

    return quiet if kind is None else kind(quiet)


def _plumbing(module_name: str) -> Callable[[ModuleType, Patcher], int]:
    def install_quiet(m: ModuleType, p: Patcher) -> int:
        n = 0
        for cls_name, attrs in _PLUMBING[module_name]:
            cls = getattr(m, cls_name, None)
            if not isinstance(cls, type):
                continue
            for attr in attrs:
                raw = vars(cls).get(attr)
                if raw is not None and callable(getattr(raw, "__func__", raw)):
                    p.replace(cls, attr, _quieted(raw))
                    n += 1
        return n
    return install_quiet


_LATER: dict[str, Callable[[ModuleType, Patcher], int]] = {
    "time": _time, "select": _select, "threading": _threading, "selectors": _selectors,
    "queue": _queue, "socket": _socket, "subprocess": _subprocess,
    "multiprocessing.connection": _connection,
    "multiprocessing.synchronize": _synchronize,
    "multiprocessing.resource_tracker": _resource_tracker,
    **{name: _plumbing(name) for name in _PLUMBING},
}
