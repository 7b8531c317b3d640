"""Start recording in a process launched by ``rls-prof``, from its environment.

The environment contract (set by rls-prof, inherited by child processes) is documented in
docs/rls-prof.md.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

ENV_OUTPUT_DIR = "RLSCOPE_OUTPUT_DIR"
ENV_RECORDER = "RLSCOPE_RECORDER"
ENV_FLUSH_INTERVAL = "RLSCOPE_FLUSH_INTERVAL_S"
ENV_MAX_BUFFER = "RLSCOPE_MAX_BUFFER_BYTES"
ENV_BOOTSTRAP = "RLSCOPE_BOOTSTRAP_DIR"
ENV_INTERCEPT = "RLSCOPE_INTERCEPT"  # "auto" (default), "none", or "torch,gym,..."


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Unwind like an exit so atexit flushes the trace; 128 + signal, as a shell reports.
    raise SystemExit(128 + signum)


def autostart() -> None:
    if os.environ.get("RLSCOPE_MAX_PROGRESS"):  # calibration work bound (any config)
        from rlscope.calibration.switches import apply_work_limit

        apply_work_limit()
    if os.environ.get("RLSCOPE_CALIBRATE_CHUNKS"):  # calibration by chunks: no recording
        from rlscope.calibration import chunks

        _enable_intercept(os.environ.get(ENV_INTERCEPT, "auto"))
        chunks.install_from_env()
        return
    out = os.environ.get(ENV_OUTPUT_DIR)
    if not out:
        return
    import rlscope

    try:
        rlscope.start(out, recorder=os.environ.get(ENV_RECORDER, "native"),
                      flush_interval_s=float(os.environ.get(ENV_FLUSH_INTERVAL, "0.5")),
                      max_buffer_bytes=int(os.environ.get(ENV_MAX_BUFFER, str(256 << 20))))
    except (rlscope.RLScopeError, ValueError) as e:
        print(f"rlscope: not recording this process: {e}", file=sys.stderr)
        return
    _enable_intercept(os.environ.get(ENV_INTERCEPT, "auto"))
    if os.environ.get("RLSCOPE_ANNOTATIONS") == "0":  # calibration's base configuration
        from rlscope.calibration.switches import apply_annotation_switch

        apply_annotation_switch()
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        try:
            signal.signal(signal.SIGTERM, _on_sigterm)
        except ValueError:  # not the main thread
            pass


def _enable_intercept(spec: str) -> None:
    """Backend/simulator call wrappers and library annotations (docs/attribution.md),
    installed as each library is imported."""
    from rlscope import intercept

    try:
        intercept.enable(spec)
    except ValueError as e:
        print(f"rlscope: {ENV_INTERCEPT}: {e}; recording without interception",
              file=sys.stderr)
