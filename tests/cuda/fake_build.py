"""Build the fake libcupti.so.13 and the test programs against the real CUPTI headers,
and the fake libnvidia-ml.so.1 (no headers needed).

Used by the tests in this directory and by scripts/bench/cuda_callback.py and
scripts/bench/sampler_overhead.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


def cupti_include() -> Path | None:
    """Directory holding cupti.h (and cuda.h), or None."""
    cands = []
    for var in ("CUPTI_INCLUDE_DIR", "CUDA_HOME", "CUDA_PATH"):
        v = os.environ.get(var)
        if v:
            cands += [Path(v), Path(v) / "include", Path(v) / "extras/CUPTI/include"]
    for root in ("/usr/local/cuda", "/usr/local/cuda-13.0", "/opt/cuda"):
        cands += [Path(root) / "include", Path(root) / "extras/CUPTI/include",
                  Path(root) / "targets/x86_64-linux/include"]
    for c in cands:
        if (c / "cupti.h").exists() and (c / "cuda.h").exists():
            return c
    return None


@dataclass
class Fake:
    dir: Path
    libcupti: Path  # the fake libcupti.so.13
    app: Path  # tests/cuda/cuda_app.cpp, linked against the fake


def build(dst: Path) -> Fake:
    """Compile the fake and the app into ``dst``; raises RuntimeError with the compiler
    output when that fails, or when g++ / the headers are missing."""
    inc = cupti_include()
    if inc is None:
        raise RuntimeError("CUPTI headers (cupti.h) not found; set CUDA_HOME")
    cxx = shutil.which(os.environ.get("CXX", "g++"))
    if cxx is None:
        raise RuntimeError("no C++ compiler (g++) on PATH")
    dst.mkdir(parents=True, exist_ok=True)
    lib = dst / "libcupti.so.13"
    app = dst / "cuda_app"
    cmds = [
        [cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", f"-I{inc}",
         "-Wl,-soname,libcupti.so.13", f"-Wl,--version-script={HERE / 'fake_cupti.map'}",
         "-o", str(lib), str(HERE / "fake_cupti.cpp"), "-ldl", "-lpthread"],
        [cxx, "-std=c++17", "-O2", f"-I{inc}", "-o", str(app), str(HERE / "cuda_app.cpp"),
         str(lib), f"-Wl,-rpath,{dst}", "-lpthread"],
    ]
    for cmd in cmds:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return Fake(dst, lib, app)


def build_nvml(dst: Path) -> Path:
    """Compile the fake libnvidia-ml.so.1 (fake_nvml.c) into ``dst``; RuntimeError as
    :func:`build`."""
    cc = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("cc")
    if cc is None:
        raise RuntimeError("no C compiler (gcc) on PATH")
    dst.mkdir(parents=True, exist_ok=True)
    lib = dst / "libnvidia-ml.so.1"
    cmd = [cc, "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-Wl,-soname,libnvidia-ml.so.1",
           "-o", str(lib), str(HERE / "fake_nvml.c"), "-lpthread"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return lib
