"""Ray: what each process of a Ray job is, and complete traces from its workers
(docs/ray.md). Installed when ``ray`` is imported; records metadata only: per task or
actor method call, when it ran (a few µs; Ray's own cost per task is ~100x that).

- **Identity.** The driver (the process that calls ``ray.init``) records
  ``rlscope.ray`` = ``{"kind": "driver", "job_id"}``. A worker records, when it loads an
  actor class, its role (format.ROLE_RAY_ACTOR) with the class and actor id; when it first
  runs a remote function, its role (format.ROLE_RAY_TASK) and the names of the functions
  it has run. A worker that ran nothing keeps the role its command line gives.
- **Waits.** ``ray.get`` and ``ray.wait`` are blocking calls (Waiting). Each task and
  (synchronous) actor method call records its begin and end (format.META_RAY_CALL_PREFIX):
  the correction shortens the driver's waits by what rlscope cost the calls
  (rlscope.analysis.overhead.task_waits).
- **Exit.** Ray's core worker ends its process with ``_Exit`` on its shutdown paths (the
  job finished, the actor's owner exited, the raylet died), from a C++ thread: atexit and
  signal handlers never run, and the trace's last flush interval would be lost. The
  native recorder's hook on the ``_raylet`` library's exit calls stops the recording
  first, so the trace is complete (rlscope._native.hook_exit_calls). A SIGKILL still
  loses at most the last flush interval.
- **Shutdown.** The driver's ``ray.shutdown()`` waits, a bounded time, for its workers
  to end by themselves before it stops the raylet (which SIGKILLs those still alive).
"""

from __future__ import annotations

import functools
import inspect
import itertools
import json
import sys
import threading
import time
from typing import Any

from rlscope import annotate
from rlscope.integrations import wrap_method
from rlscope.intercept.patch import WAIT, Patcher
from rlscope.trace import format as fmt

WORKER_SCRIPT = "default_worker.py"  # what Ray's worker processes run
_state: dict[str, Any] = {}  # this process's rlscope.ray metadata, as last recorded
_seen: set[int] = set()  # ids of the execution infos already looked at


def install(ray: Any, p: Patcher) -> int:
    n = _hook_exit()
    # Waiting for results: the driver on its workers, a task on others' objects.
    n += p.patch_all(ray, ("get", "wait"), WAIT, "ray")
    worker = sys.modules.get("ray._private.worker")
    if worker is not None and callable(getattr(worker, "connect", None)) \
            and not getattr(worker.connect, "_rlscope_wrapped", False):
        p.replace(worker, "connect", _wrap(worker.connect, _after_connect))
        n += 1
    node = sys.modules.get("ray._private.node")
    if node is not None and isinstance(getattr(node, "Node", None), type):
        n += wrap_method(p, node.Node, "kill_all_processes", _let_workers_exit)
    fm = sys.modules.get("ray._private.function_manager")
    manager = getattr(fm, "FunctionActorManager", None)
    if isinstance(manager, type):
        n += _replace(p, manager, "load_actor_class", _after_actor_class)
        n += wrap_method(p, manager, "get_execution_info", _tasks_in_phases)
    return n


def _hook_exit() -> int:
    rec = annotate.active_recorder()
    hook = getattr(rec, "hook_exit_calls", None)  # the native recorder only
    if hook is None:
        return 0
    try:
        return int(hook("_raylet"))
    except Exception:  # never break the worker over its trace
        return 0


def _replace(p: Patcher, cls: type, attr: str, after: Any) -> int:
    return wrap_method(p, cls, attr, lambda raw: _wrap(raw, after))


# The most ray.shutdown() waits for workers (_let_workers_exit): it returns as soon as
# they are gone (0-0.16 s quiet). A loaded machine can take seconds to let them flush and
# exit: beside a test suite and two busy loops on 2 cores an actor was still running
# after 10 s, and the raylet's stop then killed it half-way through its trace.
WORKER_EXIT_WAIT_S = 30.0


