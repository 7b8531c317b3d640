"""librlscope_cuda against a fake libcupti: every recorded field, read back with the reader.

The fake (fake_cupti.cpp) is built here from the real CUPTI headers with the real
library's symbol versioning; cuda_app.cpp plays the CUDA application and prints what it
did, which is compared with the trace.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import app_json, run_traced
from fake_build import Fake

from rlscope.trace import gpu as g
from rlscope.trace.reader import read_process, read_trace

pytestmark = pytest.mark.usefixtures("cuda_lib")


def _only_cuda_file(out: Path) -> Path:
    files = sorted(out.glob("cuda.*.rlscope"))
    assert len(files) == 1, files
    return files[0]


def test_basic_trace_every_field(fake: Fake, tmp_path: Path):
    out = tmp_path / "t"
    r = run_traced([str(fake.app), "basic"], out)
    (info,) = app_json(r)
    assert r.stderr == ""  # tracing is silent when it works
    p = read_process(_only_cuda_file(out))
    h = p.header
    assert (h.source, h.pid, h.recorder) == ("cuda", info["pid"], "cupti")
    assert h.process_name == "cuda_app" and h.argv[-1] == "basic"
    assert p.cuda is not None and p.cuda.cupti_version >= 130000
    assert 0 < p.cuda.cupti_offset_error_ns < 1_000_000

    a = p.api_calls
    names = [a.strings[i] for i in a.name]
    # Filtered trivial calls (cudaGetDevice, cuCtxGetCurrent) and the driver call nested
    # in cudaMalloc are absent; the top-level driver call is present.
    assert names == ["cudaLaunchKernel", "cudaMemcpy", "cudaMemsetAsync", "cudaMalloc",
                     "cuLaunchKernel", "cudaDeviceSynchronize"]
    assert a.correlation_id.tolist() == [info[k] for k in
                                         ("launch", "memcpy", "memset", "malloc", "drv", "sync")]
    assert a.domain.tolist() == [g.RUNTIME_API] * 4 + [g.DRIVER_API, g.RUNTIME_API]
    assert set(a.tid.tolist()) == {info["tid"]}
    assert np.all(a.end_ns >= a.start_ns)
    assert np.all(np.diff(a.start_ns) > 0)
    assert a.start_ns[0] >= info["t0_mono"] - 10_000 and a.end_ns[-1] <= info["end_mono"]
    assert a.external_id.tolist() == [42, 0, 0, 0, 0, 0]
    assert next(iter(p.cuda.threads.values())).tid == info["tid"]

    gp = p.gpu
    assert gp.kind.tolist() == [g.KERNEL, g.MEMCPY, g.MEMSET, g.KERNEL]  # sorted by start
    assert [gp.strings[i] for i in gp.name] == ["kern_a", "", "", "kern_b"]
    assert gp.device.tolist() == [0, 0, 1, 1] and gp.stream.tolist() == [7, 7, 3, 9]
    assert gp.correlation_id.tolist() == [info["launch"], info["memcpy"], info["memset"],
                                          info["drv"]]
    assert gp.bytes.tolist() == [0, 4096, 256, 0]
    assert gp.copy_kind.tolist() == [0, 1, 0, 0]  # HtoD
    assert gp.grid.tolist() == [[2, 3, 4], [0, 0, 0], [0, 0, 0], [1, 1, 1]]
    assert gp.block.tolist() == [[32, 1, 1], [0, 0, 0], [0, 0, 0], [128, 2, 1]]
    assert (gp.end_ns - gp.start_ns).tolist() == [4000, 1000, 500, 3000]
    # CUPTI time -> CLOCK_MONOTONIC: the app's t0 (cupti) is info["t0_mono"].
    tol = info["window"] + 2 * p.cuda.cupti_offset_error_ns + 2_000
    expected = np.array([1000, 6000, 8000, 9000]) + info["t0_mono"]
    assert np.all(np.abs(gp.start_ns - expected) <= tol), (gp.start_ns - expected, tol)

    ext = p.cuda.external
    assert ext.kind.tolist() == [3] and ext.external_id.tolist() == [42]
    assert ext.correlation_id.tolist() == [info["launch"]]
    ov = p.cuda.overhead
    assert ov.kind.tolist() == [1 << 16] and ov.object_id.tolist() == [info["tid"]]
    assert (ov.end_ns - ov.start_ns).tolist() == [200]
    assert p.cuda.dropped_activity_records == 3 and p.cuda.invalid_activity_records == 1
    assert any("dropped 3" in w for w in p.warnings)
    assert any("zero or inverted" in w for w in p.warnings)


def test_records_split_across_many_buffers(fake: Fake, tmp_path: Path):
    out = tmp_path / "t"
    app_json(run_traced([str(fake.app), "many", "3000"], out, RLSCOPE_CUDA_BUFFER_BYTES="4096"))
    p = read_process(_only_cuda_file(out))
    assert len(p.api_calls) == 3000 and len(p.gpu) == 3000
    assert sorted(p.gpu.correlation_id.tolist()) == sorted(p.api_calls.correlation_id.tolist())
    assert np.all(np.diff(p.gpu.start_ns) == 10)
    assert p.cuda is not None and p.cuda.dropped_activity_records == 0
    assert p.cuda.invalid_activity_records == 0 and p.warnings == []


def test_several_threads(fake: Fake, tmp_path: Path):
    out = tmp_path / "t"
    (info,) = app_json(run_traced([str(fake.app), "threads", "4"], out))
    p = read_process(_only_cuda_file(out))
    tids, counts = np.unique(p.api_calls.tid, return_counts=True)
    assert sorted(tids.tolist()) == sorted(info["tids"]) and counts.tolist() == [100] * 4
    assert len(set(p.api_calls.correlation_id.tolist())) == 400
    assert p.cuda is not None and {t.tid for t in p.cuda.threads.values()} == set(info["tids"])


def test_fork_after_init_child_stays_out(fake: Fake, tmp_path: Path):
    out = tmp_path / "t"
    (info,) = app_json(run_traced([str(fake.app), "fork"], out))
    assert info["child_status"] == 0
    p = read_process(_only_cuda_file(out))  # no file for the child
    assert p.pid == info["pid"]
    assert p.api_calls.correlation_id.tolist() == [info["a"], info["b"]]


def test_fork_before_init_each_process_has_a_file(fake: Fake, tmp_path: Path):
    out = tmp_path / "t"
    infos = app_json(run_traced([str(fake.app), "fork_before_init"], out))
    t = read_trace(out)
    assert sorted(p.pid for p in t.processes) == sorted(i["pid"] for i in infos)
    for p in t.processes:
        assert len(p.api_calls) == 1 and len(p.events) == 0


@pytest.mark.parametrize(("env", "message"), [
    ({"FAKE_CUPTI_SUBSCRIBE_RESULT": "39", "FAKE_CUPTI_OLD_SUBSCRIBER": "Nsight Systems"},
     "another CUPTI client is active (Nsight Systems)"),
    ({"FAKE_CUPTI_SUBSCRIBE_RESULT": "999"}, "cuptiSubscribe failed: CUPTI_ERROR_UNKNOWN"),
    ({"RLSCOPE_CUPTI_LIBRARY": "/nonexistent/libcupti.so.13"}, "cannot load"),
    ({"FAKE_CUPTI_VERSION": "24"}, "needs CUPTI 13"),
    ({"FAKE_CUPTI_ACTIVITY_FAIL": "1"}, "cuptiActivityEnable(CONCURRENT_KERNEL) failed"),
])
def test_degrades_with_one_line(fake: Fake, tmp_path: Path, env: dict[str, str], message: str):
    out = tmp_path / "t"
    r = run_traced([str(fake.app), "basic"], out, **env)
    (info,) = app_json(r)  # the workload ran to the end
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"rlscope: GPU not traced in pid {info['pid']}: ")
    assert message in lines[0]
    assert not list(out.glob("cuda.*"))


def test_inert_in_processes_that_do_not_use_cuda(fake: Fake, tmp_path: Path):
    out = tmp_path / "t"
    r = run_traced(["sh", "-c", "echo hi"], out)
    assert (r.returncode, r.stdout, r.stderr) == (0, "hi\n", "")
    r = run_traced([str(fake.app), "threads", "0"], out, RLSCOPE_CUDA="0")
    assert r.returncode == 0 and r.stderr == ""
    assert not list(out.glob("cuda.*"))
