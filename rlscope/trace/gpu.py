"""Columnar tables of CUDA API calls and GPU activity, as the analysis consumes them.

The CUDA collector's files (``cuda.<pid>.rlscope``) are read into these; synthetic tests
build them directly. Times are CLOCK_MONOTONIC ns (already converted from CUPTI time).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# CudaApiCalls.domain
RUNTIME_API = 1
DRIVER_API = 2

# GpuActivities.kind
KERNEL = 1
MEMCPY = 2
MEMSET = 3

GPU_KIND_NAMES = {KERNEL: "kernel", MEMCPY: "memcpy", MEMSET: "memset"}


@dataclass
class CudaApiCalls:
    """One row per CUDA runtime/driver API call made by the process."""

    tid: np.ndarray  # int64 OS thread id (joins Python threads by ThreadInfo.tid)
    start_ns: np.ndarray  # int64
    end_ns: np.ndarray  # int64
    correlation_id: np.ndarray  # uint64, CUPTI correlation id (links to GpuActivities)
    name: np.ndarray  # uint32 index into ``strings``
    domain: np.ndarray  # uint8 RUNTIME_API / DRIVER_API
    strings: list[str] = field(default_factory=lambda: [""])
    # CUPTI external correlation id pushed around the call (0: none); empty when the
    # table was built without one (synthetic tables).
    external_id: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))

    def __len__(self) -> int:
        return len(self.start_ns)

    @staticmethod
    def empty() -> CudaApiCalls:
        z = np.zeros(0, np.int64)
        return CudaApiCalls(z, z, z, z.astype(np.uint64), z.astype(np.uint32),
                            z.astype(np.uint8))


@dataclass
class GpuActivities:
    """One row per kernel, memcpy or memset executed on a GPU."""

    kind: np.ndarray  # uint8 KERNEL / MEMCPY / MEMSET
    device: np.ndarray  # uint32
    stream: np.ndarray  # uint32
    start_ns: np.ndarray  # int64
    end_ns: np.ndarray  # int64
    correlation_id: np.ndarray  # uint64, of the launching API call (0: unknown)
    name: np.ndarray  # uint32 index into ``strings`` (kernel name; 0 for copies)
    bytes: np.ndarray  # int64 (memcpy / memset size; 0 for kernels)
    strings: list[str] = field(default_factory=lambda: [""])
    # Filled by the CUDA reader; empty when the table was built without them.
    grid: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int32))  # (n, 3) kernels
    block: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int32))  # (n, 3) kernels
    copy_kind: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))  # memcpy kind

    def __len__(self) -> int:
        return len(self.start_ns)

    @staticmethod
    def empty() -> GpuActivities:
        z = np.zeros(0, np.int64)
        return GpuActivities(z.astype(np.uint8), z.astype(np.uint32), z.astype(np.uint32),
                             z, z, z.astype(np.uint64), z.astype(np.uint32), z)
