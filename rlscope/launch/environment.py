"""The environments rlscope starts processes with: profiled, uninstrumented (calibration's
reference), and the chunk-calibration run. One function each; every caller (rls-prof,
calibration) builds its children's environments here."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rlscope.launch import env

BOOTSTRAP_DIR = str(Path(__file__).resolve().parent.parent / "_bootstrap")
CUDA_LIBRARY = "librlscope_cuda.so"


@dataclass(frozen=True)
class Recording:
    """What a profiled process records, and how."""

    output_dir: str
    recorder: str = "native"
    flush_interval_s: float = 0.5
    intercept: str = "auto"  # env.INTERCEPT value
    cuda: bool = True  # inject the CUDA collector when rlscope has one
    cuda_activity: bool = True  # False: API callbacks only (calibration's full-cuda-api)
    annotations: bool = True  # False: calibration's base configuration
    max_progress: int | None = None  # env.MAX_PROGRESS

    def into(self, output_dir: str | os.PathLike[str]) -> Recording:
        return dataclasses.replace(self, output_dir=os.fspath(output_dir))


def cuda_library() -> str | None:
    """The CUDA collector (docs/cuda.md), installed next to rlscope._native; None when
    rlscope was built without the CUPTI headers. RLSCOPE_CUDA_LIBRARY overrides."""
    override = os.environ.get(env.CUDA_LIBRARY)
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
            if not k.startswith(env.PREFIX)}


def _with_bootstrap(e: dict[str, str]) -> None:
    e[env.BOOTSTRAP_DIR] = BOOTSTRAP_DIR
    old = e.get("PYTHONPATH")
    paths = old.split(os.pathsep) if old else []
    if BOOTSTRAP_DIR not in paths:
        e["PYTHONPATH"] = os.pathsep.join([BOOTSTRAP_DIR, *paths])


def profiled(rec: Recording, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment contract of a profiled process (and its children). The user's own
    settings in ``base`` (RLSCOPE_MAX_BUFFER_BYTES, RLSCOPE_MAX_PROGRESS, ...) are kept."""
    e = dict(os.environ if base is None else base)
    e[env.INTERCEPT] = rec.intercept
    lib = cuda_library() if rec.cuda else None
    e[env.CUDA] = "1" if lib else "0"
    if lib:
        # The preload's constructor only reads the environment; the driver calls its
        # InitializeInjection() at cuInit (docs/cuda.md).
        old_preload = e.get("LD_PRELOAD", "")
        if lib not in old_preload.split():
            e["LD_PRELOAD"] = (lib + " " + old_preload).strip()
        e.setdefault("CUDA_INJECTION64_PATH", lib)
    e[env.OUTPUT_DIR] = rec.output_dir
    e[env.RECORDER] = rec.recorder
    e[env.FLUSH_INTERVAL] = repr(rec.flush_interval_s)
    if rec.annotations:
        e.pop(env.ANNOTATIONS, None)
    else:
        e[env.ANNOTATIONS] = "0"
    if rec.max_progress is not None:
        e[env.MAX_PROGRESS] = str(rec.max_progress)
    if rec.cuda_activity:
        e.pop(env.CUDA_ACTIVITY, None)
    else:
        e[env.CUDA_ACTIVITY] = "0"
    _with_bootstrap(e)
    return e


def uninstrumented(max_progress: int | None = None,
                   base: Mapping[str, str] | None = None) -> dict[str, str]:
    """No recording at all: rlscope's variables removed. With a work bound only the
    bootstrap (which then just counts progress reports) and the bound are set."""
    e = _without_rlscope(base)
    if max_progress is not None:
        e[env.MAX_PROGRESS] = str(max_progress)
        _with_bootstrap(e)
    return e


def chunk_calibration(rec: Recording, copies_dir: str | os.PathLike[str], configs: str,
                      chunk_s: float, max_chunks: int,
                      base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The chunk-calibration run: interception installed, nothing recording, forked copies
    per configuration (``configs``: rlscope.inprocess.chunk_copies.encode_configs) written
    into ``copies_dir`` (docs/overhead-correction.md)."""
    e = profiled(rec, base)
    del e[env.OUTPUT_DIR]
    e.update({env.CHUNK_DIR: os.fspath(copies_dir), env.CHUNK_CONFIGS: configs,
              env.CHUNK_S: repr(chunk_s), env.MAX_CHUNKS: str(max_chunks)})
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
    if not src.get(env.OUTPUT_DIR):
        raise ValueError(f"{env.OUTPUT_DIR} is not set: run the driver under rls-prof "
                         "(rls-prof -o DIR -- python driver.py)")
    skip = {env.HOST, env.BOOTSTRAP_DIR, *env.CHUNK_VARIABLES}
    e = {k: v for k, v in src.items() if k.startswith(env.PREFIX) and k not in skip}
    e[env.OUTPUT_DIR] = os.path.abspath(src[env.OUTPUT_DIR])
    e[env.HOST_DIRS] = "1"
    e[env.BOOTSTRAP_DIR] = BOOTSTRAP_DIR
    e["PYTHONPATH"] = BOOTSTRAP_DIR + os.pathsep + "${PYTHONPATH}"
    return e
