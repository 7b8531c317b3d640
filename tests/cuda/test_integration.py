"""The CUDA collector end to end: rls-prof, the reader's merge, rls-analyze, a real
libcudart without a driver, and a CPU-only PyTorch workload."""

from __future__ import annotations

import ctypes.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_traced
from fake_build import Fake

from rlscope.trace import format as fmt
from rlscope.trace.reader import read_trace
from tests.conftest import run_tool
from tests.perfetto_reader import read_perfetto

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.usefixtures("cuda_lib")


def _gpu_lines(stderr: str) -> list[str]:
    """The CUDA collector's lines (the sampler's line is tested in test_sampled_vs_true.py)."""
    return [ln for ln in stderr.splitlines() if "GPU" in ln
            and not ln.startswith("rls-prof: sampled ")]


def test_rls_prof_python_workload_through_fake_cupti(fake: Fake, tmp_path: Path):
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "--", sys.executable,
                 str(HERE / "workloads/fake_gpu_train.py"), str(fake.libcupti))
    assert r.returncode == 0, r.stderr
    assert _gpu_lines(r.stderr) == [
        "rls-prof: GPU: CUDA API calls and GPU activity traced in 1 process"]
    t = read_trace(out)
    (p,) = t.processes  # python.<pid> and cuda.<pid> merged
    assert p.header.source == "python" and p.cuda is not None
    api, gpu = p.api_calls, p.gpu
    assert len(api) == 10 and len(gpu) == 10
    assert sorted(gpu.correlation_id.tolist()) == sorted(api.correlation_id.tolist())
    # Operation tagging by thread and time: each operation encloses its API call, and
    # the GPU work it launched is joined through the correlation id.
    ev = p.events
    begins = ev.time_ns[ev.kind == fmt.OPERATION_BEGIN]
    ends = ev.time_ns[ev.kind == fmt.OPERATION_END]
    names = [p.strings[n] for n in ev.name[ev.kind == fmt.OPERATION_BEGIN]]
    main_tid = p.threads[int(ev.thread[0])].tid
    for i, (b, e) in enumerate(zip(begins, ends, strict=True)):
        inside = (api.start_ns >= b) & (api.end_ns <= e)
        assert inside.sum() == 1 and api.tid[inside][0] == main_tid
        want = "cudaLaunchKernel" if names[i] == "inference" else "cudaMemcpy"
        assert api.strings[api.name[inside][0]] == want
        k = gpu.correlation_id == api.correlation_id[inside][0]
        assert gpu.kind[k][0] == (1 if names[i] == "inference" else 2)
        assert b <= gpu.start_ns[k][0] <= e  # launched (and here run) inside the operation
    rep = run_tool("rls-analyze", "report", str(out))
    assert rep.returncode == 0, rep.stderr
    assert "CUDA API" in rep.stdout and "CPU+GPU" in rep.stdout
    # Kernels per operation: 5 kernels of 2 ms by inference, 5 copies of 1 ms by backprop
    # (the table's GPU times are totals: in seconds).
    section = rep.stdout.split("GPU work by the operation that launched it", 1)[1]
    inf = re.search(r"training\s+inference\s+(\d+)\s+([\d.]+)\s+(\d+)", section)
    bp = re.search(r"training\s+backprop\s+(\d+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)", section)
    assert inf and bp, section
    assert (int(inf[1]), float(inf[2]), int(inf[3])) == (5, 0.010, 0)
    assert (int(bp[1]), int(bp[3]), float(bp[4])) == (0, 5, 0.005)
    assert "Kernel s" in section and "GPU ms / call" in section
    js = json.loads(run_tool("rls-analyze", "report", "--format", "json", str(out)).stdout)
    work = {w["operation"]: w for w in js["gpu_work"]}
    assert work["inference"]["kernels"] == 5 and work["inference"]["kernel_s"] == 0.01
    assert work["backprop"]["copies"] == 5 and work["backprop"]["copy_s"] == 0.005
    tl = run_tool("rls-analyze", "timeline", str(out), "-o", str(tmp_path / "tl.json"))
    assert tl.returncode == 0, tl.stderr
    doc = json.loads((tmp_path / "tl.json").read_text())
    events = doc["traceEvents"]
    assert {"cuda_api", "gpu"} <= {e.get("cat") for e in events}
    # Every launch → its GPU work, as a flow, in both formats.
    assert sum(e["ph"] == "s" for e in events) == sum(e["ph"] == "f" for e in events) == 10
    tl = run_tool("rls-analyze", "timeline", str(out), "-o", str(tmp_path / "tl.pftrace"))
    assert tl.returncode == 0, tl.stderr
    assert "10 flows" in tl.stdout
    d = read_perfetto(tmp_path / "tl.pftrace")
    names = {d.tracks[u].name for u in d.slices}
    assert {"MainThread: operations", "MainThread: CUDA API", "GPU 0 stream 7"} <= names
    assert len(d.flows) == 10
    for launch, work in d.flows.values():
        assert work is not None and launch.start <= work.start
        assert (launch.name, work.name) in {("cudaLaunchKernel", "train_kernel"),
                                            ("cudaMemcpy", "memcpy")}


