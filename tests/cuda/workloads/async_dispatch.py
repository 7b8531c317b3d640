"""JAX-style asynchronous dispatch through the fake libcupti (argv[1]): each step's
"dispatch" operation launches one kernel of argv[2] ms and returns at once (the kernel
ends long after the operation closed); the host then works for argv[3] ms
("host_work"), and "block_until_ready" waits in cudaDeviceSynchronize until the kernel
has finished. The kernel's record is written then, ending argv[2] ms after its launch or
MARGIN_MS after the wait began, whichever is later: on a loaded machine the host may be
held up past the kernel's nominal end, and the wait must still be there. Prints the
steps' kernel time, the time spent waiting, the part of the wait the kernel ran in (from
the synchronisation's start to the kernel's end) and the part after it (the host woken
late: on a loaded machine, milliseconds) as one JSON line."""

from __future__ import annotations

import ctypes
import json
import sys
import time

import rlscope

RUNTIME = 2  # CUPTI_CB_DOMAIN_RUNTIME_API
LAUNCH, SYNC = 211, 165  # cudaLaunchKernel_v7000, cudaDeviceSynchronize_v3020
DIMS = (ctypes.c_int32 * 6)(8, 1, 1, 128, 1, 1)
STEPS = 5
MARGIN_MS = 15  # the least the host waits for the kernel at each step

cupti = ctypes.CDLL(sys.argv[1])
kernel_ns = int(float(sys.argv[2]) * 1e6)
host_s = float(sys.argv[3]) / 1e3
BODY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
cupti.fake_api.restype = ctypes.c_uint32
cupti.fake_api.argtypes = [ctypes.c_int, ctypes.c_uint32, ctypes.c_char_p, BODY,
                           ctypes.c_void_p]
cupti.fake_kernel.argtypes = [ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32,
                              ctypes.c_uint32, ctypes.c_char_p, ctypes.c_void_p]
cupti.cuptiActivityFlushAll.argtypes = [ctypes.c_uint32]


def now() -> int:
    t = ctypes.c_uint64()
    cupti.cuptiGetTimestamp(ctypes.byref(t))
    return t.value


kernel_end = 0
kernels = 0
gpu_wait = late = 0


@BODY
def wait_for_kernel(_arg: int) -> None:  # the device synchronisation: blocks, off the CPU
    global gpu_wait, late
    start = now()
    while (left := kernel_end - now()) > 0:
        time.sleep(left / 1e9)
    gpu_wait += kernel_end - start
    late += now() - kernel_end


cupti.fake_cuInit()
waited = 0
with rlscope.phase("training"):
    for _ in range(STEPS):
        with rlscope.operation("dispatch"):
            corr = cupti.fake_api(RUNTIME, LAUNCH, b"cudaLaunchKernel", BODY(0), None)
            t = now()
        with rlscope.operation("host_work"):
            spin_until = time.perf_counter() + host_s
            while time.perf_counter() < spin_until:
                pass
        with rlscope.operation("block_until_ready"):
            t0 = now()
            kernel_end = max(t + kernel_ns, t0 + MARGIN_MS * 1_000_000)
            kernels += kernel_end - t
            cupti.fake_kernel(corr, t, kernel_end, 0, 7, b"xla_fusion", DIMS)
            cupti.fake_api(RUNTIME, SYNC, b"cudaDeviceSynchronize", wait_for_kernel, None)
            waited += now() - t0
cupti.cuptiActivityFlushAll(0)
print(json.dumps({"steps": STEPS, "kernel_ns": kernels, "waited_ns": waited,
                  "gpu_wait_ns": gpu_wait, "late_ns": late,
                  "margin_ns": MARGIN_MS * 1_000_000}))
