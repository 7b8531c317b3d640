"""rls-prof's utilisation sampler without a GPU: its NVML binding against a fake
libnvidia-ml.so.1 (fake_nvml.c) whose readings the tests script, checked against
nvidia-ml-py's own definitions when that is installed; the sampler's process scanner,
core readings and sample file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rlscope import envvars
from rlscope.launch.descendants import children as children_of
from rlscope.launch.descendants import set_subreaper
from rlscope.launch.nvml import Nvml, NvmlError
from rlscope.launch.proctree import ProcessScanner
from rlscope.launch.sampler import Sampler, read_cores
from rlscope.trace.samples import rates
from rlscope.trace.samples_reader import read_samples, sample_files
from tests.conftest import wait_until

_PYNVML_READ = textwrap.dedent("""
    import json, pynvml
    pynvml.nvmlInit()
    out = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        u = pynvml.nvmlDeviceGetUtilizationRates(h)
        m = pynvml.nvmlDeviceGetMemoryInfo(h)
        name = pynvml.nvmlDeviceGetName(h)
        out.append({"name": name if isinstance(name, str) else name.decode(),
                    "util": [u.gpu, u.memory], "used": m.used, "total": m.total,
                    "sm": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)})
    pynvml.nvmlShutdown()
    print(json.dumps(out))
""")


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NVML_DEVICES", "2")
    monkeypatch.setenv("FAKE_NVML_UTIL", "90,0,45;7")
    monkeypatch.setenv("FAKE_NVML_MEMORY_UTIL", "30;2")
    monkeypatch.setenv("FAKE_NVML_MEMORY_USED", f"{3 << 30};{1 << 20}")
    monkeypatch.setenv("FAKE_NVML_SM_CLOCK", "1980;210")


def test_binding_reads_the_scripted_values(fake_nvml: Path, scripted: None):
    nv = Nvml.open(str(fake_nvml))
    try:
        assert [(d.index, d.name, d.uuid, d.memory_total_bytes) for d in nv.devices] == [
            (0, "Fake GPU 0", "GPU-fake-0000", 80 << 30),
            (1, "Fake GPU 1", "GPU-fake-0001", 80 << 30)]
        r0 = [nv.read(0) for _ in range(4)]
        assert [r.util_pct for r in r0 if r] == [90, 0, 45, 90]  # the script cycles
        r = r0[0]
        assert r is not None
        assert (r.memory_util_pct, r.sm_clock_mhz) == (30, 1980)
        r1 = nv.read(1)
        assert r1 is not None and (r1.util_pct, r1.memory_used_bytes, r1.sm_clock_mhz) == (
            7, 1 << 20, 210)
    finally:
        nv.close()


def test_binding_errors_are_one_line(fake_nvml: Path, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(NvmlError, match=r"^no NVIDIA driver \(.*nothere.so.1 not found\)$"):
        Nvml.open(str(tmp_path / "nothere.so.1"))
    monkeypatch.setenv("FAKE_NVML_INIT_RESULT", "9")
    with pytest.raises(NvmlError, match=r"^nvmlInit failed: Driver Not Loaded$"):
        Nvml.open(str(fake_nvml))
    monkeypatch.delenv("FAKE_NVML_INIT_RESULT")
    monkeypatch.setenv("FAKE_NVML_DEVICES", "0")
    with pytest.raises(NvmlError, match=r"^NVML found no GPU$"):
        Nvml.open(str(fake_nvml))


def test_nvidia_ml_py_reads_the_fake_as_rlscope_does(fake_nvml: Path, scripted: None):
    """nvidia-ml-py (the nvml extra) dlopens libnvidia-ml.so.1 by name: LD_LIBRARY_PATH
    points it at the fake. Same values through NVIDIA's struct and function definitions
    as through rlscope's binding."""
    pytest.importorskip("pynvml")
    e = dict(os.environ, LD_LIBRARY_PATH=str(fake_nvml.parent))
    r = subprocess.run([sys.executable, "-c", _PYNVML_READ], env=e, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    theirs = json.loads(r.stdout)
    nv = Nvml.open(str(fake_nvml))
    try:
        ours = []
        for d in nv.devices:
            x = nv.read(d.index)
            assert x is not None
            ours.append({"name": d.name, "util": [x.util_pct, x.memory_util_pct],
                         "used": x.memory_used_bytes, "total": d.memory_total_bytes,
                         "sm": x.sm_clock_mhz})
    finally:
        nv.close()
    assert theirs == ours


def _spin(cpu_seconds: float) -> subprocess.Popen[bytes]:
    """A child that runs until it has had ``cpu_seconds`` of CPU time."""
    code = f"import time\nwhile time.process_time() < {cpu_seconds}: pass"
    return subprocess.Popen([sys.executable, "-c", code])


def test_scanner_finds_descendants_and_orphans():
    """The run's processes: the command, what it starts, and what it leaves behind (as
    rls-prof does, this test makes itself a subreaper so orphans come back to it)."""
    me = os.getpid()
    before = set(children_of(me))
    # A child that starts a grandchild and exits when told: the grandchild is orphaned.
    code = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
            "'import time; time.sleep(60)']); sys.stdin.read()")
    reaper = set_subreaper(True)
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
    try:
        sc = ProcessScanner(me, before)

        def both() -> set[int]:
            rows = {r[0] for r in sc.tick()}
            return rows if len(rows) >= 2 else set()

        rows = wait_until(both, "the child and its grandchild")
        assert child.pid in rows and len(rows) == 2
        grandchild = next(p for p in rows if p != child.pid)
        assert child.stdin is not None
        child.stdin.close()
        child.wait()
        now = {p: (cpu, rss) for p, cpu, rss, _ in sc.tick()}
        assert set(now) == ({grandchild} if reaper else set(now) - {child.pid})
        if reaper:
            assert now[grandchild][1] > 1 << 20  # an interpreter's resident memory
        assert sc.seen >= {child.pid}
        os.kill(grandchild, 9)
        if reaper:
            os.waitpid(grandchild, 0)
    finally:
        set_subreaper(False)


