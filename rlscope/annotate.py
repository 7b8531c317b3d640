"""The annotation API: operations, phases, progress and metadata.

With no recording active every call is a near-free no-op, so annotated code can ship.
A recording is active under ``rls-prof`` (started by the bootstrap before user code) or
after ``rlscope.start(output_dir)``.

Every process under rls-prof imports this module at start-up, so it imports only what
recording needs (typing names are for the type checker only; json and functools are
imported where used): see scripts/bench/startup.py.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

from rlscope._version import __version__
from rlscope.errors import RLScopeError, RLScopeWarning
from rlscope.recorder import load_recorder
from rlscope.trace import format as fmt

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, Literal, NoReturn, TypeVar

    from rlscope.recorder.protocol import Recorder

    F = TypeVar("F", bound=Callable[..., Any])

_recorder: Recorder | None = None  # the active recorder module, or None
_output_dir: str | None = None
_lock = threading.Lock()
# Called at every progress report, recording or not (calibration's chunk copies).
_progress_hook: Callable[[], None] | None = None
_annotations = True  # False: scopes are no-ops even while recording
# The directory the rls-prof this process runs under holds (set at start-up): recording
# into it is this run's own; into another live run's directory is refused.
_launcher_dir: str | None = None
_sessions = 0  # recordings started in this process (a forked child counts its own)
_pop_warned = False  # a misplaced pop_operation was reported in this process
# The progress unit the current trace file's metadata says (report_progress's unit=).
_progress_unit = fmt.PROGRESS_UNIT
_metric_reports = 0  # reports with metrics in this trace file (their metadata keys)
_progress_by: str | None = None  # the integration said to report progress in this file


class _NoopScope:
    """Returned while nothing is recorded; still works as a decorator."""

    __slots__ = ("kind", "name")

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name

    def __enter__(self) -> _NoopScope:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        return False

    def __call__(self, func: F) -> F:
        return _decorate(self, func)

    def __repr__(self) -> str:
        return f"<rlscope {self.kind} {self.name!r} (not recording)>"


_noop_ops: dict[str, _NoopScope] = {}
_noop_phases: dict[str, _NoopScope] = {}


def _noop(cache: dict[str, _NoopScope], kind: str, name: str) -> _NoopScope:
    s = cache.get(name)
    if s is None:
        if not isinstance(name, str):
            raise TypeError(f"{kind} name must be a str, not {type(name).__name__}")
        s = cache[name] = _NoopScope(kind, name)
    return s


def _noop_operation(name: str) -> _NoopScope:
    return _noop(_noop_ops, "operation", name)


def _noop_phase(name: str) -> _NoopScope:
    return _noop(_noop_phases, "phase", name)


# Scope factories while nothing records. The native module's cached C scopes are no-ops
# when no recording is active and cost less than Python-level no-op objects.
_idle_operation: Callable[[str], Any] = _noop_operation
_idle_phase: Callable[[str], Any] = _noop_phase
_operation_factory = _idle_operation
_phase_factory = _idle_phase


def operation(name: str) -> Any:
    """Mark an algorithmic operation ("inference", "simulation", "backprop", ...).

    Use as ``with rlscope.operation("inference"): ...`` or as a decorator. Operations nest;
    each thread has its own stack.
    """
    return _operation_factory(name)


def phase(name: str) -> Any:
    """Mark a coarse phase of the run ("warmup", "training", "evaluation")."""
    return _phase_factory(name)


def push_operation(name: str) -> None:
    """Open an operation without a with-block; close it with :func:`pop_operation`."""
    rec = _recorder
    if rec is not None:
        rec.push_operation(name)


def pop_operation(name: str | None = None) -> None:
    """Close the innermost operation opened by :func:`push_operation` on this thread.

    If nothing is open or ``name`` is not the innermost, nothing is recorded and nothing
    changes, as without a recording: turning profiling on must not crash a job that
    runs without it. The first such pop in a process warns (:class:`RLScopeWarning`,
    with the open stack); later ones are ignored silently.
    """
    rec = _recorder
    if rec is not None:
        try:
            rec.pop_operation(name)
        except RLScopeError as e:
            _misplaced_pop(e)


def _misplaced_pop(e: RLScopeError) -> None:
    global _pop_warned
    if _pop_warned:
        return
    _pop_warned = True
    import warnings

    # stacklevel 3: the caller of rlscope.pop_operation
    warnings.warn(f"{e} (ignored, as without a recording; further misplaced pops in this "
                  "process are ignored silently)", RLScopeWarning, stacklevel=3)


def report_progress(timesteps: int, total_timesteps: int | None = None,
                    unit: str = fmt.PROGRESS_UNIT,
                    metrics: Mapping[str, float] | None = None) -> None:
    """Record training progress: ``timesteps`` done of ``total_timesteps`` (if known),
    counted in ``unit`` ("timesteps", "episodes", "iterations", ...: what the reports call
    them). Lets reports give a rate and extrapolate to the full run. ``metrics``: the
    training metrics at this point ({"reward": 12.5}), shown next to the trends."""
    if _progress_hook is not None:  # calibration's chunk boundaries (inprocess.chunk_copies)
        _progress_hook()
    rec = _recorder
    if rec is not None:
        if unit != _progress_unit:
            _record_progress_unit(rec, unit)
        rec.progress(int(timesteps), -1 if total_timesteps is None else int(total_timesteps))
        if metrics:
            _record_metrics(rec, int(timesteps), metrics)


def integration_progress(by: str, timesteps: int, total_timesteps: int | None = None,
                         metrics: Mapping[str, float] | None = None) -> None:
    """:func:`report_progress` made by integration ``by`` (sb3, rllib), not the script:
    the trace says so (format.META_PROGRESS_BY), as RLSCOPE_MAX_PROGRESS cannot bound
    work by these reports (they are made only while recording)."""
    global _progress_by
    rec = _recorder
    if rec is not None and _progress_by != by:
        rec.metadata(fmt.META_PROGRESS_BY, by)
        _progress_by = by
    report_progress(timesteps, total_timesteps, metrics=metrics)


def _record_metrics(rec: Recorder, timesteps: int, metrics: Mapping[str, float]) -> None:
    """One metadata record per report with metrics (reports are far apart: a rollout)."""
    global _metric_reports
    import json
    import time

    try:
        values = {str(k): float(v) for k, v in metrics.items()}
    except (TypeError, ValueError):
        raise RLScopeError(f"report_progress(metrics={metrics!r}): metrics must map names "
                           "to numbers, such as {'reward': 12.5}") from None
    rec.metadata(f"{fmt.META_METRIC_PREFIX}{_metric_reports}",
                 json.dumps([time.monotonic_ns(), timesteps, values]))
    _metric_reports += 1


def _record_progress_unit(rec: Recorder, unit: str) -> None:
    """The trace's process metadata says the unit progress is counted in, once per
    change (the binary progress record has no room for it)."""
    global _progress_unit
    if not isinstance(unit, str) or not unit.strip():
        raise RLScopeError(f"report_progress(unit={unit!r}): the unit must be a non-empty "
                           'str, such as "episodes" or "iterations"')
    import json

    rec.metadata(fmt.META_PROGRESS_UNIT, json.dumps(unit))
    _progress_unit = unit


def set_metadata(**kv: Any) -> None:
    """Attach run metadata (algo, env, framework, ...); values must be JSON-serialisable."""
    rec = _recorder
    if rec is None:
        return
    import json

    for key, value in kv.items():
        try:
            encoded = json.dumps(value)
        except (TypeError, ValueError):
            raise RLScopeError(f"set_metadata({key}=...): value of type "
                               f"{type(value).__name__} is not JSON-serialisable; "
                               "pass a str, number, bool, list or dict") from None
        record_metadata(rec, key, encoded)


# What a process is (its role, the vector envs it holds or serves, its multiprocessing and
# Ray identity): written again at the start of each later recording session of the
# process, so that every trace file describes its process by itself. Analysis keeps
# sessions apart: a worker's later session must still say which vector env it serves.
STANDING_KEYS = frozenset({
    fmt.META_ROLE, fmt.META_ROLE_DETAIL, fmt.META_ENV_INDEX, fmt.META_NUM_ENVS,
    fmt.META_VECENV, fmt.META_VECENVS, fmt.META_MP_NAME, fmt.META_MP_TARGET,
    fmt.META_RAY})  # (rlscope.pool_tasks is said again by pooltasks in each recording)
_standing: dict[str, str] = {}  # key -> its latest encoded value in this process


def record_metadata(rec: Recorder, key: str, encoded: str) -> None:
    """``rec.metadata(key, encoded)``, kept for later sessions when ``key`` is one of
    STANDING_KEYS (integrations write their metadata through here)."""
    rec.metadata(key, encoded)
    if key in STANDING_KEYS:
        _standing[key] = encoded


def current_operations() -> list[str]:
    """Names of the scopes open on this thread, outermost first."""
    rec = _recorder
    return [] if rec is None else list(rec.thread_stack())


def is_active() -> bool:
    return _recorder is not None


def output_dir() -> str | None:
    return _output_dir


def start(output_dir: str | os.PathLike[str], recorder: str = "native",
          flush_interval_s: float = 0.5, max_buffer_bytes: int = 256 << 20) -> str:
    """Start recording this process into ``output_dir``; returns the trace file's path.

    Each start/stop is a session with its own trace file (docs/rls-analyze.md). A
    directory a running rls-prof holds is refused, unless this process runs under it.
    """
    global _recorder, _output_dir, _sessions, _progress_unit, _progress_by
    with _lock:
        if _recorder is not None:
            raise RLScopeError(f"rlscope is already recording into {_output_dir}; "
                               "call rlscope.stop() before starting again")
        try:
            rec, note = load_recorder(recorder)
        except ValueError as e:
            raise RLScopeError(str(e)) from None
        if note:
            print(f"rlscope: {note}", file=sys.stderr)
        out = os.path.abspath(os.fspath(output_dir))
        if out != _launcher_dir and os.path.exists(os.path.join(out, fmt.LOCK_FILE)):
            _refuse_live_run(out)
        try:
            os.makedirs(out, exist_ok=True)
        except OSError as e:
            raise RLScopeError(f"cannot create output directory {out}: {e.strerror}") from None
        rec.configure(RLScopeError, _decorate)
        path = fmt.trace_file_path(out)
        rec.start(path, list(getattr(sys, "orig_argv", sys.argv)), _process_name(),
                  __version__, float(flush_interval_s), int(max_buffer_bytes))
        if _sessions:  # another session of this process: analysis keeps them apart
            rec.metadata(fmt.META_SESSION, str(_sessions))
            for key, encoded in _standing.items():  # what the process is, said again
                rec.metadata(key, encoded)
        _sessions += 1
        _progress_unit = fmt.PROGRESS_UNIT  # a new trace file: no unit recorded in it yet
        _progress_by = None
        _recorder, _output_dir = rec, out
        _use_recorder_factories()
        return path


def stop() -> None:
    """Stop recording: close open scopes of this thread, flush and close the trace."""
    with _lock:
        _stop_locked()


_stop_hooks: list[Callable[[Recorder], None]] = []


def before_stop(hook: Callable[[Recorder], None]) -> None:
    """Call ``hook(recorder)`` when a recording of this process stops, before its final
    flush (integrations write what they summed up as metadata there). Hooks run in
    registration order; one that raises is skipped, the recording still stops."""
    _stop_hooks.append(hook)


def _stop_locked() -> None:
    global _recorder, _output_dir
    rec = _recorder
    if rec is None:
        return
    _recorder = None
    _use_recorder_factories()
    for hook in list(_stop_hooks):
        try:
            hook(rec)
        except Exception:  # a summary lost is better than a trace lost
            pass
    _note_own_threads(rec)
    _note_script_uses_rlscope(rec)
    rec.stop()
    _output_dir = None


def _note_script_uses_rlscope(rec: Any) -> None:
    """Whether the script's own module holds rlscope or one of its functions (``import
    rlscope``, ``from rlscope import operation``), as metadata: importing rlscope was
    then the script's doing too, not only rlscope's start-up (the cost model's
    kinds.RLSCOPE_IMPORT)."""
    from types import ModuleType

    main = sys.modules.get("__main__")
    try:
        values = list(vars(main).values()) if main is not None else []
    except TypeError:
        return
    for v in values:
        try:  # any object: a proxy's attribute lookup may raise
            name = v.__name__ if isinstance(v, ModuleType) else getattr(v, "__module__", "")
        except Exception:
            continue
        if isinstance(name, str) and (name == "rlscope" or name.startswith("rlscope.")):
            rec.metadata(fmt.META_SCRIPT_USES_RLSCOPE, "1")
            return


def _note_own_threads(rec: Any) -> None:
    """The CPU time of rlscope's own threads in this process (named ``rlscope-*``), as
    metadata before the final flush (Linux /proc; nothing elsewhere): in ns from the
    thread's ``schedstat`` where the kernel keeps it, else in clock ticks from its
    ``stat`` (10 ms here: a short process's writer read 0)."""
    try:
        tids = os.listdir("/proc/self/task")
        tick_ns = 10**9 // os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return
    cpu: dict[str, int] = {}
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        lp, rp = stat.find(b"("), stat.rfind(b")")
        name = stat[lp + 1:rp].decode(errors="replace")
        fields = stat[rp + 2:].split()
        if not name.startswith("rlscope-") or len(fields) <= 12:
            continue
        try:
            with open(f"/proc/self/task/{tid}/schedstat", "rb") as f:
                ns = int(f.read().split()[0])  # time on the CPU
        except (OSError, ValueError, IndexError):
            ns = (int(fields[11]) + int(fields[12])) * tick_ns  # utime, stime: 14, 15
        cpu[name] = cpu.get(name, 0) + ns
    for name, ns in cpu.items():
        rec.metadata(fmt.META_THREAD_CPU_PREFIX + name, str(ns))


_os_exit = os._exit


def _exit_after_stop(code: int) -> NoReturn:
    """``os._exit`` while rlscope is loaded: stop recording first. multiprocessing's
    forked children (fork and forkserver start methods) leave through it, skipping
    atexit, and so may a bare ``os.fork()`` child. (A finalizer registered with
    multiprocessing did this before; a SIGTERM from Pool.terminate() landing between a
    worker's return and its finalizers skipped it and left a header-only trace.)"""
    # Not stop(): a signal handler calling os._exit may run while this thread holds the
    # lock; then exit without the flush rather than hang.
    if _recorder is not None and _lock.acquire(timeout=2.0):
        try:
            _stop_locked()
        except BaseException:  # leaving anyway: a failed flush must not keep us alive
            pass
        finally:
            _lock.release()
    _os_exit(code)


def flush() -> None:
    """Write everything recorded so far (the writer also flushes periodically)."""
    rec = _recorder
    if rec is not None:
        rec.flush()


def _refuse_live_run(out: str) -> None:
    """A live rls-prof holds ``out``: this process's trace would join its run (and a
    --force of the next run would delete it while it is written)."""
    from rlscope.trace import rundir

    holder = rundir.live_holder(out)
    if holder is not None:
        who = holder.describe() if holder.pid > 0 else "rls-prof"
        raise RLScopeError(f"{out} is in use by a running {who}; record into another "
                           "directory")


def _process_name() -> str:
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    if argv0 in ("", "-c", "-"):  # python -c / stdin / interactive
        return os.path.basename(sys.executable) + (f" {argv0}" if argv0 else "")
    if argv0 == "-m":  # python -m, at start-up: runpy has not found the module yet
        orig = list(getattr(sys, "orig_argv", ()))
        for i, a in enumerate(orig[1:], 1):
            if a == "-m" and i + 1 < len(orig):
                return f"-m {orig[i + 1]}"
            if a.startswith("-m") and len(a) > 2:
                return f"-m {a[2:]}"
        return os.path.basename(sys.executable) + " -m"
    return os.path.basename(argv0)


def _decorate(scope: Any, func: F) -> F:
    """Wrap ``func`` so each call runs inside the scope, looked up at call time (so a
    function decorated before recording starts is still recorded)."""
    if not callable(func):
        raise TypeError(f"rlscope.{scope.kind}({scope.name!r}) decorates callables, "
                        f"not {type(func).__name__}")
    import functools

    factory = operation if scope.kind == "operation" else phase
    name = scope.name

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with factory(name):
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _set_factories(op: Callable[[str], Any], ph: Callable[[str], Any]) -> None:
    global _operation_factory, _phase_factory
    _operation_factory, _phase_factory = op, ph


def _use_recorder_factories() -> None:
    rec = _recorder
    if rec is not None and _annotations:
        _set_factories(rec.operation, rec.phase)
    elif rec is not None:  # the native idle scopes would record: a recording is active
        _set_factories(_noop_operation, _noop_phase)
    else:
        _set_factories(_idle_operation, _idle_phase)


# -- rlscope's own hooks (launcher, calibration, integrations); not part of the user API --

def active_recorder() -> Recorder | None:
    """The recorder of the active recording, or None."""
    return _recorder


def recording_key() -> tuple[int, int]:
    """Which recording this process is in: (pid, recordings started so far). Something
    said once per trace file is said again when the key changes."""
    return _pid, _sessions


_pid = os.getpid()  # os.getpid is a system call (a pool submission asks): read at fork


def set_launcher_directory(path: str) -> None:
    """This process runs under the rls-prof that holds ``path`` (rlscope.inprocess.autostart):
    :func:`start` may record into it."""
    global _launcher_dir
    _launcher_dir = os.path.abspath(path)


def set_progress_hook(hook: Callable[[], None] | None) -> None:
    """Call ``hook`` at every progress report, recording or not (calibration's chunk
    copies cut the run at progress reports)."""
    global _progress_hook
    _progress_hook = hook


def progress_wanted() -> bool:
    """Whether a progress report would be used (recorded, or seen by a hook)."""
    return _recorder is not None or _progress_hook is not None


def record_annotations(enabled: bool) -> None:
    """False: ``operation``/``phase`` return no-op scopes even while recording
    (calibration's *base* configuration: the fixed cost of recording alone)."""
    global _annotations
    with _lock:
        _annotations = bool(enabled)
        _use_recorder_factories()


def _use_native_when_idle() -> None:
    global _idle_operation, _idle_phase
    try:
        from rlscope import _native
    except ImportError:
        return
    _native.configure(RLScopeError, _decorate)
    _idle_operation, _idle_phase = _native.operation, _native.phase
    _use_recorder_factories()


def _about_to_exec() -> bool:
    """Whether this forked child is subprocess's, about to exec (Popen with a preexec_fn
    runs the at-fork hooks; Ray starts its helpers so): the frame that forked is
    ``subprocess.Popen._execute_child``."""
    try:
        f = sys._getframe(2)  # the hook's caller: the frame that forked
    except ValueError:
        return False
    return f.f_code.co_name == "_execute_child" and f.f_globals.get("__name__") == "subprocess"


def _after_fork_child() -> None:
    global _lock, _sessions, _recorder, _output_dir, _progress_unit, _pid, _progress_by
    _pid = os.getpid()
    _lock = threading.Lock()  # another thread may have held it at fork
    _progress_unit = fmt.PROGRESS_UNIT  # the child's trace file starts without metadata
    _progress_by = None
    _standing.clear()  # the parent's role and vector envs are not the child's
    rec = _recorder
    if rec is not None and _about_to_exec():
        # No trace file: the program it execs records itself (a file here would be a
        # header-only stub named after the parent).
        _recorder, _output_dir = None, None
        _use_recorder_factories()
        return
    _sessions = 1 if rec is not None else 0  # the child's own file is its first
    if rec is not None and _output_dir is not None:
        rec.after_fork_child(fmt.trace_file_path(_output_dir))
        if rec.is_active():  # the child records into its own file
            rec.metadata(fmt.META_FORKED, "1")


_use_native_when_idle()
os.register_at_fork(after_in_child=_after_fork_child)
atexit.register(stop)
setattr(os, "_exit", _exit_after_stop)  # noqa: B010 (mypy refuses to assign a function)
