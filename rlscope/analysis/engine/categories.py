"""Resource categories and overlap regions: the vocabulary of every breakdown."""

from __future__ import annotations

from rlscope.trace import gpu

# CPU categories: what a thread is doing at an instant (innermost intercepted call wins).
PYTHON = 0
BACKEND = 1
SIMULATOR = 2
CUDA_API = 3
# GPU categories: what a GPU stream is executing.
KERNEL = 4
MEMCPY = 5
MEMSET = 6
# A thread blocked in an intercepted wait (sleep, pipe/socket receive, select, lock and
# queue waits, waiting for a child): off the CPU. Numbered last so the others keep theirs.
WAITING = 7

CATEGORY_NAMES = ["Python", "Backend", "Simulator", "CUDA API", "GPU kernel", "GPU memcpy",
                  "GPU memset", "Waiting"]
CPU_CATEGORIES = (PYTHON, BACKEND, SIMULATOR, CUDA_API, WAITING)
GPU_CATEGORIES = (KERNEL, MEMCPY, MEMSET)
N_CATEGORIES = len(CATEGORY_NAMES)

# GpuActivities.kind -> category; and the priority used when several kinds run at once
# (only to pick which one a GPU-only instant is charged to: kernels first).
GPU_KIND_CATEGORY = {gpu.KERNEL: KERNEL, gpu.MEMCPY: MEMCPY, gpu.MEMSET: MEMSET}
GPU_KIND_PRIORITY = {gpu.KERNEL: 3, gpu.MEMCPY: 2, gpu.MEMSET: 1}

# Disjoint regions of a timeline.
CPU_ONLY = 0
GPU_ONLY = 1
CPU_GPU = 2
REGION_NAMES = ["CPU only", "GPU only", "CPU + GPU"]
N_REGIONS = len(REGION_NAMES)

# CUDA API calls during which the CPU waits for the GPU rather than working: their time is
# category "CUDA API", but while a GPU runs it counts as GPU-only (the CPU is blocked).
WAITING_CUDA_CALLS = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
    "cudaStreamWaitEvent", "cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemset",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize", "cuStreamWaitEvent",
    "cuMemcpy", "cuMemcpyDtoH_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoD_v2",
})
