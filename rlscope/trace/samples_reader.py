"""Read rls-prof's sample files (``samples.<pid>.rlsamples``, Header.source "samples";
docs/trace-format.md#sample-files) into :class:`~rlscope.trace.samples.Samples`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from rlscope.errors import TraceError
from rlscope.trace import format as fmt
from rlscope.trace.records import header_of, iter_records, torn_warning
from rlscope.trace.samples import Samples

_GROUPS: dict[str, tuple[str, str, list[tuple[str, Any]]]] = {
    "proc": ("proc_base_ns", "proc_time_delta_ns",
             [("proc_pid", np.int64), ("proc_cpu_ns", np.int64), ("proc_rss_bytes", np.int64),
              ("proc_runq_ns", np.int64)]),
    "core": ("core_base_ns", "core_time_delta_ns",
             [("core_index", np.uint32), ("core_busy_ns", np.int64)]),
    "gpu": ("gpu_base_ns", "gpu_time_delta_ns",
            [("gpu_index", np.uint32), ("gpu_util_pct", np.uint32),
             ("gpu_memory_util_pct", np.uint32), ("gpu_memory_used_bytes", np.int64),
             ("gpu_sm_clock_mhz", np.uint32)]),
    # Absent from files written before GPM was sampled: no rows.
    "gpm": ("gpm_base_ns", "gpm_time_delta_ns",
            [("gpm_index", np.uint32), ("gpm_sm_active_cpct", np.uint32),
             ("gpm_sm_occupancy_cpct", np.uint32), ("gpm_graphics_cpct", np.uint32)]),
}
# Columns added later: a chunk without them (an older file) reads as this value.
_LATER = {"proc_runq_ns": -1}
# Stored in hundredths of a percent, read as % (Samples' names).
_CPCT = {"gpm_sm_active_cpct": "gpm_sm_active_pct",
         "gpm_sm_occupancy_cpct": "gpm_sm_occupancy_pct", "gpm_graphics_cpct": "gpm_graphics_pct"}


def sample_files(directory: str | os.PathLike[str]) -> list[Path]:
    return sorted(Path(directory).glob("*" + fmt.SAMPLES_SUFFIX))


def read_samples(paths: list[Path]) -> Samples | None:
    """The samples of these files merged (normally one per run); None without files."""
    if not paths:
        return None
    cols: dict[str, list[np.ndarray]] = {}
    out = Samples.empty()
    for path in paths:
        _read_one(path, cols, out)
    for group, (_, _, columns) in _GROUPS.items():
        names = [f"{group}_time_ns"] + [c for c, _ in columns]
        dtypes = [np.int64] + [d for _, d in columns]
        arrays = [np.concatenate(cols[n]).astype(d, copy=False) if n in cols
                  else np.zeros(0, d) for n, d in zip(names, dtypes, strict=True)]
        o = np.argsort(arrays[0], kind="stable")
        for n, a in zip(names, arrays, strict=True):
            if n in _CPCT:
                setattr(out, _CPCT[n], a[o] / 100.0)
            else:
                setattr(out, n, a[o])
    return out


def _read_one(path: Path, cols: dict[str, list[np.ndarray]], out: Samples) -> None:
    expected = 0
    for i, (offset, rec) in enumerate(iter_records(path)):
        if rec is None:
            out.warnings.append(torn_warning(path, offset))
            return
        if i == 0:
            h = header_of(path, rec)
            if h.source != fmt.SOURCE_SAMPLES:
                raise TraceError(f"{path} is not a sample file (source {h.source!r})")
            continue
        if not rec.HasField("sample_chunk"):
            raise TraceError(f"{path} is corrupt: a sample file holds another record")
        c = rec.sample_chunk
        if c.sequence != expected:
            out.warnings.append(f"{path.name}: sample chunk {expected} is missing (found "
                                f"{c.sequence}); samples were lost")
        expected = c.sequence + 1
        out.interval_ns = int(c.interval_ns) or out.interval_ns
        out.gpus.extend({"index": g.index, "name": g.name, "uuid": g.uuid,
                         "memory_total_bytes": g.memory_total_bytes} for g in c.gpus)
        out.gpu_status = c.gpu_status or out.gpu_status
        out.gpm_status = c.gpm_status or out.gpm_status
        out.sampler_cpu_ns = max(out.sampler_cpu_ns, int(c.sampler_cpu_ns))
        out.ticks = max(out.ticks, int(c.ticks))
        for group, (base, delta, columns) in _GROUPS.items():
            _add_group(path, c, group, base, delta, columns, cols)


def _add_group(path: Path, c: Any, group: str, base: str, delta: str,
               columns: list[tuple[str, Any]], cols: dict[str, list[np.ndarray]]) -> None:
    d = np.array(getattr(c, delta), dtype=np.int64)
    n = len(d)
    if any(len(getattr(c, name)) != n for name, _ in columns
           if not (name in _LATER and not len(getattr(c, name)))):
        raise TraceError(f"{path} is corrupt: sample chunk {c.sequence} has {group} columns "
                         "of different lengths")
    if not n:
        return
    d[0] += getattr(c, base)
    cols.setdefault(f"{group}_time_ns", []).append(np.cumsum(d))
    for name, dtype in columns:
        v = getattr(c, name)
        cols.setdefault(name, []).append(np.array(v, dtype=dtype) if len(v) or not n
                                         else np.full(n, _LATER[name], dtype))
