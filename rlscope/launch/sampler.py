"""rls-prof's utilisation sampler: a thread in the launcher, outside the profiled processes.

Every tick (``--sample-hz``, 10 by default) it reads, for each process of the run (the
command and its descendants, found anew each tick), the cumulative CPU time and the
resident memory; for each core, the cumulative busy time; for each GPU, NVML's
utilisation, memory used and SM clock, and where the GPU offers NVML's GPM metrics
(Hopper and later) the SMs' activity and occupancy since the previous GPM sample, taken
at GPM_HZ: a GPM sample costs the driver ~2.5 ms of CPU (H100, driver 580), 2.5% of a
core if taken every tick at 10 Hz, and its metrics are averages over the interval anyway. Rows go to
``samples.<pid>.rlsamples`` in the trace directory (docs/trace-format.md#sample-files),
one chunk about every second, on CLOCK_MONOTONIC like every trace.

Processes (launch.proctree) and cores are read straight from /proc rather than through
psutil. Orphans re-parented to rls-prof (a child subreaper) stay in the run.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from rlscope import envvars
from rlscope._version import __version__
from rlscope.launch.nvml import Nvml, NvmlError
from rlscope.launch.proctree import TICK_NS, ProcessScanner
from rlscope.recorder import wire
from rlscope.trace import format as fmt

DEFAULT_HZ = 10.0
GPM_HZ = 1.0  # GPM samples per second (at most one per tick; 0: none)
FLUSH_S = 1.0  # seconds between chunks


def read_cores() -> list[int]:
    """Cumulative busy ns of each core (/proc/stat; all but idle and iowait)."""
    out = []
    try:
        with open("/proc/stat", "rb") as f:
            for line in f:
                if not line.startswith(b"cpu") or line[3:4] == b" ":
                    continue
                v = [int(x) for x in line.split()[1:]]
                busy = sum(v[:8]) - v[3] - (v[4] if len(v) > 4 else 0)  # guest is in user
                out.append(busy * TICK_NS)
    except (OSError, ValueError, IndexError):
        return []
    return out


@dataclass
class Summary:
    """What the sampler did, for rls-prof's line and run.json."""

    path: str
    hz: float
    ticks: int = 0
    processes: int = 0
    cores: int = 0
    gpus: int = 0
    gpu_status: str = ""  # why GPUs were not sampled; "" when they were
    gpm_status: str = ""  # why GPM metrics were not sampled (on some GPU); "" when they were
    cpu_s: float = 0.0  # the sampler thread's own CPU time
    wall_s: float = 0.0
    # Of which the start: loading NVML and the first tick (which reads every process's
    # stat once); the rest is the steady per-tick cost.
    start_cpu_s: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {"file": os.path.basename(self.path), "hz": self.hz, "ticks": self.ticks,
                "processes": self.processes, "cores": self.cores, "gpus": self.gpus,
                "gpu_status": self.gpu_status, "gpm_status": self.gpm_status,
                "cpu_s": round(self.cpu_s, 6),
                "start_cpu_s": round(self.start_cpu_s, 6), "wall_s": round(self.wall_s, 3)}

    @property
    def steady_core_pct(self) -> float:
        """CPU share of one core after the start, per wall time (the sampler's rate)."""
        ticks = max(self.ticks - 1, 1)
        return 100 * (self.cpu_s - self.start_cpu_s) / max(ticks / self.hz, 1e-9)


@dataclass
class _Rows:
    # t, pid, cpu, rss, run-queue wait
    proc: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    core: list[tuple[int, int, int]] = field(default_factory=list)  # t, core, busy
    gpu: list[tuple[int, int, int, int, int, int]] = field(default_factory=list)
    gpm: list[tuple[int, int, int, int, int]] = field(default_factory=list)  # t, gpu, cpct x3


def _cpct(pct: float) -> int:
    """A GPM percentage as stored: hundredths of a percent, clamped to 0 ... 100%."""
    return min(max(round(pct * 100), 0), 10_000)


