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
import time
import types

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

    __slots__ = ("_head", "_json", "_op", "_tail", "by", "call", "fn", "index", "mode",
                 "name", "submitted")

    def __init__(self, fn: Callable[..., Any], mode: int, call: int,
                 index: int = -1, counted: bool = True) -> None:
        self.fn, self.mode, self.call, self.index = fn, mode, call, index
        self.name, self._op, self._json = _names(fn)
        self._head = self._tail = ""
        self.by, self.submitted = annotate.recording_key()[0], time.perf_counter_ns()
        _submitted(counted)

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
        if not self._head:  # the record's parts that do not change from item to item
            self._head = f"[{self._json}, {self.call}, "
            self._tail = f", {self.by}, {self.submitted}]"
        # The call inside its operation, then its record (format.META_TASK_PREFIX), in
        # one recorder call (in a tight loop 0.6 µs, against 1.7 done here in Python).
        return rec.run_task(self._op, self._head, self._tail, index, self.fn, args,
                            kwargs or None)

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent with every job: the function's part pickled once per function where that
        # cannot go stale (a plain function pickles by name), the call's part as ints.
        return (_task_of, (_fn_blob(self), self.call, self.index, self.by, self.submitted))

    def __repr__(self) -> str:
        return f"<rlscope task {self.name} (call {self.call})>"


def _json_str(s: str) -> str:
    if s.isascii() and '"' not in s and "\\" not in s and s.isprintable():
        return f'"{s}"'  # a qualified name: no json import in the worker
    import json

    return json.dumps(s)


_STATELESS = (types.FunctionType, types.BuiltinFunctionType)  # pickled by name
# id(fn) -> (fn, its names, its pickled part by mode), for plain functions (the entry
# holds fn: its id is not reused while the entry stands).
_known: dict[int, tuple[Any, tuple[str, str, str], dict[int, bytes]]] = {}


def _names(fn: Any) -> tuple[str, str, str]:
    """A task's name, its operation's and the name as JSON; kept per plain function."""
    hit = _known.get(id(fn))
    if hit is not None and hit[0] is fn:
        return hit[1]
    name = task_name(fn)
    names = (name, "task:" + name, _json_str(name))
    if type(fn) in _STATELESS:
        if len(_known) >= 256:
            _known.clear()
        _known[id(fn)] = (fn, names, {})
    return names


def _fn_blob(task: Task) -> bytes:
    """What of ``task`` depends on its function only, pickled; kept per plain function
    (a partial or a bound method carries state that may change between calls: pickled
    each time, as the pool itself would). The names are made again in the worker."""
    import pickle

    fn, mode = task.fn, task.mode
    hit = _known.get(id(fn)) if type(fn) in _STATELESS else None
    if hit is None or hit[0] is not fn:
        return pickle.dumps((fn, mode))
    blob = hit[2].get(mode)
    if blob is None:
        blob = hit[2][mode] = pickle.dumps((fn, mode))
    return blob


# In a worker: what Task.__reduce__ sent of each function (_fn_blob), by its bytes.
_received: dict[bytes, tuple[Any, int, str, str, str]] = {}
_last: list[Any] = [None, None]  # the last job's arguments and its Task (a call's chunks)


def _task_of(blob: bytes, call: int, index: int, by: int, submitted: int) -> Task:
    """The Task a job carries (Task.__reduce__); its function unpickled once per process."""
    key = (blob, call, index, by, submitted)
    if _last[0] == key:
        return _last[1]
    fn = _received.get(blob)
    if fn is None:
        import pickle

        f, mode = pickle.loads(blob)
        fn = (f, mode, *_names(f))
        if len(_received) >= 1024:  # partials and methods: one per call, keep it bounded
            _received.clear()
        _received[blob] = fn
    task = Task.__new__(Task)
    task.fn, task.mode, task.name, task._op, task._json = fn
    task.call, task.index, task.by, task.submitted = call, index, by, submitted
    task._head = task._tail = ""
    _last[0], _last[1] = key, task
    return task


# The recording this process last submitted tasks in, and its submissions to process
# pools there (each one's Task made and pickled: the cost model's pool_call kind).
_made: list[Any] = [None, 0]


def _submitted(counted: bool) -> None:
    """Says once per recording that this process hands tasks to a pool (the Task is made
    only while one records), and counts the submissions to process pools."""
    rec = annotate.active_recorder()
    if rec is None:
        return
    key = annotate.recording_key()
    if _made[0] != key:
        _made[0], _made[1] = key, 0
        try:
            rec.metadata(fmt.META_POOL_TASKS, "1")
        except Exception:
            pass
    if counted:
        _made[1] += 1


def _publish_at_stop(rec: Any) -> None:
    if _made[0] == annotate.recording_key() and _made[1]:
        rec.metadata(fmt.META_POOL_CALLS, str(int(_made[1])))
    _made[0], _made[1] = None, 0


annotate.before_stop(_publish_at_stop)


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

def _map_async(orig: Callable[..., Any], starmapstar: Any, threads: Any) -> Callable[..., Any]:
    """``threads``: the module's ThreadPool (its tasks are not sent to other processes)."""

    @functools.wraps(orig)
    def _map_async(self: Any, func: Any, iterable: Any, mapper: Any, *args: Any,
                   **kwargs: Any) -> Any:
        if annotate.active_recorder() is None or isinstance(func, Task):
            return orig(self, func, iterable, mapper, *args, **kwargs)
        task = Task(func, STAR if mapper is starmapstar else ITEM, next(_calls),
                    counted=not _in(self, threads))
        return orig(self, task, _enumerated(iterable), mapper, *args, **kwargs)

    return _map_async


def _imap(orig: Callable[..., Any], threads: Any) -> Callable[..., Any]:
    @functools.wraps(orig)
    def imap(self: Any, func: Any, iterable: Any, *args: Any, **kwargs: Any) -> Any:
        if annotate.active_recorder() is None or isinstance(func, Task):
            return orig(self, func, iterable, *args, **kwargs)
        task = Task(func, ITEM, next(_calls), counted=not _in(self, threads))
        return orig(self, task, enumerate(iterable), *args, **kwargs)

    return imap


def _in(pool: Any, cls: Any) -> bool:
    return isinstance(cls, type) and isinstance(pool, cls)


def _single(orig: Callable[..., Any], threads: Any = None) -> Callable[..., Any]:
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
        task = Task(fn, FIXED, 0, next(_singles), counted=not _in(self, threads))
        if keyword:
            return orig(self, **dict(kwargs, func=task))
        return orig(self, task, *args[1:], **kwargs)

    return submit


def install_pool(pool: ModuleType, p: Patcher) -> int:
    cls = getattr(pool, "Pool", None)
    if not isinstance(cls, type):
        return 0
    threads = getattr(pool, "ThreadPool", None)
    n = wrap_method(p, cls, "_map_async",
                    lambda f: _map_async(f, getattr(pool, "starmapstar", None), threads),
                    _FLAG)
    for attr in ("imap", "imap_unordered"):
        n += wrap_method(p, cls, attr, lambda f: _imap(f, threads), _FLAG)
    return n + wrap_method(p, cls, "apply_async", lambda f: _single(f, threads), _FLAG)


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
