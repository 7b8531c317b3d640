"""The few NVML calls rls-prof's sampler makes, bound with ctypes (docs/cuda.md#sampling).

Why not nvidia-ml-py (pynvml): the sampler needs six calls whose C signatures and
structs (``nvmlUtilization_t``, ``nvmlMemory_t``) have not changed since NVML's first
releases, plus five GPM calls whose structs carry a version field; the driver ships
``libnvidia-ml.so.1`` on every GPU machine; binding them
here means GPU sampling needs no extra package, and tests point
``RLSCOPE_NVML_LIBRARY`` at a fake library without putting ``LD_LIBRARY_PATH`` into the
profiled processes' environment. ``tests/cuda/test_nvml.py`` reads the fake through
nvidia-ml-py too (the ``nvml`` extra), which checks these definitions against NVIDIA's.

Loaded only by the sampler, in rls-prof (never in a profiled process).
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

from rlscope import envvars

LIBRARY = "libnvidia-ml.so.1"
SUCCESS = 0
CLOCK_SM = 1  # nvmlClockType_t NVML_CLOCK_SM
_NAME_LEN = 96  # NVML_DEVICE_NAME_V2_BUFFER_SIZE
_UUID_LEN = 96  # NVML_DEVICE_UUID_V2_BUFFER_SIZE


class _Utilization(ctypes.Structure):  # nvmlUtilization_t
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class _Memory(ctypes.Structure):  # nvmlMemory_t (v1)
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


# GPM (GPU Performance Monitoring, Hopper and later): nvmlGpmMetricId_t values and the
# struct versions of nvml.h (NVML_GPM_METRICS_GET_VERSION, NVML_GPM_SUPPORT_VERSION).
GPM_GRAPHICS_UTIL = 1  # share of time any context was active on the GPU
GPM_SM_UTIL = 2  # share of time the SMs were active (averaged over SMs)
GPM_SM_OCCUPANCY = 3  # resident warps vs the theoretical maximum
_GPM_METRICS = (GPM_SM_UTIL, GPM_SM_OCCUPANCY, GPM_GRAPHICS_UTIL)
_GPM_VERSION = 1
_GPM_METRIC_SLOTS = 512  # >= nvml.h's NVML_GPM_METRIC_MAX; the driver reads numMetrics


class _GpmSupport(ctypes.Structure):  # nvmlGpmSupport_t
    _fields_ = [("version", ctypes.c_uint), ("isSupportedDevice", ctypes.c_uint)]


class _GpmMetricInfo(ctypes.Structure):  # the metricInfo member of nvmlGpmMetric_t
    _fields_ = [("shortName", ctypes.c_char_p), ("longName", ctypes.c_char_p),
                ("unit", ctypes.c_char_p)]


class _GpmMetric(ctypes.Structure):  # nvmlGpmMetric_t
    _fields_ = [("metricId", ctypes.c_uint), ("nvmlReturn", ctypes.c_int),
                ("value", ctypes.c_double), ("metricInfo", _GpmMetricInfo)]


class _GpmMetricsGet(ctypes.Structure):  # nvmlGpmMetricsGet_t
    _fields_ = [("version", ctypes.c_uint), ("numMetrics", ctypes.c_uint),
                ("sample1", ctypes.c_void_p), ("sample2", ctypes.c_void_p),
                ("metrics", _GpmMetric * _GPM_METRIC_SLOTS)]


class NvmlError(Exception):
    """NVML cannot be used; the message is one line for rls-prof to print."""


@dataclass(frozen=True)
class Device:
    index: int
    name: str
    uuid: str
    memory_total_bytes: int


@dataclass(frozen=True)
class Reading:
    util_pct: int  # share of the driver's last sample period with a kernel running
    memory_util_pct: int
    memory_used_bytes: int
    sm_clock_mhz: int


@dataclass(frozen=True)
class GpmReading:
    """GPM metrics over the time between a device's two latest GPM samples, in %."""

    sm_active_pct: float
    sm_occupancy_pct: float
    graphics_pct: float


