"""Where one process's time went, from its aggregated result (no per-event work): busy,
waiting and idle time, time in operations, and what it recorded at all
(docs/multiprocess.md)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlscope.analysis.engine import categories as C
from rlscope.analysis.engine.paths import FIRST_OPERATION_ID, PathTable
from rlscope.analysis.engine.process import ProcessResult

# The category of time blocked in receive/select/sleep/locks/child waits, once analysis
# has it (docs/analysis.md); by name, so this module needs no change when it lands.
WAITING_NAMES = frozenset({"Waiting"})


@dataclass(frozen=True)
class ProcessTimes:
    wall_ns: int  # recorded span: first to last event (start to stop)
    busy_ns: float  # CPU categories other than waiting, summed over threads
    waiting_ns: float  # the waiting category, summed over threads
    idle_ns: float  # wall time with no thread active and no GPU work
    operations_ns: float  # inside any operation (any category), summed over threads
    gpu_ns: float  # GPU only time charged to the process's GPU work
    operation_calls: int
    native_calls: int  # outermost backend, simulator and CUDA API calls (not waits)
    gpu_activities: int


def _category_sets() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    names = C.CATEGORY_NAMES
    gpu = set(C.GPU_CATEGORIES)
    waiting = [i for i, n in enumerate(names) if n in WAITING_NAMES]
    busy = [i for i in range(len(names)) if i not in gpu and i not in waiting]
    return (np.array(busy, np.int64), np.array(waiting, np.int64),
            np.array(sorted(gpu), np.int64))


def process_times(r: ProcessResult) -> ProcessTimes:
    busy, waiting, gpu = _category_sets()
    by_cat = np.bincount(r.category.astype(np.int64), weights=r.ns,
                         minlength=len(C.CATEGORY_NAMES)) if len(r.ns) else \
        np.zeros(len(C.CATEGORY_NAMES))
    what = r.count_rows[:, 3] if len(r.count_rows) else np.zeros(0, np.int64)
    wall = int(r.span[1] - r.span[0])
    return ProcessTimes(
        wall_ns=wall,
        busy_ns=float(by_cat[busy].sum()),
        waiting_ns=float(by_cat[waiting].sum()) if len(waiting) else 0.0,
        idle_ns=float(max(wall - r.covered_ns, 0)),
        operations_ns=float(r.ns[r.path >= FIRST_OPERATION_ID].sum()) if len(r.ns) else 0.0,
        gpu_ns=float(by_cat[gpu].sum()),
        operation_calls=int(r.count_n[what == -1].sum()) if len(what) else 0,
        # Blocking calls are not work: a helper that only waits stays idle.
        native_calls=int(r.count_n[(what >= 0) & ~np.isin(what, waiting)].sum())
        if len(what) else 0,
        gpu_activities=int(r.gpu_rows[:, 5].sum()) if len(r.gpu_rows) else 0,
    )


def top_operations(r: ProcessResult, paths: PathTable) -> dict[int, tuple[float, int]]:
    """Top-level operation path id -> (inclusive ns summed over threads, calls)."""
    if not len(r.ns):
        return {}
    uniq, inverse = np.unique(r.path.astype(np.int64), return_inverse=True)
    top = np.array([(paths.ancestors(int(p)) or [0])[-1] for p in uniq.tolist()], np.int64)
    ns = np.bincount(top[inverse], weights=r.ns)
    out = {int(t): (float(ns[t]), 0) for t in np.unique(top).tolist()
           if t >= FIRST_OPERATION_ID}
    if len(r.count_rows):
        sel = (r.count_rows[:, 3] == -1) & np.isin(r.count_rows[:, 2], list(out))
        for p, n in zip(r.count_rows[sel, 2].tolist(), r.count_n[sel].tolist(), strict=True):
            t_ns, calls = out[int(p)]
            out[int(p)] = (t_ns, calls + int(n))
    return out
