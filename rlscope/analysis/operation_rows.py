"""The operations table (Analysis.operations): self time per category and region, the
calls, the enclosing operations added, inclusive (wall) time, and the display order
(start-up first, then phases and operations by first begin, depth first); pure functions
of the aggregated rows and the path/phase tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rlscope.analysis.engine import categories as C
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


def column(name: str) -> str:
    """A category's or region's name as a column name ("CPU + GPU" -> "cpu_gpu")."""
    return name.lower().replace(" + ", "_").replace(" ", "_")


_CAT_COL = {"Python": "python_s", "Backend": "backend_s", "Simulator": "simulator_s",
            "CUDA API": "cuda_api_s", "GPU kernel": "gpu_s", "GPU memcpy": "gpu_s",
            "GPU memset": "gpu_s", "Waiting": "waiting_s"}
_CAT_COLS = ("python_s", "backend_s", "simulator_s", "cuda_api_s", "waiting_s", "gpu_s")
# cpu_only_s, gpu_only_s, cpu_gpu_s
_REGION_COLS = tuple(f"{column(n)}_s" for n in C.REGION_NAMES)
OPERATION_COLUMNS = ["pid", "process", "phase", "operation", "depth", "calls", "wall_s",
                     "self_s", "wall_pct", "self_pct", *_CAT_COLS, *_REGION_COLS,
                     *COUNT_COLS[1:], "compile_s", "compiles", "session"]


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


def operation_table(fine: pd.DataFrame, counts: pd.DataFrame, paths: PathTable,
                    phases: NameTable, meta: dict[tuple[int, int], ProcessResult],
                    process_names: list[str], path_names: np.ndarray) -> pd.DataFrame:
    """The operations table before its compile columns, in display order, from the
    breakdown's finest rows (``fine``) and the call counts; ``meta``: each (pid,
    session)'s result in process order, ``process_names`` theirs."""
    cols = ["pid", "session", "phase", "path_id"]
    # No fill_value= in pivot_table: pandas < 2 then downcasts floats within 1e-8 of
    # an integer, turning times under 10 ns into 0; the fillna below fills instead.
    cat = fine.assign(key=fine["category"].map(_CAT_COL)).pivot_table(
        index=cols, columns="key", values="seconds", aggfunc="sum")
    reg = fine.assign(key=fine["region"].map(lambda n: f"{column(n)}_s")).pivot_table(
        index=cols, columns="key", values="seconds", aggfunc="sum")
    wide = cat.join(reg, how="outer").fillna(0.0)
    for c in [*_CAT_COLS, *_REGION_COLS]:
        if c not in wide:
            wide[c] = 0.0
    wide["self_s"] = wide[list(_REGION_COLS)].sum(axis=1)
    if len(counts):
        cnt = counts.pivot_table(index=cols, columns="what", values="n", aggfunc="sum",
                                 fill_value=0)
    else:
        cnt = pd.DataFrame(index=wide.index)
    cnt = cnt.rename(columns={-1: "calls", C.BACKEND: "backend_calls",
                              C.SIMULATOR: "simulator_calls", C.CUDA_API: "cuda_api_calls",
                              C.WAITING: "wait_calls"})
    wide = wide.join(cnt, how="outer").fillna(0)
    for c in COUNT_COLS:
        wide[c] = wide[c].astype(np.int64) if c in wide else 0
    wide = wide.reset_index()
    wide = add_ancestors(paths, wide)
    wide["wall_s"] = inclusive(paths, wide)
    names = dict(zip(meta, process_names, strict=True))
    keys = list(zip(wide["pid"], wide["session"], strict=True))
    wide["process"] = [names[k] for k in keys]
    covered = np.array([max(meta[k].covered_ns, 1) / 1e9 for k in keys], np.float64)
    wide["wall_pct"] = 100.0 * wide["wall_s"] / covered
    wide["self_pct"] = 100.0 * wide["self_s"] / covered
    wide["operation"] = path_names[wide["path_id"].to_numpy(np.int64)]
    wide["depth"] = [max(paths.depth[i], 0) for i in wide["path_id"]]
    order = {k: i for i, k in enumerate(meta)}
    wide["_p"] = [order[k] for k in keys]
    wide["_tree"] = [tree_key(paths, meta[k].first_ns, int(i))
                     for k, i in zip(keys, wide["path_id"], strict=True)]
    wide["_ph"] = group_key(phases, wide, [meta[k] for k in keys])
    wide = wide.sort_values(["_p", "_ph", "phase", "_tree"], kind="stable")
    return wide