class Nvml:
    """An initialised NVML: :meth:`open` (raises :class:`NvmlError` with the reason),
    :meth:`read` per device, :meth:`close`."""

    def __init__(self, lib: ctypes.CDLL, devices: list[Device], handles: list[int]) -> None:
        self._lib = lib
        self.devices = devices
        self._handles = [ctypes.c_void_p(h) for h in handles]
        self._util = _Utilization()
        self._mem = _Memory()
        self._clock = ctypes.c_uint()
        # GPM: per device a pair of samples (previous, current) once gpm_open() found
        # the device supported; None otherwise.
        self._gpm: list[list[ctypes.c_void_p] | None] = [None] * len(devices)
        self._gpm_have_prev = [False] * len(devices)
        self._gpm_get: _GpmMetricsGet | None = None

    @staticmethod
    def open(path: str | None = None) -> Nvml:
        path = path or os.environ.get(envvars.NVML_LIBRARY) or LIBRARY
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            raise NvmlError(f"no NVIDIA driver ({path} not found)") from None
        for name in ("nvmlInit_v2", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
                     "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo",
                     "nvmlDeviceGetClockInfo"):
            if not hasattr(lib, name):
                raise NvmlError(f"{path} has no {name} (NVML too old)")
        lib.nvmlErrorString.restype = ctypes.c_char_p
        _check(lib, lib.nvmlInit_v2(), "nvmlInit")
        try:
            n = ctypes.c_uint()
            _check(lib, lib.nvmlDeviceGetCount_v2(ctypes.byref(n)), "nvmlDeviceGetCount")
            devices, handles = [], []
            for i in range(n.value):
                h = ctypes.c_void_p()
                _check(lib, lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(i),
                                                              ctypes.byref(h)),
                       "nvmlDeviceGetHandleByIndex")
                mem = _Memory()
                ok_mem = lib.nvmlDeviceGetMemoryInfo(h, ctypes.byref(mem)) == SUCCESS
                devices.append(Device(i, _string(lib, "nvmlDeviceGetName", h, _NAME_LEN),
                                      _string(lib, "nvmlDeviceGetUUID", h, _UUID_LEN),
                                      int(mem.total) if ok_mem else 0))
                handles.append(int(h.value or 0))
        except NvmlError:
            lib.nvmlShutdown()
            raise
        if not devices:
            lib.nvmlShutdown()
            raise NvmlError("NVML found no GPU")
        return Nvml(lib, devices, handles)

    def read(self, i: int) -> Reading | None:
        """The device's current values; None when NVML cannot read it now (e.g. the GPU
        fell off the bus): that tick has no row for it."""
        h, lib = self._handles[i], self._lib
        if lib.nvmlDeviceGetUtilizationRates(h, ctypes.byref(self._util)) != SUCCESS:
            return None
        mem_ok = lib.nvmlDeviceGetMemoryInfo(h, ctypes.byref(self._mem)) == SUCCESS
        clk_ok = lib.nvmlDeviceGetClockInfo(h, ctypes.c_int(CLOCK_SM),
                                            ctypes.byref(self._clock)) == SUCCESS
        return Reading(int(self._util.gpu), int(self._util.memory),
                       int(self._mem.used) if mem_ok else 0,
                       int(self._clock.value) if clk_ok else 0)

    def gpm_open(self) -> str:
        """Sets up GPM metrics on the devices that support them; returns why GPM is not
        sampled on some or all ("" when it is on every device)."""
        lib = self._lib
        for name in ("nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc", "nvmlGpmSampleFree",
                     "nvmlGpmSampleGet", "nvmlGpmMetricsGet"):
            if not hasattr(lib, name):
                return f"NVML has no {name} (driver older than GPM)"
        unsupported = []
        for i, h in enumerate(self._handles):
            sup = _GpmSupport(_GPM_VERSION, 0)
            if (lib.nvmlGpmQueryDeviceSupport(h, ctypes.byref(sup)) != SUCCESS
                    or not sup.isSupportedDevice):
                unsupported.append(i)
                continue
            pair = [ctypes.c_void_p(), ctypes.c_void_p()]
            if any(lib.nvmlGpmSampleAlloc(ctypes.byref(p)) != SUCCESS for p in pair):
                for p in pair:
                    if p.value:
                        lib.nvmlGpmSampleFree(p)
                unsupported.append(i)
                continue
            self._gpm[i] = pair
        if any(p is not None for p in self._gpm):
            g = _GpmMetricsGet()
            g.version, g.numMetrics = _GPM_VERSION, len(_GPM_METRICS)
            for k, m in enumerate(_GPM_METRICS):
                g.metrics[k].metricId = m
            self._gpm_get = g
        if not unsupported:
            return ""
        which = ("GPU" if len(self.devices) == 1 else
                 "GPU " + ",".join(map(str, unsupported)))
        return f"{which} without GPM metrics (NVML GPM needs Hopper or later)"

    def gpm_supported(self, i: int) -> bool:
        return self._gpm[i] is not None

    def read_gpm(self, i: int) -> GpmReading | None:
        """Takes a GPM sample of device ``i``; the metrics since its previous one, or
        None (no GPM, the first sample, or NVML could not compute them)."""
        pair, g = self._gpm[i], self._gpm_get
        if pair is None or g is None:
            return None
        lib = self._lib
        prev, cur = pair
        if lib.nvmlGpmSampleGet(self._handles[i], cur) != SUCCESS:
            self._gpm_have_prev[i] = False
            return None
        pair.reverse()  # the current sample is the next call's previous one
        if not self._gpm_have_prev[i]:
            self._gpm_have_prev[i] = True
            return None
        g.sample1, g.sample2 = prev.value, cur.value
        if lib.nvmlGpmMetricsGet(ctypes.byref(g)) != SUCCESS:
            return None
        m = g.metrics
        if any(m[k].nvmlReturn != SUCCESS for k in range(len(_GPM_METRICS))):
            return None
        return GpmReading(float(m[0].value), float(m[1].value), float(m[2].value))

    def close(self) -> None:
        for pair in self._gpm:
            for p in pair or ():
                self._lib.nvmlGpmSampleFree(p)
        self._gpm = [None] * len(self.devices)
        self._lib.nvmlShutdown()


def _string(lib: ctypes.CDLL, fn: str, h: ctypes.c_void_p, n: int) -> str:
    buf = ctypes.create_string_buffer(n)
    if not hasattr(lib, fn) or getattr(lib, fn)(h, buf, ctypes.c_uint(n)) != SUCCESS:
        return ""
    return buf.value.decode(errors="replace")


def _check(lib: ctypes.CDLL, rc: int, what: str) -> None:
    if rc != SUCCESS:
        try:
            msg = (lib.nvmlErrorString(rc) or b"").decode(errors="replace")
        except (AttributeError, OSError):
            msg = ""
        raise NvmlError(f"{what} failed: {msg or f'NVML error {rc}'}")
