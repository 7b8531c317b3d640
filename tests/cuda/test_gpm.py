"""NVML GPM metrics (SM activity and occupancy, Hopper and later) without a GPU: the fake
libnvidia-ml.so.1 (fake_nvml.c) scripts them per device (FAKE_NVML_GPM*). The binding
diffs two GPM samples per tick, nvidia-ml-py reads the same values from the fake, the
sampler writes them to the samples file, and the report's utilisation table and GPU
finding show NVML busy, SMs active and kernel time side by side. A device without GPM
leaves the columns empty and the finding worded as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fake_build import Fake

from rlscope import envvars
from rlscope.launch.nvml import Nvml
from rlscope.launch.sampler import Sampler
from rlscope.trace.samples_reader import read_samples, sample_files
from tests.conftest import run_tool, wait_until

HERE = Path(__file__).resolve().parent

_PYNVML_GPM = textwrap.dedent("""
    import json, pynvml
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert pynvml.nvmlGpmQueryDeviceSupport(h).isSupportedDevice
    a, b = pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc()
    pynvml.nvmlGpmSampleGet(h, a)
    pynvml.nvmlGpmSampleGet(h, b)
    g = pynvml.c_nvmlGpmMetricsGet_t()
    g.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    g.numMetrics, g.sample1, g.sample2 = 3, a, b
    ids = [pynvml.NVML_GPM_METRIC_SM_UTIL, pynvml.NVML_GPM_METRIC_SM_OCCUPANCY,
           pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL]
    for i, m in enumerate(ids):
        g.metrics[i].metricId = m
    pynvml.nvmlGpmMetricsGet(g)
    print(json.dumps([g.metrics[i].value for i in range(3)]))
    pynvml.nvmlShutdown()
""")


@pytest.fixture
def gpm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two GPUs, GPM on device 0 only; device 0's SMs active 3% then 4.5%, occupancy
    12.5%, any context active 99% (hundredths of a percent in the script)."""
    monkeypatch.setenv("FAKE_NVML_DEVICES", "2")
    monkeypatch.setenv("FAKE_NVML_GPM", "1;0")
    monkeypatch.setenv("FAKE_NVML_GPM_SM_UTIL", "300,450")
    monkeypatch.setenv("FAKE_NVML_GPM_SM_OCCUPANCY", "1250")
    monkeypatch.setenv("FAKE_NVML_GPM_GRAPHICS_UTIL", "9900")


def test_binding_diffs_two_gpm_samples(fake_nvml: Path, gpm: None,
                                       monkeypatch: pytest.MonkeyPatch):
    nv = Nvml.open(str(fake_nvml))
    try:
        assert nv.gpm_open() == "GPU 1 without GPM metrics (NVML GPM needs Hopper or later)"
        assert nv.gpm_supported(0) and not nv.gpm_supported(1)
        first = nv.read_gpm(0)
        assert first is None  # one sample: nothing to diff yet
        got = [nv.read_gpm(0) for _ in range(3)]
        assert [(g.sm_active_pct, g.sm_occupancy_pct, g.graphics_pct) for g in got if g] == [
            (3.0, 12.5, 99.0), (4.5, 12.5, 99.0), (3.0, 12.5, 99.0)]
        assert nv.read_gpm(1) is None
    finally:
        nv.close()
    # A metric NVML cannot compute: no reading (never a half row).
    monkeypatch.setenv("FAKE_NVML_GPM_FAIL", "3")
    nv = Nvml.open(str(fake_nvml))
    try:
        assert nv.gpm_open() != ""
        assert [nv.read_gpm(0) for _ in range(3)] == [None, None, None]
    finally:
        nv.close()


