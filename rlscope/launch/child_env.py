"""The environments (``os.environ`` dicts) rlscope starts processes with: profiled,
uninstrumented (calibration's reference), the chunk-calibration run, and Ray workers
started outside rls-prof's tree (``worker_env``). One function each; every caller
(rls-prof, calibration) builds its children's environments here. The variable names are
:mod:`rlscope.envvars`; RL environments are :mod:`rlscope.integrations`' business."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rlscope import envvars

BOOTSTRAP_DIR = str(Path(__file__).resolve().parent.parent / "_bootstrap")
CUDA_LIBRARY = "librlscope_cuda.so"
# Python stack samples a second in each profiled process (rls-prof --sample-python; the
# cost: docs/performance.md#python-stack-sampling).
DEFAULT_SAMPLE_PYTHON_HZ = 50.0


@dataclass(frozen=True)
class Recording:
    """What a profiled process records, and how."""

    output_dir: str
    recorder: str = "native"
    flush_interval_s: float = 0.5
    intercept: str = "auto"  # envvars.INTERCEPT value
    cuda: bool = True  # inject the CUDA collector when rlscope has one
    cuda_activity: bool = True  # False: API callbacks only (calibration's full-cuda-api)
    annotations: bool = True  # False: calibration's base configuration
    max_progress: int | None = None  # envvars.MAX_PROGRESS
    # Size budget of the run directory (envvars.TRACE_BUDGET); None: every event kept.
    trace_budget_bytes: int | None = None
    sample_python_hz: float = DEFAULT_SAMPLE_PYTHON_HZ  # 0: no Python stack samples

    def into(self, output_dir: str | os.PathLike[str]) -> Recording:
        return dataclasses.replace(self, output_dir=os.fspath(output_dir))


def cuda_library() -> str | None:
    """The CUDA collector (docs/cuda.md), installed next to rlscope._native; None when
    rlscope was built without the CUPTI headers. RLSCOPE_CUDA_LIBRARY overrides."""
    override = os.environ.get(envvars.CUDA_LIBRARY)
    if override:
        return override if os.path.exists(override) else None
    dirs = [Path(__file__).resolve().parent.parent]
    try:
        spec = importlib.util.find_spec("rlscope._native")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        dirs.insert(0, Path(spec.origin).parent)  # editable installs keep it in site-packages
    for d in dirs:
        if (d / CUDA_LIBRARY).exists():
            return str(d / CUDA_LIBRARY)
    return None


def _without_rlscope(base: Mapping[str, str] | None) -> dict[str, str]:
    return {k: v for k, v in (os.environ if base is None else base).items()
            if not k.startswith(envvars.PREFIX)}


def _with_bootstrap(e: dict[str, str]) -> None:
    e[envvars.BOOTSTRAP_DIR] = BOOTSTRAP_DIR
    old = e.get("PYTHONPATH")
    paths = old.split(os.pathsep) if old else []
    if BOOTSTRAP_DIR not in paths:
        e["PYTHONPATH"] = os.pathsep.join([BOOTSTRAP_DIR, *paths])


def profiled(rec: Recording, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment contract of a profiled process (and its children). The user's own
    settings in ``base`` (RLSCOPE_MAX_BUFFER_BYTES, RLSCOPE_MAX_PROGRESS, ...) are kept."""
    e = dict(os.environ if base is None else base)
    e[envvars.INTERCEPT] = rec.intercept
    lib = cuda_library() if rec.cuda else None
    e[envvars.CUDA] = "1" if lib else "0"
    if lib:
        # The preload's constructor only reads the environment; the driver calls its
        # InitializeInjection() at cuInit (docs/cuda.md).
        old_preload = e.get("LD_PRELOAD", "")
        if lib not in old_preload.split():
            e["LD_PRELOAD"] = (lib + " " + old_preload).strip()
        e.setdefault("CUDA_INJECTION64_PATH", lib)
    e[envvars.OUTPUT_DIR] = rec.output_dir
    e[envvars.RECORDER] = rec.recorder
    e[envvars.FLUSH_INTERVAL] = repr(rec.flush_interval_s)
    e[envvars.SAMPLE_PYTHON] = repr(rec.sample_python_hz) if rec.sample_python_hz > 0 else "off"
    if rec.annotations:
        e.pop(envvars.ANNOTATIONS, None)
    else:
        e[envvars.ANNOTATIONS] = "0"
    if rec.max_progress is not None:
        e[envvars.MAX_PROGRESS] = str(rec.max_progress)
    if rec.trace_budget_bytes:
        e[envvars.TRACE_BUDGET] = str(rec.trace_budget_bytes)
        e[envvars.RUN_START_NS] = str(time.monotonic_ns())  # CLOCK_MONOTONIC (Linux)
    else:
        e.pop(envvars.TRACE_BUDGET, None)
    if rec.cuda_activity:
        e.pop(envvars.CUDA_ACTIVITY, None)
    else:
        e[envvars.CUDA_ACTIVITY] = "0"
    _with_bootstrap(e)
    return e


