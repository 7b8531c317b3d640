"""Short kernels in a CPU-bound loop, through the fake libcupti (argv[1]): each iteration
spins the CPU for ~1 ms and launches one kernel of argv[2] µs, so the GPU is busy ~1% of
the time while NVML (scripted by the test) reports it busy in every sample. Prints the
kernels' count and total time and the CPU time of the loop as one JSON line."""

from __future__ import annotations

import ctypes
import json
import sys
import time

import rlscope

RUNTIME, LAUNCH = 2, 211  # CUPTI_CB_DOMAIN_RUNTIME_API, cudaLaunchKernel_v7000
DIMS = (ctypes.c_int32 * 6)(1, 1, 1, 32, 1, 1)
SECONDS = float(sys.argv[3]) if len(sys.argv) > 3 else 1.5

cupti = ctypes.CDLL(sys.argv[1])
kernel_ns = int(float(sys.argv[2]) * 1000)
cupti.fake_api.restype = ctypes.c_uint32
cupti.fake_api.argtypes = [ctypes.c_int, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_void_p,
                           ctypes.c_void_p]
cupti.fake_kernel.argtypes = [ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32,
                              ctypes.c_uint32, ctypes.c_char_p, ctypes.c_void_p]
cupti.cuptiActivityFlushAll.argtypes = [ctypes.c_uint32]


def now() -> int:
    t = ctypes.c_uint64()
    cupti.cuptiGetTimestamp(ctypes.byref(t))
    return t.value


cupti.fake_cuInit()
n = 0
cpu0 = time.process_time()
with rlscope.phase("training"):
    end = time.perf_counter() + SECONDS
    while time.perf_counter() < end:
        with rlscope.operation("step"):
            spin = time.perf_counter() + 0.001
            while time.perf_counter() < spin:  # the CPU-bound part of the step
                pass
            corr = cupti.fake_api(RUNTIME, LAUNCH, b"cudaLaunchKernel", None, None)
            t = now()
            cupti.fake_kernel(corr, t, t + kernel_ns, 0, 7, b"tiny_kernel", DIMS)
            n += 1
cpu_s = time.process_time() - cpu0
cupti.cuptiActivityFlushAll(0)
print(json.dumps({"kernels": n, "kernel_ns": n * kernel_ns, "cpu_s": cpu_s}))