def test_no_gpm_anywhere(fake_nvml: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FAKE_NVML_GPM", "0")
    nv = Nvml.open(str(fake_nvml))
    try:
        assert nv.gpm_open() == "GPU without GPM metrics (NVML GPM needs Hopper or later)"
        assert [nv.read_gpm(0) for _ in range(2)] == [None, None]
    finally:
        nv.close()


def test_nvidia_ml_py_reads_the_fake_gpm_as_rlscope_does(fake_nvml: Path, gpm: None):
    """NVIDIA's own struct definitions (nvidia-ml-py) against the fake: the same values
    as rlscope's ctypes binding, so both lay the structs out alike."""
    pytest.importorskip("pynvml")
    e = dict(os.environ, LD_LIBRARY_PATH=str(fake_nvml.parent))
    r = subprocess.run([sys.executable, "-c", _PYNVML_GPM], env=e, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [3.0, 12.5, 99.0]


def test_sampler_writes_gpm_rows(fake_nvml: Path, gpm: None, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(envvars.NVML_LIBRARY, str(fake_nvml))
    monkeypatch.setenv("FAKE_NVML_GPM_SM_UTIL", "300")
    s = Sampler(str(tmp_path), hz=50, gpm_hz=25)  # GPM every other tick
    s.start()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    wait_until(lambda: s.summary.ticks >= 10, "ten sampler ticks")  # a loaded CI is slow
    summary = s.stop()
    assert summary.gpus == 2 and "GPU 1 without GPM" in summary.gpm_status
    assert summary.as_json()["gpm_status"] == summary.gpm_status
    got = read_samples(sample_files(tmp_path))
    assert got is not None and got.warnings == []
    assert got.gpm_status == summary.gpm_status
    # Device 0 only, a sample at every other tick from the first, a row for each but
    # the first (GPM needs two samples).
    assert set(got.gpm_index.tolist()) == {0}
    ticks = int((got.gpu_index == 0).sum())
    assert len(got.gpm_time_ns) == (ticks + 1) // 2 - 1 >= 4
    assert set(got.gpm_time_ns.tolist()) <= set(got.gpu_time_ns.tolist())
    assert set(got.gpm_sm_active_pct.tolist()) == {3.0}
    assert set(got.gpm_sm_occupancy_pct.tolist()) == {12.5}
    assert set(got.gpm_graphics_pct.tolist()) == {99.0}


def test_sampler_without_gpm_has_no_rows(fake_nvml: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch):
    """As on a GPU before Hopper; the file is what files written before GPM look like."""
    monkeypatch.setenv(envvars.NVML_LIBRARY, str(fake_nvml))
    s = Sampler(str(tmp_path), hz=50)
    s.start()
    wait_until(lambda: s.summary.ticks >= 2, "two sampler ticks")
    summary = s.stop()
    got = read_samples(sample_files(tmp_path))
    assert got is not None and len(got.gpu_time_ns) > 0 and len(got.gpm_time_ns) == 0
    assert got.gpm_status == summary.gpm_status == (
        "GPU without GPM metrics (NVML GPM needs Hopper or later)")
    assert got.gpm_sm_active_pct.dtype.kind == "f"


@pytest.mark.usefixtures("cuda_lib")
def test_report_sets_nvml_sm_activity_and_kernels_side_by_side(
        fake: Fake, fake_nvml: Path, tmp_path: Path):
    """NVML reads the GPU busy in every sample (99%), GPM says the SMs were active 3% of
    the time, and the kernels (the fake CUPTI's) covered ~1%: the three in the table and
    in the finding's words."""
    out = tmp_path / "run"
    e = dict(os.environ, RLSCOPE_NVML_LIBRARY=str(fake_nvml), FAKE_NVML_DEVICES="1",
             RLSCOPE_GPM_HZ="20",  # every tick: enough GPM rows in a short phase
             FAKE_NVML_UTIL="99", FAKE_NVML_GPM="1", FAKE_NVML_GPM_SM_UTIL="300",
             FAKE_NVML_GPM_SM_OCCUPANCY="1250", FAKE_NVML_GPM_GRAPHICS_UTIL="9900")
    r = run_tool("rls-prof", "-o", str(out), "--sample-hz", "20", "--", sys.executable,
                 str(HERE / "workloads/short_kernels.py"), str(fake.libcupti), "10", "1.5",
                 env=e)
    assert r.returncode == 0, r.stderr
    rep = run_tool("rls-analyze", "report", "--format", "json", str(out))
    assert rep.returncode == 0, rep.stderr
    j = json.loads(rep.stdout)
    u = j["utilisation"]
    assert u["gpm_status"] == ""
    (row,) = [x for x in u["rows"] if x["phase"] == "training"]
    assert row["gpm_samples"] >= 10
    assert row["sampled_sm_active_pct"] == 3.0 and row["sampled_sm_occupancy_pct"] == 12.5
    assert row["sampled_gpu_util_pct"] == 99.0 and row["rlscope_gpu_pct"] < 5
    (f,) = j["gpu_findings"]
    assert f["sm_active_pct"] == 3.0 and f["sm_occupancy_pct"] == 12.5
    assert f["gpm_samples"] == sum(x["gpm_samples"] for x in u["rows"]
                                   if x["phase"] != "(start-up)" and x["gpu_samples"] > 0)
    text = run_tool("rls-analyze", "report", str(out)).stdout
    assert "SM active% GPM" in text and "SM occ% GPM" in text
    assert "SM activity not sampled" not in text
    (line,) = [ln for ln in text.splitlines() if "is not what limits it" in ln]
    assert "NVML (what nvidia-smi shows) reads 100% busy" in line
    assert "SMs were active 3.0% of the time (occupancy 12.5%" in line
    assert f"kernels and copies covered {f['gpu_pct']:.1f}%" in line


def test_finding_words_the_three_views():
    """The H100 PPO run's numbers with GPM: NVML 99% busy, SMs active 3%, kernels 1.8%."""
    from rlscope.analysis.diagnosis import gpu_findings
    from rlscope.analysis.processes.utilisation import contrast_frame
    from rlscope.reporters.diagnosis import gpu_lines

    rows = [{"pid": 7, "process": "train.py", "phase": ph, "wall_s": 5.0, "gpu_devices": "0",
             "gpu_samples": 10, "sampled_gpu_busy_pct": 99.0, "sampled_gpu_util_pct": 4.0,
             "gpm_samples": 9, "sampled_sm_active_pct": sm, "sampled_sm_occupancy_pct": 10.0,
             "rlscope_gpu_s": 0.09, "session": 0} for ph, sm in (("-", 2.0), ("training", 4.0))]
    (f,) = gpu_findings(contrast_frame(rows))
    assert f.gpm_samples == 18 and f.sm_active_pct == pytest.approx(3.0)
    assert f.sm_occupancy_pct == pytest.approx(10.0) and f.gpu_pct == pytest.approx(1.8)
    (line,) = gpu_lines([f])
    assert ("NVML (what nvidia-smi shows) reads 99% busy (20 samples, mean utilisation 4%); "
            "SMs were active 3.0% of the time (occupancy 10.0%, NVML GPM, 18 samples); "
            "kernels and copies covered 1.8% (0.180 s), 55x less") in line
    # Rows without the GPM columns (a table from before GPM): the finding as before.
    for r in rows:
        for k in ("gpm_samples", "sampled_sm_active_pct", "sampled_sm_occupancy_pct"):
            del r[k]
    (f,) = gpu_findings(contrast_frame(rows))
    assert f.sm_active_pct is None and "SMs were active" not in gpu_lines([f])[0]
