"""JAX-style asynchronous dispatch without a GPU (fake libcupti): the launching
operation returns before the device finishes, its kernel still running while the host
works on and then waits in a device synchronisation. The kernel is charged to the
operation that launched it although it ends after that operation closed; per operation,
"GPU time" (the kernels it launched) against "time the host waited for the GPU" (the
synchronising operation), and the GPU-only time under the wait charged to the launcher."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from fake_build import Fake

from rlscope.analysis import load
from tests.conftest import run_tool

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.usefixtures("cuda_lib")
KERNEL_MS, HOST_MS = 40.0, 10.0


@pytest.fixture(scope="module")
def run(fake: Fake, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("async") / "run"
    r = run_tool("rls-prof", "-o", str(out), "--no-sample", "--", sys.executable,
                 str(HERE / "workloads/async_dispatch.py"), str(fake.libcupti), str(KERNEL_MS),
                 str(HOST_MS))
    assert r.returncode == 0, r.stderr
    return load(out), json.loads(r.stdout.strip().splitlines()[-1])


def _op(ops, name: str):
    (row,) = [r for r in ops.itertuples() if r.phase == "training" and
              str(r.operation).split("/")[-1] == name]
    return row


def test_kernels_charged_to_the_launching_operation(run):
    a, info = run
    g = a.gpu()
    k = g[g["category"] == "GPU kernel"]
    # Every kernel, although each ended ~KERNEL_MS after "dispatch" closed.
    assert set(k["operation"].map(lambda p: str(p).split("/")[-1])) == {"dispatch"}
    assert int(k["count"].sum()) == info["steps"]
    assert k["seconds"].sum() == pytest.approx(info["kernel_ns"] / 1e9, rel=1e-9)


def test_gpu_time_vs_time_the_host_waited(run):
    a, info = run
    ops = a.operations()
    dispatch, host, block = (_op(ops, n) for n in ("dispatch", "host_work", "block_until_ready"))
    # The host returned at once: dispatch's time on the CPU is a small share of its
    # kernels' (its wall time holds the GPU-only time charged to it, below).
    assert dispatch.cpu_only_s + dispatch.cpu_gpu_s < 0.5 * info["kernel_ns"] / 1e9
    # While the host waited in the synchronisation, only the GPU worked: that GPU-only time
    # is the launcher's, so block_until_ready keeps (almost) nothing of its wall time:
    # only what came after the kernel's end (the host woken late, under load).
    waited_s, late_s = info["waited_ns"] / 1e9, info["late_ns"] / 1e9
    # the kernel outlived host_work (the workload makes sure of it)
    assert waited_s >= 0.9 * info["steps"] * info["margin_ns"] / 1e9
    assert dispatch.gpu_s == pytest.approx(info["gpu_wait_ns"] / 1e9, abs=2e-3 * info["steps"])
    assert dispatch.gpu_only_s == pytest.approx(dispatch.gpu_s, rel=1e-6)
    assert block.wall_s < 0.1 * waited_s + late_s + 2e-3 * info["steps"]
    # The host's own work overlapped the kernel: CPU + GPU, charged to host_work's CPU time.
    assert host.cpu_gpu_s > 0.5 * HOST_MS / 1e3 * info["steps"]
    assert host.gpu_s == 0
