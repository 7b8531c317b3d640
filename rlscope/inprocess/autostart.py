"""Start recording in a process launched by ``rls-prof``, from its environment.

Runs in every Python process below rls-prof (the bootstrap sitecustomize calls
:func:`autostart`), so it imports only what recording needs: no numpy, protobuf or trace
reader (scripts/bench/startup.py measures it). The environment contract is documented in
docs/rls-prof.md.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType, ModuleType

from rlscope import envvars

_exiting = False  # set when the interpreter starts shutting down
_starting = False  # inside autostart(): a SIGTERM now is acted on when it returns
_pending = False  # a SIGTERM arrived while starting


def _mark_exiting() -> None:
    global _exiting
    _exiting = True


def _exit_under_way() -> bool:
    if _exiting or sys.is_finalizing():
        return True
    mp_util = sys.modules.get("multiprocessing.util")  # a worker running its finalizers
    return bool(getattr(mp_util, "_exiting", False))


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    global _pending
    native = sys.modules.get("rlscope._native")
    if native is not None:  # acting on it: the native watch need not (_watch_sigterm)
        native.sigterm_answered()
    if _starting:  # an exception here would abort the interpreter's start-up (site)
        _pending = True
        return
    if _exit_under_way():
        # The exit hooks flush the trace; an exception now would only interrupt them
        # and print a traceback from whichever hook it lands in (Pool.terminate()
        # during a worker's exit). A second SIGTERM ends the process at once.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        return
    # Unwind like an exit so atexit flushes the trace; 128 + signal, as a shell reports.
    raise SystemExit(128 + signum)


def autostart() -> None:
    if os.environ.get(envvars.MAX_PROGRESS):  # calibration work bound (any configuration)
        from rlscope.inprocess.switches import apply_work_limit

        apply_work_limit()
    elif os.environ.get(envvars.WORK_TALLY):  # a check's run without rlscope: its work
        from rlscope.inprocess.switches import apply_work_tally

        apply_work_tally()
    if os.environ.get(envvars.CHUNK_DIR):  # calibration by chunks: no recording
        from rlscope.inprocess import chunk_copies

        _enable_intercept(os.environ.get(envvars.INTERCEPT, "auto"))
        chunk_copies.install_from_env()
        return
    out = os.environ.get(envvars.OUTPUT_DIR)
    if not out:
        return
    import rlscope

    global _starting
    # Before the trace file exists: a worker terminated while it starts up (Pool.terminate
    # right after a quick map) then leaves a complete trace, not a header-only one.
    handled = _install_sigterm_handler()
    _starting = True
    try:
        _start_recording(rlscope, out)
    finally:
        _starting = False
    if _pending:  # terminated while starting: flushed, now end as SIGTERM would have
        rlscope.stop()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
    elif handled and not rlscope.is_active():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _start_recording(rlscope: ModuleType, out: str) -> None:
    if os.environ.get(envvars.ANNOTATIONS) == "0":  # calibration's base configuration
        from rlscope.inprocess.switches import apply_annotation_switch

        apply_annotation_switch()
    from rlscope import annotate
    from rlscope.trace import format as fmt

    clock = os.environ.get(envvars.CLOCK)
    if clock not in (None, "", "tsc", "monotonic"):  # the native recorder reads it
        print(f"rlscope: {envvars.CLOCK}={clock!r} is neither 'monotonic' nor 'tsc'; events "
              "are timed on the TSC where the kernel's clock runs on it", file=sys.stderr)
    out = fmt.host_directory(out)  # OUTPUT_DIR/<host> for runs over several hosts
    annotate.set_launcher_directory(out)
    try:
        rlscope.start(out, recorder=os.environ.get(envvars.RECORDER, "native"),
                      flush_interval_s=float(os.environ.get(envvars.FLUSH_INTERVAL, "0.5")),
                      max_buffer_bytes=int(os.environ.get(envvars.MAX_BUFFER, str(256 << 20))))
    except (rlscope.RLScopeError, ValueError) as e:
        print(f"rlscope: not recording this process: {e}", file=sys.stderr)
        return
    _enable_intercept(os.environ.get(envvars.INTERCEPT, "auto"))
    _start_python_sampler(out)  # first: its own import is not one of the user's
    from rlscope.inprocess import import_timer

    import_timer.install()  # the user's imports, for the start-up row (docs/analysis.md)


def _start_python_sampler(out: str) -> None:
    """Python stack samples (docs/attribution.md#python-hotspots); off without the variable
    (a process rls-prof did not set up)."""
    value = os.environ.get(envvars.SAMPLE_PYTHON)
    if not value:
        return
    from rlscope.inprocess import pysampler

    try:
        hz = pysampler.parse_rate(value, 0.0)
    except ValueError as e:
        print(f"rlscope: {envvars.SAMPLE_PYTHON}: {e}; no Python stack samples",
              file=sys.stderr)
        return
    pysampler.start(out, hz)


def _watch_sigterm() -> None:
    """The handler runs on the main thread between bytecodes: a SIGTERM that lands as the
    main thread blocks in C (a lock Pool.terminate() holds for good) would never be acted
    on, and the process would outlive it. The native recorder's watch ends it 0.5 s later,
    its trace stopped, as SIGTERM would have (native/common/term_watch.h)."""
    try:
        from rlscope import _native
    except ImportError:  # the Python recorder: no watch
        return
    _native.watch_sigterm()


def _install_sigterm_handler() -> bool:
    """SIGTERM -> SystemExit (so the trace is flushed), unless the program handles it."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False
    try:
        signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread
        return False
    _watch_sigterm()
    import threading

    # Runs first in interpreter shutdown (threading._shutdown), before atexit hooks.
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        try:
            register(_mark_exiting)
        except RuntimeError:  # already shutting down
            pass
    return True


def _enable_intercept(spec: str) -> None:
    """Backend/simulator call wrappers and library annotations (docs/attribution.md),
    installed as each library is imported."""
    if spec.strip() == "none":
        return
    from rlscope import intercept

    try:
        intercept.enable(spec)
    except ValueError as e:
        print(f"rlscope: {envvars.INTERCEPT}: {e}; recording without interception",
              file=sys.stderr)
