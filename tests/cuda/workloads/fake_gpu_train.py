"""A Python "training loop" whose CUDA work goes through the fake libcupti (argv[1]):
each operation makes CUDA API calls and its GPU work runs during the operation."""

from __future__ import annotations

import ctypes
import sys
import time

import rlscope

RUNTIME = 2  # CUPTI_CB_DOMAIN_RUNTIME_API
LAUNCH, MEMCPY = 211, 31  # cudaLaunchKernel_v7000, cudaMemcpy_v3020
DIMS = (ctypes.c_int32 * 6)(8, 1, 1, 256, 1, 1)

cupti = ctypes.CDLL(sys.argv[1])
cupti.fake_api.restype = ctypes.c_uint32
cupti.fake_api.argtypes = [ctypes.c_int, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_void_p,
                           ctypes.c_void_p]
cupti.fake_kernel.argtypes = [ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32,
                              ctypes.c_uint32, ctypes.c_char_p, ctypes.c_void_p]
cupti.fake_memcpy.argtypes = [ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                              ctypes.c_uint8, ctypes.c_uint32, ctypes.c_uint32]
cupti.cuptiActivityFlushAll.argtypes = [ctypes.c_uint32]


def now() -> int:
    t = ctypes.c_uint64()
    cupti.cuptiGetTimestamp(ctypes.byref(t))
    return t.value


def gpu_op(name: str, api: int, gpu_us: int) -> None:
    with rlscope.operation(name):
        corr = cupti.fake_api(RUNTIME, api, name.encode(), None, None)
        t = now()
        if api == LAUNCH:
            cupti.fake_kernel(corr, t, t + gpu_us * 1000, 0, 7, b"train_kernel", DIMS)
        else:
            cupti.fake_memcpy(corr, t, t + gpu_us * 1000, 1 << 20, 1, 0, 7)
        time.sleep(gpu_us / 1e6)  # the CPU waits while the "GPU" works


cupti.fake_cuInit()
with rlscope.phase("training"):
    for _ in range(5):
        gpu_op("inference", LAUNCH, 2000)
        gpu_op("backprop", MEMCPY, 1000)
cupti.cuptiActivityFlushAll(0)
print("done")
