"""Real-GPU checks of the CUDA collector (skipped without a GPU): a PyTorch CUDA workload
under rls-prof, read back. Run on a GPU machine with scripts/gpu_check.sh."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from rlscope.launch.child_env import cuda_library
from rlscope.trace import format as fmt
from rlscope.trace import gpu as g
from rlscope.trace.data import ProcessTrace
from rlscope.trace.reader import read_trace
from tests.conftest import run_tool

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU (or CPU-only torch)"),
    pytest.mark.skipif(cuda_library() is None, reason="rlscope built without the CUDA collector"),
]

HERE = Path(__file__).resolve().parent
STEPS = 40


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[ProcessTrace, dict, str]:
    out = tmp_path_factory.mktemp("gpu") / "run"
    r = run_tool("rls-prof", "-o", str(out), "--", sys.executable,
                 str(HERE / "workloads/torch_cuda_train.py"), str(STEPS), timeout=600)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout.strip().splitlines()[-1])
    (p,) = read_trace(out).processes
    return p, info, r.stderr


def _ops(p: ProcessTrace) -> list[tuple[str, int, int, int]]:
    """(name, tid, begin, end) of every operation (they do not nest here)."""
    ev = p.events
    out, open_ = [], {}
    for t, th, k, n in zip(ev.time_ns, ev.thread, ev.kind, ev.name, strict=True):
        if k == fmt.OPERATION_BEGIN:
            open_[(th, n)] = t
        elif k == fmt.OPERATION_END:
            out.append((p.strings[n], p.threads[int(th)].tid, int(open_.pop((th, n))), int(t)))
    return out


def test_traced_with_no_loss(traced):
    p, _, stderr = traced
    assert "GPU: CUDA API calls and GPU activity traced in 1 process" in stderr
    assert "rlscope: GPU not traced" not in stderr
    assert p.cuda is not None and p.cuda.dropped_activity_records == 0
    assert p.cuda.dropped_api_calls == 0
    assert 0 <= p.cuda.cupti_offset_error_ns < 10_000


def test_kernel_and_copy_counts(traced):
    p, _, _ = traced
    kinds = p.gpu.kind
    assert (kinds == g.KERNEL).sum() >= STEPS * 5  # forward, backward, Adam: many per step
    h2d = (kinds == g.MEMCPY) & (p.gpu.copy_kind == 1)
    d2h = (kinds == g.MEMCPY) & (p.gpu.copy_kind == 2)
    assert h2d.sum() >= STEPS and d2h.sum() >= STEPS
    assert np.all(p.gpu.end_ns >= p.gpu.start_ns)
    names = {p.gpu.strings[n] for n in p.gpu.name[kinds == g.KERNEL]}
    assert any("gemm" in n.lower() or "sgemm" in n.lower() for n in names), sorted(names)[:20]


def test_every_gpu_record_correlates_to_an_api_call(traced):
    p, _, _ = traced
    api = p.api_calls
    by_corr = dict(zip(api.correlation_id.tolist(), range(len(api)), strict=False))
    missing = [c for c in p.gpu.correlation_id.tolist() if c not in by_corr]
    assert len(missing) <= 0.01 * len(p.gpu), f"{len(missing)} of {len(p.gpu)} uncorrelated"
    err = p.cuda.cupti_offset_error_ns + 1_000
    for i in range(len(p.gpu)):
        j = by_corr.get(int(p.gpu.correlation_id[i]))
        if j is not None:  # the GPU cannot start work before it was asked to
            assert p.gpu.start_ns[i] >= api.start_ns[j] - err


def test_operations_enclose_their_cuda_calls(traced):
    p, _, _ = traced
    api = p.api_calls
    ops = _ops(p)
    assert len(ops) == 4 * STEPS
    launches_per_op: dict[str, list[int]] = {}
    covered = np.zeros(len(api), bool)
    for name, tid, b, e in ops:
        inside = (api.tid == tid) & (api.start_ns >= b) & (api.end_ns <= e)
        # no call straddles an operation boundary
        assert not np.any((api.tid == tid) & (api.start_ns < b) & (api.end_ns > b))
        covered |= inside
        launched = sum("Launch" in api.strings[n] for n in api.name[inside])
        launches_per_op.setdefault(name, []).append(launched)
    assert min(launches_per_op["inference"]) >= 2 and min(launches_per_op["backprop"]) >= 4
    main = api.tid == ops[0][1]
    in_loop = main & (api.start_ns >= ops[0][2]) & (api.end_ns <= ops[-1][3])
    # Between operations the loop only runs Python: (almost) every call is inside one.
    assert covered[in_loop].mean() > 0.98


def test_report_shows_gpu(traced, tmp_path: Path):
    p, _, _ = traced
    rep = run_tool("rls-analyze", "report", str(p.path.parent))
    assert rep.returncode == 0, rep.stderr
    assert "CUDA API" in rep.stdout and "GPU" in rep.stdout


def test_nvml_binding_reads_the_driver():
    from rlscope.launch.nvml import Nvml

    nv = Nvml.open()
    try:
        assert nv.devices and all(d.memory_total_bytes > 0 for d in nv.devices)
        r = nv.read(0)
        assert r is not None and 0 <= r.util_pct <= 100 and r.sm_clock_mhz > 0
        assert 0 < r.memory_used_bytes <= nv.devices[0].memory_total_bytes
    finally:
        nv.close()


def test_sampled_gpu_next_to_true_gpu(traced):
    p, _, stderr = traced
    (line,) = [ln for ln in stderr.splitlines() if ln.startswith("rls-prof: sampled ")]
    assert " GPU" in line and "GPU not sampled" not in line, line
    from rlscope.analysis import load

    u = load(p.path.parent).utilisation()
    (row,) = u[(u["pid"] == p.pid) & (u["phase"] == "training")].to_dict("records")
    assert row["gpu_samples"] > 0 and 0 <= row["sampled_gpu_util_pct"] <= 100
    assert row["rlscope_gpu_s"] > 0
    # A sample period is "busy" when any kernel ran in it: never less than the time the
    # kernels really took (a margin for samples at the phase's edges).
    assert row["sampled_gpu_busy_pct"] + 10 >= row["rlscope_gpu_pct"], row


def test_short_kernels_look_busy_to_nvml(tmp_path: Path):
    """The issue's contrast on real hardware: tiny kernels in a CPU-bound loop."""
    from rlscope.analysis import load

    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "--sample-hz", "20", "--", sys.executable,
                 str(HERE / "workloads/torch_short_kernels.py"), "3", timeout=600)
    assert r.returncode == 0, r.stderr
    u = load(out).utilisation()
    (row,) = u[u["phase"] == "training"].to_dict("records")
    print(row)  # the numbers, for docs/cuda.md
    assert row["rlscope_gpu_pct"] < 5
    assert row["sampled_gpu_busy_pct"] > 2 * row["rlscope_gpu_pct"], row
