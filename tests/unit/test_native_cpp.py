"""Build and run the plain C++ tests (native/tests) with CMake: the native core's and,
when the CUPTI headers are found, the CUDA collector's (filter list, API-call drain,
CudaChunk encoder)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Build:
    dir: Path
    cupti_include: Path | None  # where CMake found cupti.h; None: no CUDA tests


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    if shutil.which("cmake") is None:
        pytest.skip("needs cmake")
    build = tmp_path_factory.mktemp("native") / "build"
    configure = ["cmake", "-S", str(REPO), "-B", str(build), "-DRLSCOPE_BUILD_PYTHON=OFF",
                 "-DRLSCOPE_BUILD_NATIVE_TESTS=ON", "-DCMAKE_BUILD_TYPE=Release"]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    r = subprocess.run(configure, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    cache = (build / "CMakeCache.txt").read_text()
    found = {k: v for k, v in re.findall(r"^(RLSCOPE_CU\w+_INCLUDE_DIR):PATH=(.*)$", cache, re.M)}
    cuda = (len(found) == 2 and all(v and not v.endswith("NOTFOUND") for v in found.values()))
    targets = ["rlscope_native_tests"] + (["rlscope_cuda_tests"] if cuda else [])
    jobs = str(max(1, os.cpu_count() or 1))
    r = subprocess.run(["cmake", "--build", str(build), "--target", *targets, "-j", jobs],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return Build(build, Path(found["RLSCOPE_CUPTI_INCLUDE_DIR"]) if cuda else None)


def test_native_cpp(build: Build, tmp_path: Path):
    exe = build.dir / "native" / "tests" / "rlscope_native_tests"
    r = subprocess.run([str(exe), str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all native tests passed" in r.stdout


def cuda_tests(build: Build) -> Path:
    if build.cupti_include is None:
        pytest.skip("CUPTI headers (cupti.h) not found by CMake; set CUDA_HOME")
    return build.dir / "native" / "cuda" / "rlscope_cuda_tests"


def test_cuda_cpp(build: Build, tmp_path: Path, trace_proto):
    r = subprocess.run([str(cuda_tests(build)), str(tmp_path)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all CUDA native tests passed" in r.stdout
    # The chunk the C++ test checked with its own reader, decoded by protobuf.
    header, chunk = read_records(tmp_path / "cuda_chunk.rlscope", trace_proto)
    assert header.WhichOneof("body") == "header" and header.header.source == "cuda"
    c = chunk.cuda_chunk
    assert chunk.WhichOneof("body") == "cuda_chunk" and c.sequence == 0
    strings = {s.id: s.value for s in c.strings}
    assert [strings[i] for i in c.api_name] == ["runtime_cbid_211", "runtime_cbid_13",
                                                "driver_cbid_307"]
    assert c.api_base_ns == 1000 and list(c.api_start_delta_ns) == [0, 200, -300]
    assert list(c.api_correlation_delta) == [40, 1, -34]
    assert list(c.api_domain) == [1, 1, 2]
    assert {(t.index, t.tid, t.name) for t in c.threads} == {(1, 4242, "main"), (2, 4243, "")}
    assert list(c.gpu_start_delta_ns) == [0, -1000, 2000] and c.gpu_base_ns == 5000
    assert list(c.gpu_kind) == [1, 2, 3] and list(c.gpu_bytes) == [0, 1 << 20, 4096]
    assert strings[c.gpu_name[0]] == "vectorAdd" and list(c.gpu_name[1:]) == [0, 0]
    assert list(c.kernel_dims) == [128, 2, 1, 256, 1, 1] and list(c.memcpy_kind) == [1]
    assert list(c.ext_id) == [0xFEEDBEEFCAFE] and list(c.ext_correlation) == [41]
    assert c.overhead_base_ns == 3000 and list(c.overhead_object_id) == [12345]
    assert (c.dropped_api_calls, c.dropped_activity_records,
            c.invalid_activity_records) == (5, 3, 2)


def test_cuda_filter_list_names_are_cupti_callbacks(build: Build):
    """Every filtered name is a CUDA API callback of the CUPTI headers (after the
    "_vNNNN" suffix is stripped): a typo would silently filter nothing."""
    r = subprocess.run([str(cuda_tests(build)), "--filter-list"], capture_output=True,
                       text=True, timeout=60, check=True)
    names = r.stdout.split()
    assert len(names) == len(set(names)) > 0
    known = set()
    for header, prefix in (("cupti_runtime_cbid.h", "CUPTI_RUNTIME_TRACE_CBID_"),
                           ("cupti_driver_cbid.h", "CUPTI_DRIVER_TRACE_CBID_")):
        text = (build.cupti_include / header).read_text()
        known |= {re.sub(r"_v\d+$", "", n) for n in re.findall(prefix + r"(\w+)\s*=", text)}
    assert sorted(set(names) - known) == []


def read_records(path: Path, file_proto):
    """A trace file's records, parsed with protobuf from the compiled schema."""
    from google.protobuf import descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_proto)
    record = message_factory.GetMessageClass(pool.FindMessageTypeByName("rlscope.trace.Record"))
    data = path.read_bytes()
    assert data[:8] == b"RLSCOPE\n"
    pos, out = 8, []
    while pos < len(data):
        n = shift = 0
        while True:
            b = data[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        out.append(record.FromString(data[pos:pos + n]))
        pos += n
    return out
