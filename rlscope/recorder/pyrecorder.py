"""Pure-Python recorder: the fallback when the native extension is unavailable, and the
test oracle for it.

It exposes the same functions as ``rlscope._native`` (start, stop, operation, phase,
push_operation, pop_operation, progress, metadata, flush, ...) and writes the same trace
format, encoding records with rlscope.recorder.wire (no protobuf runtime needed). Events
are appended to a per-thread deque (append and popleft are atomic under the GIL); a writer
thread drains the deques into chunks.
"""

from __future__ import annotations

import collections
import functools
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from rlscope.recorder import wire
from rlscope.trace import format as fmt

_now = time.perf_counter_ns  # CLOCK_MONOTONIC on Linux, like the native recorder
_MAX_DEPTH = 256
# Or-ed into the begin kind of scopes a forked child inherited open from its parent:
# they are not in the child's trace and close silently (native kInherited).
_INHERITED = 1 << 31
_CHUNK_EVENTS = 65536
_ARG = 255  # internal: an argument of the preceding event, value in the time field

FORMAT_VERSION = fmt.FORMAT_VERSION

_error_type: type[Exception] = RuntimeError
_decorate: Callable[[Any, Callable[..., Any]], Callable[..., Any]] | None = None


def configure(error_type: type[Exception], decorate: Callable[..., Any]) -> None:
    global _error_type, _decorate
    _error_type = error_type
    _decorate = decorate


class _ThreadState:
    __slots__ = ("events", "index", "name", "stack", "tid")

    def __init__(self, index: int) -> None:
        self.index = index
        self.tid = threading.get_native_id()
        self.name = threading.current_thread().name
        self.events: collections.deque[tuple[int, int, int]] = collections.deque()
        self.stack: list[tuple[int, int]] = []  # (begin kind, name id)