def _deltas(times: list[int]) -> tuple[int, list[int]]:
    if not times:
        return 0, []
    base, prev, out = times[0], times[0], []
    for t in times:
        out.append(t - prev)
        prev = t
    return base, out


def _gpm_hz_from_env() -> float:
    value = os.environ.get(envvars.GPM_HZ) or ""
    try:
        return float(value) if value else GPM_HZ
    except ValueError:
        print(f"rls-prof: {envvars.GPM_HZ}={value!r} is not a number of samples per "
              f"second; GPM sampled at {GPM_HZ:g} Hz", file=sys.stderr)
        return GPM_HZ


class Sampler:
    """Samples the run of ``root_pid`` (a child of this process) into ``output_dir``.
    :meth:`start` opens the file and starts the thread; :meth:`stop` ends it, writes the
    last chunk and returns the :class:`Summary`."""

    def __init__(self, output_dir: str, hz: float = DEFAULT_HZ,
                 exclude: set[int] | frozenset[int] = frozenset(),
                 nvml_library: str | None = None, gpm_hz: float | None = None) -> None:
        self.interval_ns = int(1e9 / hz)
        if gpm_hz is None:
            gpm_hz = _gpm_hz_from_env()
        # Every how many ticks a GPM sample is taken (0: never).
        self._gpm_every = max(round(hz / gpm_hz), 1) if gpm_hz > 0 else 0
        self.path = fmt.trace_file_path(output_dir, fmt.SOURCE_SAMPLES, os.getpid(),
                                        fmt.SAMPLES_SUFFIX)
        self.summary = Summary(self.path, hz)
        self._scanner = ProcessScanner(os.getpid(), exclude)
        self._nvml_library = nvml_library
        self._nvml: Nvml | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._fd = -1
        self._rows = _Rows()
        self._sequence = 0
        self._new_gpus: list[dict[str, Any]] = []
        self._cpu_ns = 0
        self._t0 = 0

    def start(self) -> None:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
                           | os.O_CLOEXEC, 0o644)
        clock = fmt.read_clock_pair()
        header = wire.record(header={
            "format_version": fmt.FORMAT_VERSION, "source": fmt.SOURCE_SAMPLES,
            "pid": os.getpid(), "ppid": os.getppid(), "host": fmt.host_name(),
            "process_name": "rls-prof", "argv": list(sys.argv),
            "clock": {"monotonic_ns": clock.monotonic_ns, "realtime_ns": clock.realtime_ns,
                      "uncertainty_ns": clock.uncertainty_ns},
            "recorder": "sampler", "rlscope_version": __version__})
        self._write(fmt.MAGIC + wire.varint(len(header)) + header)
        self._t0 = time.monotonic_ns()
        self._thread = threading.Thread(target=self._loop, name="rlscope-sampler",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> Summary:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._fd >= 0:
            self._flush()
            os.close(self._fd)
            self._fd = -1
        s = self.summary
        s.processes, s.cpu_s = len(self._scanner.seen), self._cpu_ns / 1e9
        s.wall_s = (time.monotonic_ns() - self._t0) / 1e9
        return s

    # -- the thread --------------------------------------------------------------------
    def _loop(self) -> None:
        c0 = time.thread_time_ns()
        try:
            self._open_nvml()
            next_t = time.monotonic_ns()
            last_flush = next_t
            while True:
                self._tick()
                self._cpu_ns = time.thread_time_ns() - c0
                if self.summary.ticks == 1:
                    self.summary.start_cpu_s = self._cpu_ns / 1e9
                now = time.monotonic_ns()
                if now - last_flush >= FLUSH_S * 1e9:
                    self._flush()
                    last_flush = now
                next_t += self.interval_ns
                if next_t < now:  # fell behind (a stopped machine): skip, do not catch up
                    next_t = now + self.interval_ns
                if self._stop.wait((next_t - now) / 1e9):
                    break
            self._tick()  # the last values, as the run ends
        finally:
            if self._nvml is not None:
                self._nvml.close()
            self._cpu_ns = time.thread_time_ns() - c0

    def _open_nvml(self) -> None:
        try:
            self._nvml = Nvml.open(self._nvml_library)
        except NvmlError as e:
            self.summary.gpu_status = str(e)
            return
        self.summary.gpus = len(self._nvml.devices)
        self.summary.gpm_status = (self._nvml.gpm_open() if self._gpm_every
                                   else "GPM sampling off")
        self._new_gpus = [{"index": d.index, "name": d.name, "uuid": d.uuid,
                           "memory_total_bytes": d.memory_total_bytes}
                          for d in self._nvml.devices]

    def _tick(self) -> None:
        t = time.monotonic_ns()
        rows = self._rows
        rows.proc.extend((t, *r) for r in self._scanner.tick())
        cores = read_cores()
        self.summary.cores = max(self.summary.cores, len(cores))
        rows.core.extend((t, i, busy) for i, busy in enumerate(cores))
        gpm = self._gpm_every and self.summary.ticks % self._gpm_every == 0
        if self._nvml is not None:
            for d in self._nvml.devices:
                r = self._nvml.read(d.index)
                if r is not None:
                    rows.gpu.append((t, d.index, r.util_pct, r.memory_util_pct,
                                     r.memory_used_bytes, r.sm_clock_mhz))
                g = self._nvml.read_gpm(d.index) if gpm else None
                if g is not None:
                    rows.gpm.append((t, d.index, _cpct(g.sm_active_pct),
                                     _cpct(g.sm_occupancy_pct), _cpct(g.graphics_pct)))
        self.summary.ticks += 1

    # -- the file ----------------------------------------------------------------------
    def _flush(self) -> None:
        rows, self._rows = self._rows, _Rows()
        chunk: dict[str, Any] = {"sequence": self._sequence, "interval_ns": self.interval_ns,
                                 "gpu_status": self.summary.gpu_status,
                                 "gpm_status": self.summary.gpm_status,
                                 "sampler_cpu_ns": self._cpu_ns, "ticks": self.summary.ticks}
        if self._new_gpus:
            chunk["gpus"], self._new_gpus = self._new_gpus, []
        if rows.proc:
            base, d = _deltas([r[0] for r in rows.proc])
            chunk.update(proc_base_ns=base, proc_time_delta_ns=d,
                         proc_pid=[r[1] for r in rows.proc],
                         proc_cpu_ns=[r[2] for r in rows.proc],
                         proc_rss_bytes=[r[3] for r in rows.proc],
                         proc_runq_ns=[r[4] for r in rows.proc])
        if rows.core:
            base, d = _deltas([r[0] for r in rows.core])
            chunk.update(core_base_ns=base, core_time_delta_ns=d,
                         core_index=[r[1] for r in rows.core],
                         core_busy_ns=[r[2] for r in rows.core])
        if rows.gpu:
            base, d = _deltas([r[0] for r in rows.gpu])
            chunk.update(gpu_base_ns=base, gpu_time_delta_ns=d,
                         gpu_index=[r[1] for r in rows.gpu],
                         gpu_util_pct=[r[2] for r in rows.gpu],
                         gpu_memory_util_pct=[r[3] for r in rows.gpu],
                         gpu_memory_used_bytes=[r[4] for r in rows.gpu],
                         gpu_sm_clock_mhz=[r[5] for r in rows.gpu])
        if rows.gpm:
            base, d = _deltas([r[0] for r in rows.gpm])
            chunk.update(gpm_base_ns=base, gpm_time_delta_ns=d,
                         gpm_index=[r[1] for r in rows.gpm],
                         gpm_sm_active_cpct=[r[2] for r in rows.gpm],
                         gpm_sm_occupancy_cpct=[r[3] for r in rows.gpm],
                         gpm_graphics_cpct=[r[4] for r in rows.gpm])
        rec = wire.record(sample_chunk=chunk)
        self._write(wire.varint(len(rec)) + rec)  # one write: a kill tears at most this
        self._sequence += 1

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
