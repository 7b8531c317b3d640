"""Run metadata (run.json) that rls-prof writes beside the trace files."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import signal
import sys
import time
from importlib import metadata as _md
from pathlib import Path
from typing import Any

from rlscope._version import __version__
from rlscope.trace import format as fmt

RUN_FILE = "run.json"
_PACKAGES = ("numpy", "torch", "tensorflow", "tensorflow-cpu", "jax", "gymnasium",
             "stable-baselines3", "mujoco", "box2d", "ale-py", "pybullet")


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "rlscope": __version__}
    for name in _PACKAGES:
        try:
            out[name] = _md.version(name)
        except _md.PackageNotFoundError:
            pass
    return out


def _iso(ns: int) -> str:
    return _dt.datetime.fromtimestamp(ns / 1e9, _dt.UTC).isoformat()


def start_run_metadata(command: list[str], recorder: str) -> dict[str, Any]:
    import psutil

    clock = fmt.read_clock_pair()
    return {
        "format_version": fmt.FORMAT_VERSION,
        "command": command,
        "cwd": os.getcwd(),
        "recorder": recorder,
        "status": "running",
        "start": {"realtime_ns": clock.realtime_ns, "monotonic_ns": clock.monotonic_ns,
                  "iso": _iso(clock.realtime_ns)},
        "host": {"name": fmt.host_name(), "platform": platform.platform(),
                 "machine": platform.machine(), "cpus": os.cpu_count(),
                 "memory_bytes": psutil.virtual_memory().total},
        "versions": _versions(),
        "launcher": {"pid": os.getpid(), "python": sys.executable},
    }


def finish_run_metadata(meta: dict[str, Any], returncode: int, signals: list[int]) -> None:
    end_rt, end_mono = time.time_ns(), time.monotonic_ns()
    meta["end"] = {"realtime_ns": end_rt, "monotonic_ns": end_mono, "iso": _iso(end_rt)}
    meta["duration_s"] = (end_mono - meta["start"]["monotonic_ns"]) / 1e9
    if returncode >= 0:
        meta["exit_status"] = returncode
        meta["status"] = "succeeded" if returncode == 0 else "failed"
    else:
        meta["exit_status"] = 128 - returncode
        meta["signal"] = signal.Signals(-returncode).name
        meta["status"] = "killed"
    if signals:
        meta["launcher_signals"] = [signal.Signals(s).name for s in signals]


def write_run_metadata(directory: Path, meta: dict[str, Any]) -> None:
    """Atomic write, so a reader never sees half a file."""
    tmp = directory / (RUN_FILE + ".tmp")
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, directory / RUN_FILE)
