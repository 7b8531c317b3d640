"""The report's diagnosis on synthetic timelines whose split is known exactly: each verdict
pinned, and a balanced operation gets none."""

from __future__ import annotations

import pytest

from rlscope.analysis import analyze
from rlscope.analysis.diagnosis import diagnose, gpu_findings
from rlscope.analysis.engine.synthetic import process_trace
from rlscope.analysis.processes.utilisation import contrast_frame
from rlscope.reporters import diagnosis as render
from rlscope.trace import format as fmt
from rlscope.trace.data import Trace

OB, OE = fmt.OPERATION_BEGIN, fmt.OPERATION_END
CALLS = {"backend": (fmt.BACKEND_CALL_BEGIN, fmt.BACKEND_CALL_END),
         "simulator": (fmt.SIMULATOR_CALL_BEGIN, fmt.SIMULATOR_CALL_END),
         "wait": (fmt.WAIT_CALL_BEGIN, fmt.WAIT_CALL_END)}
US = 1000


def _op(t0: int, name: str, python_us: float, calls: dict[str, tuple[int, float]],
        rows: list) -> int:
    """One call of operation ``name`` from t0: ``python_us`` of Python spread between the
    intercepted calls, and per kind (n, total µs) of calls. Returns the end time."""
    rows.append((t0, 0, OB, name))
    t = t0
    pieces = [(k, n, us) for k, (n, us) in calls.items()]
    slots = sum(n for _, n, _ in pieces) + 1
    gap = int(python_us * US / slots)
    for kind, n, us in pieces:
        b, e = CALLS[kind]
        for _ in range(n):
            t += gap
            rows.append((t, 0, b, f"{kind}.call"))
            t += int(us * US / n)
            rows.append((t, 0, e, f"{kind}.call"))
    t += gap
    rows.append((t, 0, OE, name))
    return t


def _diagnose(ops: list[tuple[str, float, dict[str, tuple[int, float]]]], repeat: int = 20):
    rows: list = [(0, 0, fmt.PROCESS_START, "")]
    t = 1000
    for _ in range(repeat):
        for name, py, calls in ops:
            t = _op(t, name, py, calls, rows) + 10
    rows.append((t + 10, 0, fmt.PROCESS_END, ""))
    a = analyze(Trace(None, {}, [process_trace(rows, name="loop.py")]))  # type: ignore[arg-type]
    return {v.operation: v for v in diagnose(a.operations(), a.processes())}


def test_each_limit_is_named_with_its_evidence_and_bound():
    v = _diagnose([
        ("python_glue", 900, {"backend": (2, 100)}),  # 90% Python
        ("inference", 300, {"backend": (50, 700)}),  # 70% backend, 14 µs calls: launch
        ("backprop", 100, {"backend": (2, 900)}),  # 90% backend, 450 µs calls: compute
        ("simulation", 100, {"simulator": (4, 900)}),  # 90% simulator
        ("wait_for_workers", 100, {"wait": (1, 900)}),  # 90% waiting
    ])
    assert v["python_glue"].bound == "Python"
    assert v["python_glue"].max_saving_s == pytest.approx(20 * 900e-6, rel=0.02)
    assert v["inference"].bound.startswith("ML backend (launch-bound")
    assert "50.0 backend calls per call, 14.0 µs each" in v["inference"].evidence[1]
    assert v["inference"].max_saving_s == pytest.approx(20 * 300e-6, rel=0.02)  # the Python
    assert v["backprop"].bound == "ML backend (compute)"
    assert v["backprop"].max_saving_s == pytest.approx(20 * 900e-6, rel=0.02)
    assert v["simulation"].bound == "simulator"
    assert v["wait_for_workers"].bound == "waiting"
    assert v["wait_for_workers"].max_saving_share == pytest.approx(0.9, abs=0.01)
    text = "\n".join(render.lines(list(v.values())))
    assert "python_glue in loop.py" in text and "bound by Python" in text
    assert "saves at most" in text and "the waiting time (90% of the operation" in text


