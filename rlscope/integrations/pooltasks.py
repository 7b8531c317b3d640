"""Pool and executor tasks: each item a ``multiprocessing.Pool`` (or its ``ThreadPool``)
or ``concurrent.futures.ProcessPoolExecutor`` runs, recorded in the worker (process or
thread) as an operation named after the function, with the item's index in the call
(docs/multiprocess.md#pools). Not ``ThreadPoolExecutor``: libraries use it for their own
work (Ray's services, gRPC, asyncio), which would fill reports with their tasks.

- **Where.** The submitting process wraps the function in a :class:`Task` (it pickles by
  reference, so it reaches workers started by fork, forkserver and spawn alike) and, for
  the mapping calls, numbers the items by enumerating the iterable: ``Pool.map``,
  ``map_async``, ``starmap``, ``starmap_async`` (through ``Pool._map_async``), ``imap``,
  ``imap_unordered`` and ``ProcessPoolExecutor.map`` give each item its index in the
  iterable; ``Pool.apply_async`` (``apply``) and ``ProcessPoolExecutor.submit`` give
  each call the submitting process's running count of such calls.
- **Chunks.** Each item is recorded, also when a task carries a chunk of them
  (``chunksize`` > 1): the worker runs a chunk's items one by one, and the :class:`Task`
  wraps each call.
- **What.** In the worker, each item is an operation ``task:<qualname>`` (the function's
  ``__qualname__``; a ``functools.partial``'s function), and one metadata record
  ``rlscope.task:<n>`` = ``[qualname, call, index, begin_ns, end_ns, tid, by,
  submitted_ns]`` (format.META_TASK_PREFIX; ``call``: the mapping call's number in the
  submitting process, 0 for apply_async/submit; ``tid``: the OS thread that ran it;
  ``by``: the submitting process's pid; ``submitted_ns``: when it made the call). The
  wait for the next task (the worker's read of its task queue) is outside every task:
  Waiting (rlscope.intercept.waits), not a task's.
- **Who waits.** The submitting process records ``rlscope.pool_tasks`` once
  (format.META_POOL_TASKS): overhead correction shortens its waits for results by what
  the workers' book-keeping added to them (rlscope.analysis.overhead.task_waits).

Nothing changes while no recording is active in the submitting process; a worker that
is not recording runs the function unrecorded.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
import time

from rlscope import annotate
from rlscope.integrations import wrap_method
from rlscope.trace import format as fmt

TYPE_CHECKING = False  # typing is for the type checker: most programs import multiprocessing
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from types import ModuleType
    from typing import Any

    from rlscope.intercept.patch import Patcher

# How a Task finds the item's index and the function's arguments in what it is called with.
ITEM = 0  # f((index, item)): Pool.map, imap (item) -> fn(item)
STAR = 1  # f(index, args): Pool.starmap -> fn(*args)
COUNTED = 2  # f(index, *args): ProcessPoolExecutor.map -> fn(*args)
FIXED = 3  # f(*args, **kwargs), the index fixed at submission: apply_async, submit

_calls = itertools.count(1)  # mapping calls made in this process
_singles = itertools.count(0)  # apply_async / submit calls made in this process
_done = itertools.count(0)  # tasks run in this process (the metadata keys)
_FLAG = "_rlscope_tasks"


def task_name(fn: Any) -> str:
    """The name a task's operation carries: the function's qualified name."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__qualname__", None)
    if not isinstance(name, str):
        name = type(fn).__qualname__
    return name


class Task:
    """A pool's function, recording each call as an operation ``task:<name>`` with the
    item's index (see the module's docstring for the four calling modes)."""

    __slots__ = ("_blob", "_head", "_tail", "by", "call", "fn", "index", "mode", "name",
                 "submitted")

    def __init__(self, fn: Callable[..., Any], mode: int, call: int,
                 index: int = -1) -> None:
        self.fn, self.mode, self.call, self.index = fn, mode, call, index
        self.name = task_name(fn)
        self.by, self.submitted = os.getpid(), time.perf_counter_ns()
        self._blob: bytes | None = None
        self._head = self._tail = ""
        _announce()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        mode = self.mode
        if mode == ITEM:
            index, item = args[0]
            args = (item,)
        elif mode == STAR:
            index, args = args[0], tuple(args[1])
        elif mode == COUNTED:
            index, args = args[0], args[1:]
        else:
            index = self.index
        rec = annotate.active_recorder()
        if rec is None:
            return self.fn(*args, **kwargs)
        begin = time.perf_counter_ns()  # CLOCK_MONOTONIC, the recorders' clock
        try:
            with rec.operation("task:" + self.name):
                return self.fn(*args, **kwargs)
        finally:
            self._record(rec, index, begin, time.perf_counter_ns())

    def _record(self, rec: Any, index: int, begin: int, end: int) -> None:
        """The task's metadata record (format.META_TASK_PREFIX); the parts that do not
        change from item to item are made once."""
        try:
            if not self._head:
                self._head = f"[{_json_str(self.name)}, {int(self.call)}, "
                self._tail = f", {int(self.by)}, {int(self.submitted)}]"
            rec.metadata(f"{fmt.META_TASK_PREFIX}{next(_done)}",
                         f"{self._head}{int(index)}, {begin}, {end}, "
                         f"{threading.get_native_id()}{self._tail}")
        except Exception:  # never fail the user's task over its record
            pass

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent with every job: pickled once per call, unpickled once per worker (_task_of).
        blob = self._blob
        if blob is None:
            import pickle

            blob = self._blob = pickle.dumps((self.fn, self.mode, self.call, self.index,
                                              self.name, self.by, self.submitted))
        return (_task_of, (blob,))

    def __repr__(self) -> str:
        return f"<rlscope task {self.name} (call {self.call})>"