def _let_workers_exit(kill_all: Any) -> Any:
    """The driver's ``ray.shutdown()`` stops the raylet right after disconnecting, and a
    stopping raylet sends SIGTERM and at once SIGKILL to its workers still alive: a worker
    ending on its own at that moment (flushing its trace) is killed half-way. So the
    driver first waits, a bounded time, for the workers below it to end by themselves,
    which they do once the driver has disconnected (the job is over)."""
    @functools.wraps(kill_all)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if annotate.is_active():
            try:
                _wait_for_workers(WORKER_EXIT_WAIT_S)
            except Exception:  # never hold up a shutdown over a trace
                pass
        return kill_all(self, *args, **kwargs)
    return wrapper


def _is_worker(cmdline: list[str]) -> bool:
    """A Ray worker by its command line: Ray retitles it ``ray::<actor class>``,
    ``ray::IDLE``, ... (its agents are ``ray::...Agent``, services that do not end with
    the job), else it runs default_worker.py."""
    if cmdline and cmdline[0].startswith("ray::"):
        return not cmdline[0].split()[0].endswith("Agent")
    return any(a.endswith(WORKER_SCRIPT) for a in cmdline[:4])


def _wait_for_workers(timeout_s: float) -> None:
    import time

    import psutil

    deadline = time.monotonic() + timeout_s
    me = psutil.Process()
    while time.monotonic() < deadline:
        alive = []
        for c in me.children(recursive=True):
            try:
                if _is_worker(c.cmdline()):
                    alive.append(c)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        if not alive:
            return
        psutil.wait_procs(alive, timeout=min(0.05, max(deadline - time.monotonic(), 0)))


def _wrap(func: Any, after: Any) -> Any:
    """``func`` that then calls ``after(result, *args)``; ``after`` never raises."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out = func(*args, **kwargs)
        if annotate.is_active():
            try:
                after(out, *args, **kwargs)
            except Exception:  # metadata must never break a Ray task
                pass
        return out

    wrapper._rlscope_wrapped = True  # type: ignore[attr-defined]
    return wrapper


def _set(**fields: Any) -> None:
    _state.update(fields)
    annotate.set_metadata(**{fmt.META_RAY: dict(_state)})


def _job_id(worker: Any) -> str | None:
    try:
        job = worker.current_job_id
        return None if job.is_nil() else str(job.hex())
    except Exception:
        return None


def _after_connect(_out: Any, *args: Any, **kwargs: Any) -> None:
    mod = sys.modules["ray._private.worker"]
    worker = mod.global_worker
    _hook_exit()  # in case _raylet was loaded after ray (it is imported with it)
    if getattr(worker, "mode", None) == getattr(mod, "SCRIPT_MODE", 0):
        _set(kind="driver", job_id=_job_id(worker))


def _after_actor_class(cls: Any, manager: Any, job_id: Any, descriptor: Any,
                       *rest: Any, **kwargs: Any) -> None:
    name = str(getattr(descriptor, "class_name", "") or getattr(cls, "__name__", "?"))
    worker = getattr(manager, "_worker", None)
    actor_id = None
    try:
        aid = worker.actor_id if worker is not None else None
        actor_id = None if aid is None or aid.is_nil() else str(aid.hex())
    except Exception:
        pass
    module = str(getattr(descriptor, "module_name", "") or "")
    _set(kind="actor", actor_class=name, module=module, actor_id=actor_id,
         job_id=_job_id(worker) if worker is not None else None)
    annotate.set_metadata(**{fmt.META_ROLE: fmt.ROLE_RAY_ACTOR, fmt.META_ROLE_DETAIL: name})


TASK_PHASE = "ray task "  # + the task's function name: the phase a task runs in
_timed: dict[int, tuple[Any, Any]] = {}  # id(function) -> (function, its timed wrapper)
_calls = itertools.count()  # this process's format.META_RAY_CALL_PREFIX records


def _tasks_in_phases(get_info: Any) -> Any:
    """``get_execution_info`` whose tasks run inside the phase ``ray task <function>`` (a
    task worker runs many tasks, and each operation then says which one it belongs to),
    and whose tasks and actor methods record when they ran (format.META_RAY_CALL_PREFIX:
    the driver's waits on them are corrected by what rlscope cost them)."""
    @functools.wraps(get_info)
    def wrapper(self: Any, job_id: Any, descriptor: Any, *args: Any, **kwargs: Any) -> Any:
        info = get_info(self, job_id, descriptor, *args, **kwargs)
        if not annotate.is_active():
            return info
        try:
            _after_execution_info(info, self, job_id, descriptor, *args, **kwargs)
            if not hasattr(info, "_replace"):
                return info
            cls = str(getattr(descriptor, "class_name", "") or "")
            if cls:
                fn = info.function
                method = str(getattr(fn, "name", "") or getattr(info, "function_name", ""))
                if method.startswith("__ray") or _lazy(getattr(fn, "method", fn)):
                    return info  # Ray's own; a coroutine's or generator's call only makes it
                return info._replace(function=_timed_call(fn, f"{cls}.{method}", None))
            if _state.get("kind") != "task":
                return info
            name = _task_name(info, descriptor)
            return info._replace(function=_timed_call(info.function, name, TASK_PHASE + name))
        except Exception:  # never break a Ray task over its trace
            return info
    return wrapper


def _task_name(info: Any, descriptor: Any) -> str:
    return str(getattr(info, "function_name", "") or getattr(descriptor, "function_name", "?")
               ).removeprefix("__main__.")


def _lazy(fn: Any) -> bool:
    """Whether calling ``fn`` returns work still to be done (a coroutine, a generator)."""
    return inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn) \
        or inspect.isgeneratorfunction(fn)