def test_a_balanced_operation_gets_no_verdict():
    v = _diagnose([("step", 450, {"backend": (3, 400), "simulator": (3, 150)})])
    # Python 45%, backend 40%, simulator 15%: no single limit
    assert v["step"].bound is None and v["step"].max_saving_s == 0
    assert "balanced, no single limit" in "\n".join(render.lines(list(v.values())))
    close = _diagnose([("step", 550, {"backend": (3, 450)})])  # 55% vs 45%: too close
    assert close["step"].bound is None


def test_small_operations_are_not_diagnosed():
    v = _diagnose([("big", 1000, {}), ("tiny", 10, {"backend": (1, 10)})])
    assert "big" in v and "tiny" not in v


def _gpu_diagnosis(api, gpu):
    rows = [(0, 0, fmt.PROCESS_START, ""), (1000 * US, 0, OB, "train"),
            (2000 * US, 0, OE, "train"), (2001 * US, 0, fmt.PROCESS_END, "")]
    p = process_trace(rows, api=api, gpu=gpu, name="gpu.py")
    a = analyze(Trace(None, {}, [p]))  # type: ignore[arg-type]
    return {v.operation: v for v in diagnose(a.operations(), a.processes())}["train"]


def test_gpu_and_cuda_api_limits():
    tid = 1000  # thread 0's OS tid in synthetic traces
    # One launch, a 900 µs kernel, and a synchronisation waiting for it: GPU-bound.
    v = _gpu_diagnosis([(tid, 1010 * US, 1020 * US, 1, "cudaLaunchKernel"),
                        (tid, 1025 * US, 1950 * US, 2, "cudaDeviceSynchronize")],
                       [(1, 7, 1030 * US, 1930 * US, 1)])
    assert v.bound == "GPU" and v.max_saving_share == pytest.approx(0.9, abs=0.02)
    assert any(e.startswith("GPU idle while the CPU works") for e in v.evidence)
    # 90 launches of 10 µs each, 1 µs kernels: the CPU is in the CUDA API.
    api = [(tid, (1000 + 11 * i) * US, (1010 + 11 * i) * US, i + 1, "cudaLaunchKernel")
           for i in range(90)]
    gpu = [(1, 7, (1010 + 11 * i) * US, (1011 + 11 * i) * US, i + 1) for i in range(90)]
    v = _gpu_diagnosis(api, gpu)
    assert v.bound == "CUDA API" and v.shares["CUDA API"] > 0.8


def test_start_up_gets_its_own_verdict_not_a_per_step_remedy():
    """A start-up of 60% of the process (40% of it imports): paid once, not per step."""
    rows: list = [(0, 0, fmt.PROCESS_START, "")]
    t = _op(600 * US, "train", 100, {"backend": (2, 300)}, rows)
    rows.append((t + 10, 0, fmt.PROCESS_END, ""))
    meta = {fmt.META_IMPORT_PREFIX + "torch": [100 * US, 340 * US]}
    a = analyze(Trace(None, {}, [process_trace(rows, name="loop.py", metadata=meta)]))  # type: ignore[arg-type]
    v = {v.operation: v for v in diagnose(a.operations(), a.processes())}
    s = v["(start-up)"]
    assert s.bound == "start-up, paid once per process"
    assert s.wall_s == pytest.approx(600e-6, rel=1e-6)
    assert "imports <0.001 s (40%)" in s.evidence[0]  # a total: in seconds
    assert "amortises" in s.remedy and "vectorise" not in s.remedy
    assert s.max_saving_s == pytest.approx(s.wall_s)
    assert v["train"].bound is not None  # the loop's own verdict is unchanged


def _util(busy: float, util: float, gpu_s: float, samples: int = 20,
          devices: str = "0") -> list[dict[str, object]]:
    """Utilisation rows of one process over two phases of 5 s each, NVML's readings and
    the GPU time split evenly."""
    return [{"pid": 7, "process": "train.py", "phase": ph, "wall_s": 5.0,
             "gpu_devices": devices, "gpu_samples": samples // 2,
             "sampled_gpu_busy_pct": busy, "sampled_gpu_util_pct": util,
             "rlscope_gpu_s": gpu_s / 2, "session": 0} for ph in ("-", "training")]