def uninstrumented(max_progress: int | None = None,
                   base: Mapping[str, str] | None = None, tally: str | None = None,
                   by: str = "") -> dict[str, str]:
    """No recording at all: rlscope's variables removed. With a work bound only the
    bootstrap (which then just counts progress reports) and the bound are set. With
    ``tally`` (a file; no bound), the main process counts its progress reports, or
    ``by``'s units (RLSCOPE_PROGRESS_BY), and writes the count there at exit; the
    processes it starts run without the bootstrap."""
    e = _without_rlscope(base)
    if max_progress is not None:
        e[envvars.MAX_PROGRESS] = str(max_progress)
        _with_bootstrap(e)
    elif tally is not None:
        e[envvars.WORK_TALLY] = tally
        if by:
            e[envvars.PROGRESS_BY] = by
        _with_bootstrap(e)
    return e


def chunk_calibration(rec: Recording, copies_dir: str | os.PathLike[str], configs: str,
                      chunk_s: float, max_chunks: int, budget_s: float | None = None,
                      base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The chunk-calibration run: interception installed, nothing recording, forked copies
    per configuration (``configs``: rlscope.inprocess.chunk_copies.encode_configs) written
    into ``copies_dir`` (docs/overhead-correction.md)."""
    e = profiled(rec, base)
    del e[envvars.OUTPUT_DIR]
    e.update({envvars.CHUNK_DIR: os.fspath(copies_dir), envvars.CHUNK_CONFIGS: configs,
              envvars.CHUNK_S: repr(chunk_s), envvars.MAX_CHUNKS: str(max_chunks)})
    if budget_s is not None:
        e[envvars.CHUNK_BUDGET_S] = repr(budget_s)
    return e


def worker_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Variables that make processes started outside rls-prof's tree, on any host, record
    into the same run: e.g. Ray workers, as ``ray.init(runtime_env={"env_vars":
    worker_env()})`` in a driver that runs under rls-prof (docs/multiprocess.md#several-hosts).

    The profiled process's recording settings (``base``: default this process's
    environment), ``RLSCOPE_HOST_DIRS=1`` so that each host writes into
    ``OUTPUT_DIR/<host>/``, and the bootstrap first on PYTHONPATH (``${PYTHONPATH}`` is the
    node's own, which Ray expands). Node-specific settings (``RLSCOPE_HOST``) are left to
    each node's environment. rlscope must be installed at the same path on every node.
    """
    src = os.environ if base is None else base
    if not src.get(envvars.OUTPUT_DIR):
        raise ValueError(f"{envvars.OUTPUT_DIR} is not set: run the driver under rls-prof "
                         "(rls-prof -o DIR -- python driver.py)")
    skip = {envvars.HOST, envvars.BOOTSTRAP_DIR, *envvars.CHUNK_VARIABLES}
    e = {k: v for k, v in src.items() if k.startswith(envvars.PREFIX) and k not in skip}
    e[envvars.OUTPUT_DIR] = os.path.abspath(src[envvars.OUTPUT_DIR])
    e[envvars.HOST_DIRS] = "1"
    e[envvars.BOOTSTRAP_DIR] = BOOTSTRAP_DIR
    e["PYTHONPATH"] = BOOTSTRAP_DIR + os.pathsep + "${PYTHONPATH}"
    return e
