"""Fixtures for the CUDA collector tests: the built librlscope_cuda, a fake libcupti
built from the real CUPTI headers, and running a program under the env contract."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_build import Fake, build, build_nvml, cupti_include

from rlscope.launch.child_env import Recording, cuda_library, profiled


@pytest.fixture(scope="session")
def cuda_lib() -> str:
    lib = cuda_library()
    if lib is None:
        pytest.skip("rlscope was built without the CUDA collector (no CUPTI headers)")
    return lib


@pytest.fixture(scope="session")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Fake:
    if cupti_include() is None:
        pytest.skip("CUPTI headers (cupti.h) not found; set CUDA_HOME")
    try:
        return build(tmp_path_factory.mktemp("fake_cupti"))
    except RuntimeError as e:
        if "not found" in str(e) or "no C++ compiler" in str(e):
            pytest.skip(str(e))
        raise


@pytest.fixture(scope="session")
def fake_nvml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fake libnvidia-ml.so.1 (fake_nvml.c); values scripted by FAKE_NVML_*."""
    try:
        return build_nvml(tmp_path_factory.mktemp("fake_nvml"))
    except RuntimeError as e:
        if "no C compiler" in str(e):
            pytest.skip(str(e))
        raise


def traced_env(out: Path, **extra: str) -> dict[str, str]:
    """What rls-prof gives a profiled process, plus `extra`."""
    out.mkdir(parents=True, exist_ok=True)
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("RLSCOPE_", "FAKE_CUPTI_", "FAKE_NVML_")) and k not in
            ("LD_PRELOAD", "CUDA_INJECTION64_PATH")}
    env = profiled(Recording(str(out), "native", 0.05), base=base)
    env.update(extra)
    return env


def run_traced(cmd: list[str], out: Path, timeout: float = 30,
               **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, env=traced_env(out, **extra), capture_output=True, text=True,
                          timeout=timeout)


def app_json(r: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert r.returncode == 0, r.stdout + r.stderr
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
