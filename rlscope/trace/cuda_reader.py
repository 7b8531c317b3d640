"""Read the CUDA collector's files (``cuda.<pid>.rlscope``, Header.source "cuda").

librlscope_cuda writes ``CudaChunk`` records (proto/rlscope/trace.proto): CUDA API calls
from the CUPTI callback API and GPU activity (kernels, memcpy, memset) from the activity
API, already converted to CLOCK_MONOTONIC ns. This module turns them into the columnar
:class:`~rlscope.trace.gpu.CudaApiCalls` / :class:`~rlscope.trace.gpu.GpuActivities`
tables and merges them into the :class:`ProcessTrace` of the same process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rlscope.errors import TraceError
from rlscope.trace.data import (
    CudaInfo,
    CuptiOverhead,
    Events,
    ExternalCorrelations,
    Header,
    ProcessTrace,
    Progress,
    ThreadInfo,
)
from rlscope.trace.gpu import CudaApiCalls, GpuActivities
from rlscope.trace.records import iter_records, torn_warning

SOURCE = "cuda"


def _delta(values: Any, base: int = 0) -> np.ndarray:
    a = np.array(values, dtype=np.int64)
    if len(a):
        a[0] += base
    return np.cumsum(a)


def _cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)


def read_cuda_records(path: Path, header: Header, h: Any, records: list[Any],
                      warnings: list[str]) -> tuple[CudaApiCalls, GpuActivities, CudaInfo]:
    """Assemble the chunks of one ``cuda.*.rlscope`` file (records after the header)."""
    strings: dict[int, str] = {0: ""}
    threads: dict[int, ThreadInfo] = {}
    cols: dict[str, list[np.ndarray]] = {}
    dropped_api = dropped_act = invalid = 0
    expected = 0

    def add(name: str, arr: np.ndarray) -> None:
        cols.setdefault(name, []).append(arr)

    for rec in records:
        if not rec.HasField("cuda_chunk"):
            raise TraceError(f"{path} is corrupt: a CUDA trace holds a non-CUDA record")
        c = rec.cuda_chunk
        if c.sequence != expected:
            warnings.append(f"{path.name}: chunk {expected} is missing (found {c.sequence}); "
                            "CUDA records were lost")
        expected = c.sequence + 1
        for s in c.strings:
            strings[s.id] = s.value
        for t in c.threads:
            threads[t.index] = ThreadInfo(t.index, t.tid, t.name)
        n_api = len(c.api_name)
        if not (len(c.api_start_delta_ns) == len(c.api_duration_ns) == len(c.api_thread)
                == len(c.api_domain) == len(c.api_correlation_delta) == n_api):
            raise TraceError(f"{path} is corrupt: CUDA chunk {c.sequence} has API columns "
                             "of different lengths")
        if n_api:
            start = _delta(c.api_start_delta_ns, c.api_base_ns)
            add("api_start", start)
            add("api_end", start + np.array(c.api_duration_ns, dtype=np.int64))
            add("api_thread", np.array(c.api_thread, dtype=np.uint32))
            add("api_name", np.array(c.api_name, dtype=np.uint32))
            add("api_domain", np.array(c.api_domain, dtype=np.uint8))
            add("api_corr", _delta(c.api_correlation_delta))
        n_gpu = len(c.gpu_kind)
        if not (len(c.gpu_start_delta_ns) == len(c.gpu_duration_ns) == len(c.gpu_device)
                == len(c.gpu_stream) == len(c.gpu_name) == len(c.gpu_correlation_delta)
                == len(c.gpu_bytes) == n_gpu):
            raise TraceError(f"{path} is corrupt: CUDA chunk {c.sequence} has GPU columns "
                             "of different lengths")
        if n_gpu:
            kind = np.array(c.gpu_kind, dtype=np.uint8)
            start = _delta(c.gpu_start_delta_ns, c.gpu_base_ns)
            add("gpu_kind", kind)
            add("gpu_start", start)
            add("gpu_end", start + np.array(c.gpu_duration_ns, dtype=np.int64))
            add("gpu_device", np.array(c.gpu_device, dtype=np.uint32))
            add("gpu_stream", np.array(c.gpu_stream, dtype=np.uint32))
            add("gpu_name", np.array(c.gpu_name, dtype=np.uint32))
            add("gpu_corr", _delta(c.gpu_correlation_delta))
            add("gpu_bytes", np.array(c.gpu_bytes, dtype=np.int64))
            is_k, is_m = kind == 1, kind == 2
            dims = np.array(c.kernel_dims, dtype=np.int64)
            copy = np.array(c.memcpy_kind, dtype=np.int64)
            if len(dims) != 6 * int(is_k.sum()) or len(copy) != int(is_m.sum()):
                raise TraceError(f"{path} is corrupt: CUDA chunk {c.sequence} has kernel or "
                                 "memcpy details that do not match its records")
            grid = np.zeros((n_gpu, 3), np.int32)
            block = np.zeros((n_gpu, 3), np.int32)
            d = dims.reshape(-1, 6).astype(np.int32)
            grid[is_k], block[is_k] = d[:, :3], d[:, 3:]
            ck = np.zeros(n_gpu, np.uint8)
            ck[is_m] = copy
            add("gpu_grid", grid)
            add("gpu_block", block)
            add("gpu_copy", ck)
        if len(c.ext_id):
            add("ext_kind", np.array(c.ext_kind, dtype=np.uint32))
            add("ext_id", np.array(c.ext_id, dtype=np.uint64))
            add("ext_corr", np.array(c.ext_correlation, dtype=np.uint64))
        if len(c.overhead_kind):
            start = _delta(c.overhead_start_delta_ns, c.overhead_base_ns)
            add("ovh_kind", np.array(c.overhead_kind, dtype=np.uint32))
            add("ovh_obj", np.array(c.overhead_object_id, dtype=np.uint64))
            add("ovh_start", start)
            add("ovh_end", start + np.array(c.overhead_duration_ns, dtype=np.int64))
        dropped_api += c.dropped_api_calls
        dropped_act += c.dropped_activity_records
        invalid += c.invalid_activity_records

    def col(name: str, dtype: Any) -> np.ndarray:
        return _cat(cols.get(name, []), dtype)

    string_list = [strings.get(i, f"<string {i}>") for i in range(max(strings) + 1)]
    api_thread = col("api_thread", np.uint32)
    tid_of = np.zeros(int(api_thread.max()) + 1 if len(api_thread) else 1, np.int64)
    for t in threads.values():
        if t.index < len(tid_of):
            tid_of[t.index] = t.tid
    api_corr = col("api_corr", np.uint64)
    ext = ExternalCorrelations(col("ext_kind", np.uint32), col("ext_id", np.uint64),
                               col("ext_corr", np.uint64))
    external_id = np.zeros(len(api_corr), np.uint64)
    if len(ext.external_id) and len(api_corr):
        # The innermost (last pushed) external id of each correlation id.
        lookup = dict(zip(ext.correlation_id.tolist(), ext.external_id.tolist(), strict=True))
        external_id = np.array([lookup.get(c, 0) for c in api_corr.tolist()], np.uint64)
    api = CudaApiCalls(tid_of[api_thread], col("api_start", np.int64), col("api_end", np.int64),
                       api_corr, col("api_name", np.uint32), col("api_domain", np.uint8),
                       string_list, external_id=external_id)
    order = np.argsort(api.start_ns, kind="stable")
    api = CudaApiCalls(api.tid[order], api.start_ns[order], api.end_ns[order],
                       api.correlation_id[order], api.name[order], api.domain[order],
                       string_list, external_id=api.external_id[order])
    gpu = GpuActivities(col("gpu_kind", np.uint8), col("gpu_device", np.uint32),
                        col("gpu_stream", np.uint32), col("gpu_start", np.int64),
                        col("gpu_end", np.int64), col("gpu_corr", np.uint64),
                        col("gpu_name", np.uint32), col("gpu_bytes", np.int64), string_list,
                        grid=_cat(cols.get("gpu_grid", []), np.int32).reshape(-1, 3),
                        block=_cat(cols.get("gpu_block", []), np.int32).reshape(-1, 3),
                        copy_kind=col("gpu_copy", np.uint8))
    # Buffers complete out of order: sort by start for the analysis.
    order = np.argsort(gpu.start_ns, kind="stable")
    gpu = GpuActivities(gpu.kind[order], gpu.device[order], gpu.stream[order],
                        gpu.start_ns[order], gpu.end_ns[order], gpu.correlation_id[order],
                        gpu.name[order], gpu.bytes[order], string_list, grid=gpu.grid[order],
                        block=gpu.block[order], copy_kind=gpu.copy_kind[order])
    if (len(api) and int(api.name.max()) >= len(string_list)) or (
            len(gpu) and int(gpu.name.max()) >= len(string_list)):
        raise TraceError(f"{path} is corrupt: a CUDA record names an undefined string")
    if dropped_api:
        warnings.append(f"{path.name}: {dropped_api} CUDA API calls were dropped because the "
                        "recorder's memory bound was reached (RLSCOPE_MAX_BUFFER_BYTES)")
    if dropped_act:
        warnings.append(f"{path.name}: CUPTI dropped {dropped_act} GPU activity records "
                        "(its buffers were full); GPU time is under-counted")
    if invalid:
        warnings.append(f"{path.name}: {invalid} GPU activity records had zero or inverted "
                        "timestamps (a CUPTI bug before CUDA 13.1) and were skipped")
    overhead = CuptiOverhead(col("ovh_kind", np.uint32), col("ovh_obj", np.uint64),
                             col("ovh_start", np.int64), col("ovh_end", np.int64))
    info = CudaInfo(path, header, h.cupti_offset_ns, h.cupti_offset_error_ns, h.cupti_version,
                    threads, ext, overhead, dropped_api, dropped_act, invalid, expected,
                    warnings)
    return api, gpu, info


def read_cuda_process(path: Path, header: Header, h: Any) -> ProcessTrace:
    """A CUDA collector file as a process of its own (no Python events); ``merge_cuda``
    folds it into the Python file of the same process. ``h``: the raw header message."""
    warnings: list[str] = []
    records = []
    for i, (offset, rec) in enumerate(iter_records(path)):
        if rec is None:
            warnings.append(torn_warning(path, offset))
            break
        if i:
            records.append(rec)
    api, gpu, info = read_cuda_records(path, header, h, records, warnings)
    return ProcessTrace(path, header, Events.empty(), [""], dict(info.threads),
                        Progress.empty(), {}, 0, info.chunks, warnings, api_calls=api,
                        gpu=gpu, cuda=info)


def merge_cuda(processes: list[ProcessTrace]) -> list[ProcessTrace]:
    """Fold each CUDA-only ProcessTrace into the Python one of the same process.

    Matched by host and pid; when a pid was reused in the directory, the Python file whose
    start is the latest one before the CUDA file's start wins. A CUDA file with no Python
    file stays as a process of its own (e.g. a C++ program).
    """
    py = [p for p in processes if p.header.source != SOURCE]
    out = list(py)
    for c in (p for p in processes if p.header.source == SOURCE):
        cands = [p for p in py if p.pid == c.pid and p.header.host == c.header.host
                 and len(p.api_calls) == 0 and len(p.gpu) == 0]
        if not cands:
            out.append(c)
            continue
        start = c.header.clock.monotonic_ns
        before = [p for p in cands if p.header.clock.monotonic_ns <= start]
        target = (max(before, key=lambda p: p.header.clock.monotonic_ns) if before
                  else min(cands, key=lambda p: p.header.clock.monotonic_ns))
        target.api_calls = c.api_calls
        target.gpu = c.gpu
        target.cuda = c.cuda
        target.warnings.extend(c.warnings)
    return out