def _timed_call(fn: Any, name: str, phase: str | None) -> Any:
    """``fn`` recording when it ran (and inside ``phase``, if given). functools.wraps
    keeps the attributes Ray's executor reads (an actor method executor's ``name`` and
    ``method``)."""
    hit = _timed.get(id(fn))
    if hit is not None and hit[0] is fn:
        return hit[1]
    head = f"[{json.dumps(name)}, "

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        rec = annotate.active_recorder()
        if rec is None:
            return fn(*args, **kwargs)
        begin = time.perf_counter_ns()  # CLOCK_MONOTONIC, the recorders' clock
        try:
            if phase is None:
                return fn(*args, **kwargs)
            with annotate.phase(phase):
                return fn(*args, **kwargs)
        finally:
            try:
                rec.metadata(f"{fmt.META_RAY_CALL_PREFIX}{next(_calls)}",
                             f"{head}{begin}, {time.perf_counter_ns()}, "
                             f"{threading.get_native_id()}]")
            except Exception:  # never fail the user's call over its record
                pass

    _timed[id(fn)] = (fn, run)
    return run


def _after_execution_info(info: Any, manager: Any, job_id: Any, descriptor: Any,
                          *rest: Any, **kwargs: Any) -> None:
    key = id(info)
    if key in _seen:
        return
    _seen.add(key)
    if getattr(descriptor, "class_name", "") or _state.get("kind") == "actor":
        return  # an actor's method: the actor's identity says it
    name = _task_name(info, descriptor)
    tasks = list(_state.get("tasks", []))
    if name in tasks:
        return
    tasks.append(name)
    worker = getattr(manager, "_worker", None)
    _set(kind="task", tasks=tasks, job_id=_job_id(worker) if worker is not None else None)
    annotate.set_metadata(**{fmt.META_ROLE: fmt.ROLE_RAY_TASK,
                             fmt.META_ROLE_DETAIL: ", ".join(tasks)})