class _Recording:
    """State of one active recording (one file)."""

    def __init__(self, path: str, argv: list[str], process_name: str, version: str,
                 flush_interval_s: float, max_buffer_bytes: int) -> None:
        self.path = path
        self.argv = list(argv)
        self.process_name = process_name
        self.version = version
        self.flush_interval_s = flush_interval_s
        # ~100 bytes of Python objects per buffered event.
        self.max_pending = max(1024, max_buffer_bytes // 100)
        self.lock = threading.Lock()  # slow path: interning, registration, writing
        self.strings: dict[str, int] = {}
        self.new_strings: list[tuple[int, str]] = []
        self.threads: list[_ThreadState] = []
        self.new_threads: list[_ThreadState] = []
        self.metadata: list[tuple[str, str, int]] = []
        self.dropped = 0
        self.events = 0
        self.chunks = 0
        self.bytes_written = 0
        self.fd = -1
        self.stop_event = threading.Event()
        self.writer: threading.Thread | None = None

    # -- file ------------------------------------------------------------------------
    def open(self) -> None:
        try:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
                              | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise _error_type(f"cannot create trace file {self.path}: {e.strerror}; "
                              "check that the output directory is writable") from None
        clock = fmt.read_clock_pair()
        header = wire.record(header={
            "format_version": fmt.FORMAT_VERSION,
            "source": "python",
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "host": fmt.host_name(),
            "process_name": self.process_name,
            "argv": self.argv,
            "clock": {"monotonic_ns": clock.monotonic_ns, "realtime_ns": clock.realtime_ns,
                      "uncertainty_ns": clock.uncertainty_ns},
            "recorder": "python",
            "rlscope_version": self.version,
        })
        self._write(fmt.MAGIC + _delimited(header))

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
        self.bytes_written += len(data)

    def start_writer(self) -> None:
        self.stop_event.clear()
        self.writer = threading.Thread(target=self._writer_loop, name="rlscope-writer",
                                       daemon=True)
        self.writer.start()

    def _writer_loop(self) -> None:
        quiet_waits()  # its own waits are not the program's
        while not self.stop_event.wait(self.flush_interval_s):
            self.flush()

    # -- recording -------------------------------------------------------------------
    def intern(self, name: str) -> int:
        sid = self.strings.get(name)
        if sid is None:
            with self.lock:
                sid = self.strings.get(name)
                if sid is None:
                    sid = len(self.strings) + 1
                    self.strings[name] = sid
                    self.new_strings.append((sid, name))
        return sid

    def register_thread(self) -> _ThreadState:
        with self.lock:
            st = _ThreadState(len(self.threads))
            self.threads.append(st)
            self.new_threads.append(st)
        return st

    def append(self, st: _ThreadState, ts: int, kind: int, name: int) -> None:
        if len(st.events) >= self.max_pending:
            self.dropped += 1
            return
        st.events.append((ts, kind, name))

    def append_with_args(self, st: _ThreadState, ts: int, kind: int, name: int,
                         args: tuple[int, ...]) -> None:
        """An event and its arguments, kept or dropped together, reaching the writer
        together (under the lock)."""
        with self.lock:
            if len(st.events) + 1 + len(args) > self.max_pending:
                self.dropped += 1
                return
            st.events.append((ts, kind, name))
            st.events.extend((int(a), _ARG, 0) for a in args)

    # -- encoding --------------------------------------------------------------------
    def flush(self) -> None:
        with self.lock:
            if self.fd < 0:
                return
            # Drain events first, then take the definitions: every id an event uses
            # was defined before the event was appended.
            drained: list[tuple[_ThreadState, list[tuple[int, int, int]]]] = []
            for st in self.threads:
                evs = []
                q = st.events
                for _ in range(len(q)):
                    evs.append(q.popleft())
                if evs:
                    drained.append((st, evs))
            new_strings, self.new_strings = self.new_strings, []
            new_threads, self.new_threads = self.new_threads, []
            metadata, self.metadata = self.metadata, []
            dropped, self.dropped = self.dropped, 0
            rows = [(st.index, ev) for st, evs in drained for ev in evs]
            out = []
            first = True
            while first or rows:
                cut = min(_CHUNK_EVENTS, len(rows))
                while cut < len(rows) and rows[cut][1][1] == _ARG:
                    cut += 1  # an event's arguments stay in its chunk
                part, rows = rows[:cut], rows[cut:]
                c: dict[str, Any] = {"sequence": self.chunks}
                if first:
                    c["strings"] = [{"id": sid, "value": s} for sid, s in new_strings]
                    c["threads"] = [{"index": st.index, "tid": st.tid, "name": st.name}
                                    for st in new_threads]
                    c["metadata"] = [{"key": key, "json_value": value, "time_ns": ts}
                                     for key, value, ts in metadata]
                    c["dropped_events"] = dropped
                deltas: list[int] = []
                threads: list[int] = []
                kinds: list[int] = []
                names: list[int] = []
                args: list[int] = []
                prev = None
                for thread, (ts, kind, name) in part:
                    if kind == _ARG:
                        args.append(ts)
                        continue
                    if prev is None:
                        c["base_time_ns"] = prev = ts
                    deltas.append(ts - prev)
                    prev = ts
                    threads.append(thread)
                    kinds.append(kind)
                    names.append(name)
                self.events += len(kinds)
                c.update(time_delta_ns=deltas, thread=threads, kind=kinds, name=names,
                         args=args)
                if first and not part and not (new_strings or new_threads or metadata
                                               or dropped):
                    break
                first = False
                self.chunks += 1
                out.append(_delimited(wire.record(chunk=c)))
            if out:
                self._write(b"".join(out))

    def close(self) -> None:
        self.stop_event.set()
        if self.writer is not None and self.writer is not threading.current_thread():
            self.writer.join()
        self.flush()
        with self.lock:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1


def _delimited(payload: bytes) -> bytes:
    return wire.varint(len(payload)) + payload


_rec: _Recording | None = None
_tls = threading.local()
_scopes: dict[tuple[int, str], Scope] = {}


def _state() -> _ThreadState:
    st = getattr(_tls, "state", None)
    if st is None or st.index >= len(_rec.threads) or _rec.threads[st.index] is not st:  # type: ignore[union-attr]
        st = _tls.state = _rec.register_thread()  # type: ignore[union-attr]
    return st


def _stack_names(st: _ThreadState) -> str:
    assert _rec is not None
    names = {v: k for k, v in _rec.strings.items()}
    return " > ".join(repr(names.get(n, "?")) for b, n in st.stack
                      if not b & _INHERITED) or "(none)"


class Scope:
    """An operation or phase; a context manager, and a decorator through ``configure``."""

    __slots__ = ("_begin", "_id", "kind", "name")

    def __init__(self, begin: int, name: str) -> None:
        self._begin = begin
        self.name = name
        self.kind = "operation" if begin == fmt.OPERATION_BEGIN else "phase"
        self._id = 0

    def __enter__(self) -> Scope:
        rec = _rec
        if rec is None:
            return self
        st = _state()
        if len(st.stack) >= _MAX_DEPTH:
            raise _error_type(f"{self.kind} {self.name!r} nested deeper than {_MAX_DEPTH} "
                              "levels; a scope is probably entered in a loop without exit")
        sid = rec.intern(self.name)
        st.stack.append((self._begin, sid))
        rec.append(st, _now(), self._begin, sid)
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> Literal[False]:
        rec = _rec
        if rec is None:
            return False
        ts = _now()
        st = _state()
        entry = (self._begin, rec.intern(self.name))
        stack = st.stack
        if stack and stack[-1] == entry:
            stack.pop()
            rec.append(st, ts, self._begin + 1, entry[1])
            return False
        inherited = (self._begin | _INHERITED, entry[1])
        if entry not in stack and inherited not in stack:
            if exc_type is None:
                raise _error_type(
                    f"{self.kind} {self.name!r} exited without a matching enter on this "
                    f"thread (open: {_stack_names(st)}); enter and exit a scope on the "
                    "same thread")
            return False
        unclosed = []
        while stack:
            begin, sid = stack.pop()
            if begin & _INHERITED:  # the parent's: nothing to record
                if (begin, sid) == inherited:
                    break
                continue
            rec.append(st, ts, begin + 1, sid)
            if (begin, sid) == entry:
                break
            unclosed.append(sid)
        if unclosed and exc_type is None:
            names = {v: k for k, v in rec.strings.items()}
            raise _error_type(
                f"{self.kind} {self.name!r} exited while inner scopes were still open: "
                f"{', '.join(repr(names[s]) for s in unclosed)}; they were closed with it. "
                "Pop every push_operation() before leaving the enclosing scope")
        return False

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        assert _decorate is not None
        return _decorate(self, func)

    def __repr__(self) -> str:
        return f"<rlscope {self.kind} {self.name!r}>"


def _scope(begin: int, name: str) -> Scope:
    if not isinstance(name, str):
        raise TypeError(f"scope name must be a str, not {type(name).__name__}")
    key = (begin, name)
    s = _scopes.get(key)
    if s is None:
        s = _scopes[key] = Scope(begin, name)
    return s


def operation(name: str) -> Scope:
    return _scope(fmt.OPERATION_BEGIN, name)


def phase(name: str) -> Scope:
    return _scope(fmt.PHASE_BEGIN, name)


def push_operation(name: str) -> None:
    operation(name).__enter__()


def pop_operation(name: str | None = None) -> None:
    rec = _rec
    if rec is None:
        return
    st = _state()
    if not st.stack:
        raise _error_type("pop_operation() without a matching push_operation() on this "
                          "thread; push and pop operations on the same thread, in pairs")
    begin, sid = st.stack[-1]
    if begin & _INHERITED:  # the parent's scope: pop it silently if it is the one
        if (begin & ~_INHERITED) == fmt.OPERATION_BEGIN and (
                name is None or rec.intern(name) == sid):
            st.stack.pop()
            return
        raise _error_type("pop_operation() without a matching push_operation() on this "
                          "thread; push and pop operations on the same thread, in pairs")
    if name is not None and (begin, rec.intern(name)) != (fmt.OPERATION_BEGIN, sid):
        raise _error_type(
            f"pop_operation({name!r}) does not match the innermost open scope on this "
            f"thread (open: {_stack_names(st)}); pop operations in reverse order of push")
    if begin != fmt.OPERATION_BEGIN:
        raise _error_type(
            f"pop_operation() would close a phase (open: {_stack_names(st)}); "
            "exit the phase's with-block instead")
    st.stack.pop()
    rec.append(st, _now(), fmt.OPERATION_END, sid)


def progress(timesteps: int, total: int) -> None:
    rec = _rec
    if rec is None:
        return
    rec.append_with_args(_state(), _now(), fmt.PROGRESS, 0, (timesteps, total))


def env_begin(reset: bool, index: int, name: str) -> None:
    rec = _rec
    if rec is None:
        return
    st = _state()
    ts = _now()
    kind = fmt.ENV_RESET_BEGIN if reset else fmt.ENV_STEP_BEGIN
    rec.append_with_args(st, ts, kind, rec.intern(name), (index,))


def env_end(reset: bool, name: str) -> None:
    rec = _rec
    if rec is None:
        return
    kind = fmt.ENV_RESET_END if reset else fmt.ENV_STEP_END
    rec.append(_state(), _now(), kind, rec.intern(name))


def metadata(key: str, json_value: str) -> None:
    rec = _rec
    if rec is None:
        return
    with rec.lock:
        rec.metadata.append((key, json_value, _now()))


_os_tids: dict[int, int] = {}  # threading.get_ident() -> OS thread id
os.register_at_fork(after_in_child=_os_tids.clear)  # a child's thread is a new one
_tasks_recorded = [0]  # the pool task records' numbers, process-wide


def run_task(op: str, head: str, tail: str, index: int, fn: Callable[..., Any],
             args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> Any:
    """``fn(*args, **kwargs)`` inside operation ``op`` (opened unless open on the
    thread), then the pool task's record (rlscope.integrations.pooltasks; the native
    recorder's run_task)."""
    if _rec is None:
        return fn(*args, **(kwargs or {}))
    begin = _now()
    try:
        if in_operation(op):  # opened unless open, as the native recorder does
            return fn(*args, **(kwargs or {}))
        with operation(op):
            return fn(*args, **(kwargs or {}))
    finally:
        end = _now()
        tid = _os_tids.get(threading.get_ident())
        if tid is None:
            tid = _os_tids[threading.get_ident()] = threading.get_native_id()
        n = _tasks_recorded[0]
        _tasks_recorded[0] = n + 1
        metadata(f"{fmt.META_TASK_PREFIX}{n}", f"{head}{index}, {begin}, {end}, {tid}{tail}")


def thread_stack() -> list[str]:
    rec = _rec
    if rec is None:
        return []
    names = {v: k for k, v in rec.strings.items()}
    return [names[s] for b, s in _state().stack if not b & _INHERITED]


def start(path: str, argv: list[str], process_name: str, rlscope_version: str,
          flush_interval_s: float = 0.5, max_buffer_bytes: int = 256 << 20) -> None:
    global _rec
    if _rec is not None:
        raise _error_type(f"a recording is already active (writing {_rec.path}); "
                          "call rlscope.stop() first")
    rec = _Recording(path, argv, process_name, rlscope_version, flush_interval_s,
                     max_buffer_bytes)
    rec.open()
    _rec = rec
    st = _state()
    rec.append(st, _now(), fmt.PROCESS_START, 0)
    rec.start_writer()


def stop() -> None:
    global _rec
    rec = _rec
    if rec is None:
        return
    st = _state()
    # Close scopes still open on this thread so the trace stays balanced.
    ts = _now()
    for begin, sid in reversed(st.stack):
        if not begin & _INHERITED:
            rec.append(st, ts, begin + 1, sid)
    st.stack.clear()
    rec.append(st, ts, fmt.PROCESS_END, 0)
    _rec = None
    rec.close()


def is_active() -> bool:
    return _rec is not None


def flush() -> None:
    if _rec is not None:
        _rec.flush()


def stats() -> dict[str, int]:
    rec = _rec
    if rec is None:
        return {"events": 0, "dropped": 0, "chunks": 0, "bytes_written": 0, "threads": 0}
    return {"events": rec.events, "dropped": rec.dropped, "chunks": rec.chunks,
            "bytes_written": rec.bytes_written, "threads": len(rec.threads)}


def after_fork_child(path: str) -> None:
    """Continue recording in a forked child, in a new file for the child's pid."""
    global _rec
    old = _rec
    if old is None:
        return
    st = getattr(_tls, "state", None)
    stack = list(st.stack) if st is not None else []
    names = {v: k for k, v in old.strings.items()}
    if old.fd >= 0:
        os.close(old.fd)  # the parent keeps writing it; its writer thread is not ours
    rec = _Recording(path, old.argv, old.process_name, old.version, old.flush_interval_s,
                     old.max_pending * 100)
    rec.open()
    _rec = rec
    _tls.state = None
    st = _state()
    ts = _now()
    rec.append(st, ts, fmt.PROCESS_START, 0)
    # The parent's open scopes: not in the child's trace (fork and spawn name the same
    # work the same); kept only so the child's code can leave them, silently.
    for begin, sid in stack:
        st.stack.append((begin | _INHERITED, rec.intern(names[sid])))
    rec.start_writer()


# -- intercepted native calls (twin of native/common/calls.h + CallWrapper) -------------
CALL_BACKEND = 0
CALL_SIMULATOR = 1
CALL_WAIT = 2
CALL_MARK = 3
_CALL_BEGIN = (fmt.BACKEND_CALL_BEGIN, fmt.SIMULATOR_CALL_BEGIN, fmt.WAIT_CALL_BEGIN,
               fmt.MARK_CALL_BEGIN)
_in_call = threading.local()  # .flags: per category, 1 inside an outermost call


class _CallWrapper:
    """Records the outermost call per category and thread, then forwards it."""

    __slots__ = ("__weakref__", "__wrapped__", "_nonblocking", "_rlscope_category",
                 "_rlscope_name")

    def __init__(self, func: Callable[..., Any], category: int, name: str,
                 nonblocking: tuple[int, str | None, int] | None = None) -> None:
        object.__setattr__(self, "__wrapped__", func)
        object.__setattr__(self, "_rlscope_category", category)
        object.__setattr__(self, "_rlscope_name", name)
        object.__setattr__(self, "_nonblocking", nonblocking)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        rec = _rec
        func = self.__wrapped__
        if rec is None:
            return func(*args, **kwargs)
        flags = getattr(_in_call, "flags", None)
        if flags is None:
            flags = _in_call.flags = [0, 0, 0, 0]
        cat = self._rlscope_category
        if flags[cat]:
            return func(*args, **kwargs)
        nb = self._nonblocking
        if nb is not None and _nonblocking(nb, args, kwargs):  # not a wait: not recorded
            flags[cat] = 1
            try:
                return func(*args, **kwargs)
            finally:
                flags[cat] = 0
        st = _state()
        sid = rec.intern(self._rlscope_name)
        flags[cat] = 1
        rec.append(st, _now(), _CALL_BEGIN[cat], sid)
        try:
            return func(*args, **kwargs)
        finally:
            flags[cat] = 0
            if _rec is rec:
                rec.append(st, _now(), _CALL_BEGIN[cat] + 1, sid)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__wrapped__, name)

    # Found on the class before __getattr__: forward them explicitly.
    __doc__ = property(lambda self: self.__wrapped__.__doc__)
    __module__ = property(lambda self: self.__wrapped__.__module__)
    __class__ = property(lambda self: self.__wrapped__.__class__)

    def __repr__(self) -> str:
        return repr(self.__wrapped__)

    def __reduce_ex__(self, protocol: Any) -> Any:
        import types

        if isinstance(self.__wrapped__, types.FunctionType):
            return self.__wrapped__.__qualname__
        return self.__wrapped__.__reduce_ex__(protocol)

    def __hash__(self) -> int:
        return hash(_unwrap_all(self))

    def __eq__(self, other: object) -> bool:
        return _unwrap_all(self) == _unwrap_all(other)


class _MethodCallWrapper(_CallWrapper):
    """For descriptors that bind as methods (method_descriptor, functions, ...)."""

    __slots__ = ()

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        import types

        return types.MethodType(self, obj)


def _unwrap_all(o: Any) -> Any:
    while isinstance(o, _CallWrapper):
        o = o.__wrapped__
    return o


def wrap(func: Callable[..., Any], category: int, name: str,
         nonblocking: tuple[int, str | None, int] | None = None) -> Any:
    if not callable(func):
        raise TypeError(f"wrap(): {type(func).__name__} object is not callable")
    if category not in (CALL_BACKEND, CALL_SIMULATOR, CALL_WAIT, CALL_MARK):
        raise ValueError(f"wrap(): category must be 0 (backend), 1 (simulator), 2 (wait) "
                         f"or 3 (mark), not {category}")
    if nonblocking is not None and (len(nonblocking) != 3 or nonblocking[0] < 0):
        raise TypeError("wrap(): nonblocking is (position >= 0, keyword str or None, mask)")
    cls = _MethodCallWrapper if hasattr(type(func), "__get__") else _CallWrapper
    return cls(func, category, name, nonblocking)


def _nonblocking(spec: tuple[int, str | None, int], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> bool:
    """Whether a call cannot block, by its argument ``spec`` names (the native
    wrapper's nonblocking_call)."""
    pos, kw, mask = spec
    if pos < len(args):
        v = args[pos]
    elif kw is not None and kw in kwargs:
        v = kwargs[kw]
    else:
        return False
    if v is None or v is True:
        return False
    if v is False:
        return mask == 0
    if type(v) is int:
        return v == 0 if mask == 0 else bool(v & mask)
    return type(v) is float and mask == 0 and v == 0.0


def wrap_operation(func: Callable[..., Any], name: str,
                   first_use: Callable[[Any], Any] | None = None,
                   key: str | None = None) -> Callable[..., Any]:
    """``func`` run inside operation ``name`` unless one of that name is open on the
    thread; ``first_use(self)`` once per instance while recording (until it sets ``key``
    in ``self.__dict__``). The native recorder's OpWrapper, in Python."""
    if not callable(func):
        raise TypeError(f"wrap_operation(): {type(func).__name__} object is not callable")
    if (first_use is None) != (key is None):
        raise TypeError("wrap_operation(): first_use (callable) and key (str) go together")
    scope = operation(name)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _rec is None:
            return func(*args, **kwargs)
        if first_use is not None and args and key not in getattr(args[0], "__dict__", (key,)):
            first_use(args[0])
        if in_operation(name):  # passed on: counted (the native OpWrapper's `passed`)
            wrapper._rlscope_passed += 1  # type: ignore[attr-defined]
            return func(*args, **kwargs)
        with scope:
            return func(*args, **kwargs)

    wrapper._rlscope_op = name  # type: ignore[attr-defined]
    wrapper._rlscope_passed = 0  # type: ignore[attr-defined]
    return wrapper


class EnvCall:
    """An env's bound ``step``/``reset`` recorded at every call as env ``index``'s step
    (reset) inside ``operation`` (opened unless open). The native recorder's EnvCall, in
    Python."""

    __slots__ = ("index", "method", "name", "op", "reset")
    _rlscope_env = True

    def __init__(self, method: Callable[..., Any], reset: bool, index: int, name: str,
                 op: str) -> None:
        self.method, self.reset, self.index, self.name, self.op = \
            method, reset, index, name, op

    @property
    def __wrapped__(self) -> Callable[..., Any]:
        return self.method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _rec is None:
            return self.method(*args, **kwargs)
        env_begin(self.reset, self.index, self.name)
        try:
            if in_operation(self.op):
                return self.method(*args, **kwargs)
            with operation(self.op):
                return self.method(*args, **kwargs)
        finally:
            env_end(self.reset, self.name)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.method, attr)

    def __reduce__(self) -> Any:
        # Pickled or copied: the plain bound method, unrecorded (unpickling runs this
        # before the instance's attributes are restored).
        return (getattr, (self.method.__self__, self.method.__name__))  # type: ignore[attr-defined]


def env_call(method: Callable[..., Any], reset: bool, index: int, name: str,
             operation: str) -> EnvCall:
    if not callable(method):
        raise TypeError(f"env_call(): {type(method).__name__} object is not callable")
    return EnvCall(method, reset, index, name, operation)


def quiet_waits() -> None:
    """This thread's waits are never recorded from now on (a library's plumbing thread:
    a pool's handler threads, a queue's feeder), as inside an outermost wait."""
    flags = getattr(_in_call, "flags", None)
    if flags is None:
        flags = _in_call.flags = [0, 0, 0, 0]
    flags[CALL_WAIT] = 1


def in_operation(name: str) -> bool:
    """True if an operation named ``name`` is open on this thread."""
    rec = _rec
    if rec is None:
        return False
    sid = rec.strings.get(name)
    return sid is not None and (fmt.OPERATION_BEGIN, sid) in _state().stack
