"""Run metadata (run.json) that rls-prof writes beside the trace files.

Written before and after every run, so it must be cheap to build: installed versions come
from one scan of the ``*.dist-info`` directory names (importlib.metadata takes ~10 ms per
package), the machine's memory from sysconf.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

from rlscope._version import __version__
from rlscope.trace import format as fmt

_PACKAGES = ("numpy", "torch", "tensorflow", "tensorflow-cpu", "jax", "gymnasium",
             "stable-baselines3", "mujoco", "box2d", "ale-py", "pybullet")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def installed_versions(names: tuple[str, ...] = _PACKAGES,
                       path: list[str] | None = None) -> dict[str, str]:
    """Versions of the ``names`` installed on ``path`` (sys.path), the first found of
    each, read from ``<name>-<version>.dist-info`` directory names."""
    wanted = {_normalise(n): n for n in names}
    out: dict[str, str] = {}
    for d in sys.path if path is None else path:
        try:
            entries = os.listdir(d or ".")
        except OSError:
            continue
        for e in entries:
            if not e.endswith(".dist-info"):
                continue
            dist, _, version = e[:-len(".dist-info")].partition("-")
            key = wanted.get(_normalise(dist))
            if key is not None and version and key not in out:
                out[key] = version
    return out


def _versions() -> dict[str, str]:
    out = {"python": ".".join(map(str, sys.version_info[:3])), "rlscope": __version__}
    out.update(sorted(installed_versions().items()))
    return out


def _platform() -> str:
    """platform.platform()'s string, without its scan of the interpreter binary."""
    u = os.uname()
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        libc = ""
    return f"{u.sysname}-{u.release}-{u.machine}" + (
        f"-with-{libc.replace(' ', '')}" if libc else "")


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _iso(ns: int) -> str:
    return _dt.datetime.fromtimestamp(ns / 1e9, _dt.UTC).isoformat()


def start_run_metadata(command: list[str], recorder: str) -> dict[str, Any]:
    clock = fmt.read_clock_pair()
    return {
        "format_version": fmt.FORMAT_VERSION,
        "command": command,
        "cwd": os.getcwd(),
        "recorder": recorder,
        "status": "running",
        "start": {"realtime_ns": clock.realtime_ns, "monotonic_ns": clock.monotonic_ns,
                  "iso": _iso(clock.realtime_ns)},
        "host": {"name": fmt.host_name(), "platform": _platform(),
                 "machine": os.uname().machine, "cpus": os.cpu_count(),
                 "memory_bytes": _memory_bytes()},
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
    tmp = directory / (fmt.RUN_FILE + ".tmp")
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, directory / fmt.RUN_FILE)
