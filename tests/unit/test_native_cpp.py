"""Build and run the plain C++ tests of the native core (native/tests) with CMake."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_native_cpp(tmp_path):
    build = tmp_path / "build"
    configure = ["cmake", "-S", str(REPO), "-B", str(build), "-DRLSCOPE_BUILD_PYTHON=OFF",
                 "-DRLSCOPE_BUILD_NATIVE_TESTS=ON", "-DCMAKE_BUILD_TYPE=Release"]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    subprocess.run(configure, check=True, capture_output=True, text=True)
    jobs = str(max(1, os.cpu_count() or 1))
    r = subprocess.run(["cmake", "--build", str(build), "--target", "rlscope_native_tests",
                        "-j", jobs], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    exe = build / "native" / "tests" / "rlscope_native_tests"
    r = subprocess.run([str(exe), str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all native tests passed" in r.stdout