def test_rls_prof_no_cuda(fake: Fake, tmp_path: Path):
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "--no-cuda", "--", str(fake.app), "basic")
    assert r.returncode == 0, r.stderr
    assert not list(out.glob("cuda.*"))
    assert _gpu_lines(r.stderr) == ["rls-prof: GPU not traced (--no-cuda)"]


def test_rls_prof_cpp_program(fake: Fake, tmp_path: Path):
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "--", str(fake.app), "basic")
    assert r.returncode == 0, r.stderr
    (p,) = read_trace(out).processes  # a process with only a CUDA file still appears
    assert p.header.source == "cuda" and len(p.api_calls) == 6 and len(p.gpu) == 4


def test_cuda_files_go_to_the_host_directory(fake: Fake, tmp_path: Path):
    """RLSCOPE_HOST_DIRS / RLSCOPE_HOST (several hosts): the collector writes its file,
    labelled, into DIR/<host>/, which it creates (no Python process does here)."""
    import os

    out = tmp_path / "run"
    env = dict(os.environ, RLSCOPE_HOST_DIRS="1", RLSCOPE_HOST="gpu node")
    r = run_tool("rls-prof", "-o", str(out), "--", str(fake.app), "basic", env=env)
    assert r.returncode == 0, r.stderr
    assert len(list((out / "gpu_node").glob("cuda.*" + fmt.FILE_SUFFIX))) == 1
    (p,) = read_trace(out).processes
    assert p.header.host == "gpu_node" and len(p.api_calls) == 6


@pytest.fixture(scope="module")
def nodriver_app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found")
    if ctypes.util.find_library("cuda"):
        pytest.skip("an NVIDIA driver is installed; this test is for machines without one")
    app = tmp_path_factory.mktemp("nvcc") / "nodriver_app"
    r = subprocess.run([nvcc, "-cudart", "shared", "-o", str(app), str(HERE / "nodriver_app.cu")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return app


def test_real_cudart_without_driver_degrades_cleanly(nodriver_app: Path, tmp_path: Path):
    plain = subprocess.run([str(nodriver_app)], capture_output=True, text=True, timeout=60)
    traced = run_traced([str(nodriver_app)], tmp_path / "t")
    assert traced.returncode == plain.returncode == 0
    assert traced.stdout == plain.stdout and "cudaErrorInsufficientDriver" in plain.stdout
    lines = traced.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlscope: GPU not traced in pid ")
    assert "no NVIDIA driver" in lines[0]
    assert not list((tmp_path / "t").glob("cuda.*"))


def test_cpu_torch_workload_unaffected(tmp_path: Path):
    pytest.importorskip("torch")
    script = str(HERE / "workloads/cpu_torch.py")
    plain = subprocess.run([sys.executable, script], capture_output=True, text=True,
                           timeout=120)
    assert plain.returncode == 0, plain.stderr
    r = run_tool("rls-prof", "-o", str(tmp_path / "run"), "--", sys.executable, script)
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout
    assert "rlscope:" not in r.stderr  # the collector itself stays silent
    files = sorted(f.name for f in (tmp_path / "run").glob("*.rlscope"))
    (py,) = [f for f in files if f.startswith("python.")]
    if "cuda_available=True" in plain.stdout:
        # torch.cuda.is_available() initialises CUDA where there is a GPU (seen on an
        # H100): that process is traced (its collector's file beside its Python one), its
        # CPU work unchanged.
        assert _gpu_lines(r.stderr) == [
            "rls-prof: GPU: CUDA API calls and GPU activity traced in 1 process"]
        assert files == [py.replace("python.", "cuda."), py]
    else:
        assert _gpu_lines(r.stderr) == [
            "rls-prof: GPU not traced: no process initialised CUDA "
            "(CPU-only workload, or no NVIDIA driver)"]
        assert files == [py]


def test_parallel_analysis_with_gpu_work(fake: Fake, tmp_path: Path):
    """Two processes with CUDA files: rls-analyze --jobs 2 equals the serial analysis
    (GPU rows, the GPU time per phase the utilisation section uses)."""
    import pandas as pd

    from rlscope.analysis import load

    runs = []
    for k in range(2):
        out = tmp_path / f"r{k}"
        r = run_tool("rls-prof", "-o", str(out), "--", sys.executable,
                     str(HERE / "workloads/fake_gpu_train.py"), str(fake.libcupti))
        assert r.returncode == 0, r.stderr
        runs.append(out)
    for f in runs[1].glob("*" + fmt.FILE_SUFFIX):  # one directory, two processes
        shutil.copy(f, runs[0])
    serial, two = load(runs[0], jobs=1), load(runs[0], jobs=2)
    assert len(serial.processes()) == 2 and len(serial.gpu())
    for name in ("operations", "gpu", "breakdown", "utilisation", "processes"):
        pd.testing.assert_frame_equal(getattr(serial, name)(), getattr(two, name)(),
                                      check_exact=True, obj=name)
    one = run_tool("rls-analyze", "report", str(runs[0]), "--format", "json", "--jobs", "1")
    par = run_tool("rls-analyze", "report", str(runs[0]), "--format", "json", "--jobs", "2")
    assert one.returncode == 0 and one.stdout == par.stdout
