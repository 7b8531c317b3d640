"""The few NVML calls rls-prof's sampler makes, bound with ctypes (docs/cuda.md#sampling).

Why not nvidia-ml-py (pynvml): the sampler needs six calls whose C signatures and
structs (``nvmlUtilization_t``, ``nvmlMemory_t``) have not changed since NVML's first
releases, and the driver ships ``libnvidia-ml.so.1`` on every GPU machine; binding them
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

    def close(self) -> None:
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