def _json_str(s: str) -> str:
    if s.isascii() and '"' not in s and "\\" not in s and s.isprintable():
        return f'"{s}"'  # a qualified name: no json import in the worker
    import json

    return json.dumps(s)


_received: dict[bytes, Task] = {}  # in a worker: the tasks unpickled, by their bytes


def _task_of(blob: bytes) -> Task:
    """The Task pickled as ``blob`` (Task.__reduce__), unpickled once per process."""
    task = _received.get(blob)
    if task is None:
        import pickle

        fn, mode, call, index, name, by, submitted = pickle.loads(blob)
        task = Task.__new__(Task)
        task.fn, task.mode, task.call, task.index, task.name = fn, mode, call, index, name
        task.by, task.submitted, task._blob = by, submitted, blob
        task._head = task._tail = ""
        if len(_received) >= 1024:  # apply_async makes one per call: keep it bounded
            _received.clear()
        _received[blob] = task
    return task


_announced: list[Any] = [None]  # the recording this process last said it submits tasks in


def _announce() -> None:
    """Says once per recording that this process hands tasks to a pool (the Task is made
    only while one records)."""
    rec = annotate.active_recorder()
    key = annotate.recording_key()
    if rec is None or _announced[0] == key:
        return
    _announced[0] = key
    try:
        rec.metadata(fmt.META_POOL_TASKS, "1")
    except Exception:
        pass


class _Enumerated:
    """``enumerate(iterable)`` that keeps ``len`` where the iterable has one (Pool's
    chunk size is computed from it; without it Pool makes a list, as it would have)."""

    __slots__ = ("iterable",)

    def __init__(self, iterable: Iterable[Any]) -> None:
        self.iterable = iterable

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        return iter(enumerate(self.iterable))

    def __len__(self) -> int:
        return len(self.iterable)  # type: ignore[arg-type]


def _enumerated(iterable: Iterable[Any]) -> Iterable[Any]:
    return _Enumerated(iterable) if hasattr(iterable, "__len__") else enumerate(iterable)


# -- multiprocessing.Pool, in the submitting process -----------------------------------

def _map_async(orig: Callable[..., Any], starmapstar: Any) -> Callable[..., Any]:
    @functools.wraps(orig)
    def _map_async(self: Any, func: Any, iterable: Any, mapper: Any, *args: Any,
                   **kwargs: Any) -> Any:
        if annotate.active_recorder() is None or isinstance(func, Task):
            return orig(self, func, iterable, mapper, *args, **kwargs)
        task = Task(func, STAR if mapper is starmapstar else ITEM, next(_calls))
        return orig(self, task, _enumerated(iterable), mapper, *args, **kwargs)

    return _map_async


def _imap(orig: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(orig)
    def imap(self: Any, func: Any, iterable: Any, *args: Any, **kwargs: Any) -> Any:
        if annotate.active_recorder() is None or isinstance(func, Task):
            return orig(self, func, iterable, *args, **kwargs)
        return orig(self, Task(func, ITEM, next(_calls)), enumerate(iterable), *args,
                    **kwargs)

    return imap


def _single(orig: Callable[..., Any]) -> Callable[..., Any]:
    """apply_async / submit: the function is the first argument after self (or
    ``func=``: Pool.apply_async's parameter can be given by keyword)."""

    @functools.wraps(orig)
    def submit(self: Any, *args: Any, **kwargs: Any) -> Any:
        keyword = not args and "func" in kwargs
        fn = kwargs["func"] if keyword else args[0] if args else None
        if (fn is None or annotate.active_recorder() is None or isinstance(fn, Task)
                or (isinstance(fn, functools.partial) and fn.args
                    and isinstance(fn.args[0], Task))):  # an executor.map chunk
            return orig(self, *args, **kwargs)
        task = Task(fn, FIXED, 0, next(_singles))
        if keyword:
            return orig(self, **dict(kwargs, func=task))
        return orig(self, task, *args[1:], **kwargs)

    return submit


def install_pool(pool: ModuleType, p: Patcher) -> int:
    cls = getattr(pool, "Pool", None)
    if not isinstance(cls, type):
        return 0
    n = wrap_method(p, cls, "_map_async",
                    lambda f: _map_async(f, getattr(pool, "starmapstar", None)), _FLAG)
    for attr in ("imap", "imap_unordered"):
        n += wrap_method(p, cls, attr, _imap, _FLAG)
    return n + wrap_method(p, cls, "apply_async", _single, _FLAG)


# -- concurrent.futures.ProcessPoolExecutor --------------------------------------------

def _executor_map(orig: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(orig)
    def map(self: Any, fn: Any, *iterables: Any, **kwargs: Any) -> Any:
        if annotate.active_recorder() is None or not iterables or isinstance(fn, Task):
            return orig(self, fn, *iterables, **kwargs)
        return orig(self, Task(fn, COUNTED, next(_calls)), itertools.count(), *iterables,
                    **kwargs)

    return map


def install_executor(process: ModuleType, p: Patcher) -> int:
    cls = getattr(process, "ProcessPoolExecutor", None)
    if not isinstance(cls, type):
        return 0
    return (wrap_method(p, cls, "map", _executor_map, _FLAG)
            + wrap_method(p, cls, "submit", _single, _FLAG))
