"""The operations table's rows: the enclosing operations added, inclusive (wall) time, and
the display order (start-up first, then phases and operations by first begin, depth
first); pure functions of the aggregated rows and the path/phase tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rlscope.analysis.engine.paths import (
    FIRST_OPERATION_ID,
    STARTUP_ID,
    STARTUP_IMPORTS_ID,
    NameTable,
    PathTable,
)
from rlscope.analysis.engine.process import ProcessResult

LAST = 1 << 62  # sorts after every time
COUNT_COLS = ("calls", "backend_calls", "simulator_calls", "cuda_api_calls", "wait_calls")


def tree_key(paths: PathTable, first: dict[int, int], path: int) -> tuple[tuple[int, int], ...]:
    """Depth-first, siblings by first begin; the start-up first, unannotated last."""
    if path == 0:
        return ((LAST, 0),)
    return tuple((first.get(a, LAST) if a >= FIRST_OPERATION_ID else -1, a)
                 for a in reversed(paths.ancestors(path)))

def group_key(phases: NameTable, wide: pd.DataFrame, rows: list[ProcessResult]) -> list[int]:
    """Start-up rows first, then each phase at its first begin, the rows outside
    phases at their first operation's begin (after the phases when they have none).
    ``rows``: each row's process."""
    phase_id = {n: i for i, n in enumerate(phases.names)}
    no_phase: dict[int, int] = {}  # id(process) -> first begin outside phases
    for r, ph, i in zip(rows, wide["phase"], wide["path_id"], strict=True):
        if not ph and i >= FIRST_OPERATION_ID:
            t = r.first_ns.get(int(i), LAST)
            no_phase[id(r)] = min(no_phase.get(id(r), LAST), t)
    out = []
    for r, ph, i in zip(rows, wide["phase"], wide["path_id"], strict=True):
        if i in (STARTUP_ID, STARTUP_IMPORTS_ID):
            out.append(-1)
        elif ph:
            out.append(r.phase_first_ns.get(phase_id[ph], LAST))
        else:
            out.append(no_phase.get(id(r), LAST + 1))
    return out

def add_ancestors(paths: PathTable, wide: pd.DataFrame) -> pd.DataFrame:
    """Rows for enclosing operations that have no time of their own in a phase."""
    have = set(zip(wide["pid"], wide["session"], wide["phase"], wide["path_id"],
                   strict=True))
    extra = []
    for pid, n, ph, path in list(have):
        for a in paths.ancestors(int(path))[1:]:
            if (pid, n, ph, a) not in have:
                have.add((pid, n, ph, a))
                extra.append({"pid": pid, "session": n, "phase": ph, "path_id": a})
    if extra:
        wide = pd.concat([wide, pd.DataFrame(extra)], ignore_index=True).fillna(0)
        for c in COUNT_COLS:
            wide[c] = wide[c].astype(np.int64)
    return wide

def inclusive(paths: PathTable, wide: pd.DataFrame) -> np.ndarray:
    keys = list(zip(wide["pid"], wide["session"], wide["phase"], wide["path_id"],
                    strict=True))
    self_by = dict(zip(keys, wide["self_s"], strict=True))
    total = dict.fromkeys(self_by, 0.0)
    for (p, n, ph, pa), s in self_by.items():
        for a in paths.ancestors(int(pa)) or [0]:
            if (p, n, ph, a) in total:
                total[(p, n, ph, a)] += s
    return np.array([total[k] for k in keys])
