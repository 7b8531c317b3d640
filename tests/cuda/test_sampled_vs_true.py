"""Sampled utilisation vs what rlscope measured, end to end without a GPU: rls-prof
samples a fake libnvidia-ml.so.1 whose readings the test scripts, while a workload
drives the fake libcupti (short kernels in a CPU-bound loop). The report must show the
scripted NVML values next to the true (tiny) GPU time; the timeline carries the
counters and the launch -> kernel flows."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from fake_build import Fake

from rlscope.analysis import load
from rlscope.analysis.processes import utilisation as U
from tests.conftest import run_tool

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.usefixtures("cuda_lib")


@pytest.fixture(scope="module")
def run_dir(fake: Fake, fake_nvml: Path, tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[Path, dict[str, int], str]:
    out = tmp_path_factory.mktemp("util") / "run"
    e = dict(os.environ, RLSCOPE_NVML_LIBRARY=str(fake_nvml), FAKE_NVML_DEVICES="1",
             FAKE_NVML_UTIL="90", FAKE_NVML_MEMORY_USED=str(3 << 30),
             FAKE_NVML_SM_CLOCK="1755")
    r = run_tool("rls-prof", "-o", str(out), "--sample-hz", "20", "--", sys.executable,
                 str(HERE / "workloads/short_kernels.py"), str(fake.libcupti), "10", "2.0",
                 env=e)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout.strip().splitlines()[-1])
    return out, info, r.stderr


def test_prof_line_names_what_was_sampled(run_dir):
    _, _, stderr = run_dir
    (line,) = [ln for ln in stderr.splitlines() if ln.startswith("rls-prof: sampled ")]
    assert line.startswith("rls-prof: sampled 1 process, ")
    assert " and 1 GPU at 20 Hz (" in line and "GPU not sampled" not in line


def test_report_contrast_matches_the_scripted_values(run_dir):
    out, info, _ = run_dir
    rep = run_tool("rls-analyze", "report", "--format", "json", str(out))
    assert rep.returncode == 0, rep.stderr
    u = json.loads(rep.stdout)["utilisation"]
    assert u["gpu_status"] == "" and [g["name"] for g in u["gpus"]] == ["Fake GPU 0"]
    (row,) = [r for r in u["rows"] if r["phase"] == "training"]
    # NVML, as scripted: every sample busy, 90% on average ...
    assert row["gpu_samples"] >= 10
    assert row["sampled_gpu_busy_pct"] == 100.0 and row["sampled_gpu_util_pct"] == 90.0
    # ... while the GPU ran kernels for ~1% of the time: exactly the kernels launched
    # (the last one may run on past the phase's end, into the time after it).
    total = sum(r["rlscope_gpu_s"] for r in u["rows"])
    assert total == pytest.approx(info["kernel_ns"] / 1e9, rel=1e-9)
    assert row["rlscope_gpu_s"] >= (info["kernel_ns"] - 10_000) / 1e9 - 1e-12
    assert row["rlscope_gpu_pct"] < 5
    assert row["gpu_devices"] == "0"
    # No GPM on this (fake) GPU, as before Hopper: the SM columns are empty.
    assert u["gpm_status"] == "GPU without GPM metrics (NVML GPM needs Hopper or later)"
    assert row["gpm_samples"] == 0 and row["sampled_sm_active_pct"] is None
    # The CPU side: rlscope sees a thread always on the CPU (a busy loop); /proc sees the
    # CPU time the process really got, which is less on a loaded machine: the sampled
    # CPU seconds are the loop's own CPU time (up to a sample at each end of the phase).
    assert row["cpu_samples"] >= 10
    assert row["rlscope_cpu_pct"] > 90
    assert row["sampled_cpu_s"] == pytest.approx(info["cpu_s"], abs=0.12 + 0.1 * info["cpu_s"])
    assert 0 < row["sampled_cpu_pct"] <= row["rlscope_cpu_pct"] + 15
    text = run_tool("rls-analyze", "report", str(out)).stdout
    assert "GPU busy% NVML" in text and "GPU% rlscope" in text
    # The diagnosis says it in words, with the same numbers: NVML busy in every sample,
    # kernels a few % of the process's time, so the GPU is not the limit.
    # The finding sets NVML's samples against the kernels over the time those samples
    # cover: the rows (phases) with GPU samples. Under load a short phase (start-up, the
    # time after "training") can end up without any sample, and then neither its wall
    # time nor its GPU time is part of the finding; the start-up never is.
    (f,) = json.loads(rep.stdout)["gpu_findings"]
    sampled = [r for r in u["rows"] if r["gpu_samples"] > 0 and r["rlscope_gpu_s"] is not None
               and r["phase"] != "(start-up)"]
    assert row in sampled
    wall = sum(r["wall_s"] for r in sampled)
    gpu_s = sum(r["rlscope_gpu_s"] for r in sampled)
    assert f["sampled_busy_pct"] == 100.0 and f["sampled_util_pct"] == 90.0
    assert f["gpu_s"] == pytest.approx(gpu_s, rel=1e-9)
    assert f["gpu_pct"] == pytest.approx(100 * gpu_s / wall, rel=1e-9)
    assert f["overstated_x"] > 20 and f["samples"] == sum(r["gpu_samples"] for r in sampled)
    (line,) = [ln for ln in text.splitlines() if "is not what limits it" in ln]
    assert "NVML (what nvidia-smi shows) read it busy in 100% of" in line
    assert f"filled {f['gpu_pct']:.1f}% of the time" in line
    # Without GPM the finding is NVML against the kernels only.
    assert f["sm_active_pct"] is None and "SMs were active" not in line
    assert "SM active% GPM" not in text
    assert "SM activity not sampled: GPU without GPM metrics" in text


def test_over_time_series(run_dir):
    out, info, _ = run_dir
    a = load(out)
    ts = a.utilisation_over_time()
    assert set(ts["series"]) >= {U.PROC_CPU, U.RLSCOPE_CPU, U.PROC_RSS, U.CORE_CPU, U.GPU_UTIL,
                                 U.GPU_BUSY, U.GPU_MEM, U.GPU_SM}
    util = ts[ts["series"] == U.GPU_UTIL]["value"]
    assert set(util) == {90.0}
    assert set(ts[ts["series"] == U.GPU_MEM]["value"]) == {3 * 1024.0}
    assert set(ts[ts["series"] == U.GPU_SM]["value"]) == {1755.0}
    busy = ts[ts["series"] == U.GPU_BUSY]
    # Bins of 0.1 s, the last one a share of the part the process lived: their GPU time
    # adds up to the kernels' time.
    span_s = float(a.processes()["seconds"].iloc[0])
    width = np.full(len(busy), 0.1)
    width[-1] = span_s - 0.1 * (len(busy) - 1)
    assert 0 < width[-1] <= 0.1 + 1e-9
    assert (busy["value"].to_numpy() / 100 * width).sum() == pytest.approx(
        info["kernel_ns"] / 1e9, rel=1e-6)


def test_timeline_counters_and_flows(run_dir, tmp_path: Path):
    out, info, _ = run_dir
    r = run_tool("rls-analyze", "timeline", str(out), "-o", str(tmp_path / "tl.json"))
    assert r.returncode == 0, r.stderr
    events = json.loads((tmp_path / "tl.json").read_text())["traceEvents"]
    counters = {e["name"] for e in events if e.get("ph") == "C"}
    assert {U.PROC_CPU, U.GPU_UTIL, U.GPU_BUSY} <= counters
    assert any(c.startswith(U.CORE_CPU) for c in counters)
    nvml = [e for e in events if e.get("ph") == "C" and e["name"] == U.GPU_UTIL]
    assert {v for e in nvml for v in e["args"].values()} == {90.0}
    starts = [e for e in events if e.get("ph") == "s"]
    ends = [e for e in events if e.get("ph") == "f"]
    assert len(starts) == len(ends) == info["kernels"]
    assert {e["id"] for e in starts} == {e["id"] for e in ends}


def test_plot_draws_utilisation_over_time(run_dir, tmp_path: Path):
    pytest.importorskip("matplotlib")
    out, _, _ = run_dir
    r = run_tool("rls-analyze", "plot", str(out), "-o", str(tmp_path), "--format", "svg")
    assert r.returncode == 0, r.stderr
    svg = (tmp_path / "utilisation.svg").read_text()
    assert "GPU 0: NVML utilisation" in svg and "rlscope CPU categories" in svg