def test_cores_are_cumulative():
    a = read_cores()
    assert len(a) == os.cpu_count()
    wait_until(lambda: sum(read_cores()) > sum(a), "a clock tick of busy time")


def test_sampler_file(fake_nvml: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FAKE_NVML_UTIL", "80;10")
    monkeypatch.setenv("FAKE_NVML_DEVICES", "2")
    monkeypatch.setenv("FAKE_NVML_LOG", str(tmp_path / "nvml.log"))
    monkeypatch.setenv(envvars.NVML_LIBRARY, str(fake_nvml))
    s = Sampler(str(tmp_path), hz=50)
    s.start()
    child = _spin(0.5)
    child.wait()
    summary = s.stop()
    assert summary.gpu_status == "" and summary.gpus == 2 and summary.processes == 1
    assert summary.cores == os.cpu_count() and summary.ticks >= 5
    assert 0 < summary.cpu_s < summary.wall_s
    (f,) = sample_files(tmp_path)
    assert f.name == f"samples.{os.getpid()}.rlsamples"
    got = read_samples([f])
    assert got is not None and got.interval_ns == 20_000_000 and got.warnings == []
    assert got.ticks == summary.ticks and got.sampler_cpu_ns == round(summary.cpu_s * 1e9)
    assert [g["name"] for g in got.gpus] == ["Fake GPU 0", "Fake GPU 1"]
    log = [tuple(map(int, ln.split())) for ln in (tmp_path / "nvml.log").read_text().splitlines()]
    assert sorted(zip(got.gpu_index.tolist(), got.gpu_util_pct.tolist(), strict=True)) == \
        sorted(log)  # every reading, as read
    assert set(got.gpu_util_pct[got.gpu_index == 0].tolist()) == {80}
    assert set(got.gpu_sm_clock_mhz.tolist()) == {1410}
    assert np.all(np.diff(got.proc_time_ns) >= 0)
    assert set(got.proc_pid.tolist()) == {child.pid}
    _, t0, t1, pct = rates(got.proc_time_ns, got.proc_pid, got.proc_cpu_ns)
    assert np.all(pct >= 0) and np.all(t1 > t0)
    # 0.5 s of CPU: the last sample (taken up to a tick before the child's end) has most
    # of it, at clock-tick resolution.
    assert 0.3e9 < got.proc_cpu_ns[-1] <= 0.5e9 + 2e7
    # Its run-queue wait (/proc/<pid>/schedstat): one per row, cumulative.
    assert len(got.proc_runq_ns) == len(got.proc_pid)
    assert np.all(got.proc_runq_ns >= 0) and np.all(np.diff(got.proc_runq_ns) >= 0)
    assert len(got.core_time_ns) == summary.ticks * summary.cores