def test_gpu_that_nvml_reads_busy_but_kernels_barely_use_is_named():
    # The H100 PPO run: busy in 99% of samples, 4% mean utilisation, 1.8% in kernels.
    (f,) = gpu_findings(contrast_frame(_util(99.0, 4.0, 0.18)))
    assert (f.pid, f.samples, f.sampled_busy_pct, f.sampled_util_pct) == (7, 20, 99.0, 4.0)
    assert f.gpu_pct == pytest.approx(1.8) and f.overstated_x == pytest.approx(55)
    text = "\n".join(render.lines([], [f]))
    assert text.startswith("What limits this run")
    assert "the GPU of train.py (pid 7, device 0) is not what limits it" in text
    assert "busy in 99% of 20 samples (mean utilisation 4%)" in text
    assert "filled 1.8% of the time (0.180 s), 55x less" in text
    assert "device-wide" not in text
    # Two devices: the GPU time is of wall x 2.
    (f,) = gpu_findings(contrast_frame(_util(99.0, 4.0, 0.18, devices="0,1")))
    assert f.gpu_pct == pytest.approx(0.9)
    # Another process of the run used device 1 too: NVML's busy is device-wide.
    other = [dict(r, pid=8, gpu_devices="1", gpu_samples=0) for r in _util(0, 0, 1.0)]
    (f, *_) = gpu_findings(contrast_frame(_util(99.0, 4.0, 0.18, devices="0,1") + other))
    assert f.sharing == 1
    assert "device-wide (1 other process(es) of this run used it too)" in "\n".join(
        render.gpu_lines([f]))


@pytest.mark.parametrize("busy,gpu_s,samples", [
    (40.0, 0.1, 20),   # NVML itself reads the GPU mostly idle
    (99.0, 8.0, 20),   # kernels fill 80%: NVML is right, the GPU is busy
    (99.0, 0.1, 4),    # too few samples to say anything
])
def test_no_gpu_finding_when_nvml_does_not_overstate(busy, gpu_s, samples):
    assert gpu_findings(contrast_frame(_util(busy, busy / 2, gpu_s, samples))) == []


def test_no_gpu_finding_without_gpu_samples():
    rows = _util(99.0, 4.0, 0.18, samples=0)
    assert gpu_findings(contrast_frame(rows)) == [] and gpu_findings(contrast_frame([])) == []


def test_gpu_finding_covers_only_the_phases_with_samples():
    # Under load a short phase may get no NVML sample at all: its wall time and GPU time
    # are then outside what the samples describe, and outside the finding's share.
    rows = _util(99.0, 4.0, 0.18)
    rows[0].update(gpu_samples=0, sampled_gpu_busy_pct=float("nan"),
                   sampled_gpu_util_pct=float("nan"), rlscope_gpu_s=0.05)
    (f,) = gpu_findings(contrast_frame(rows))
    assert f.samples == 10 and f.gpu_s == pytest.approx(0.09)
    assert f.gpu_pct == pytest.approx(100 * 0.09 / 5.0)


def test_gpu_finding_leaves_the_start_up_out():
    # PPO on an H100 (docs/cuda.md): 12.4 s of imports NVML read idle, then 10.4 s of
    # training it read busy in 93% of samples, kernels and copies 3.7%. Counted in, the
    # start-up diluted NVML's busy to 43% and the finding was lost.
    rows = [{"pid": 7, "process": "ppo.py", "phase": ph, "wall_s": w, "gpu_devices": "0",
             "gpu_samples": n, "sampled_gpu_busy_pct": busy, "sampled_gpu_util_pct": util,
             "rlscope_gpu_s": g, "session": 0}
            for ph, w, n, busy, util, g in [("(start-up)", 12.4, 124, 1.6, 0.0, 0.0001),
                                            ("training", 10.4, 105, 93.3, 8.0, 0.385)]]
    (f,) = gpu_findings(contrast_frame(rows))
    assert (f.samples, f.sampled_busy_pct) == (105, 93.3)
    assert f.gpu_pct == pytest.approx(100 * 0.385 / 10.4)
