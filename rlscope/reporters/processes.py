"""Render the run's processes: the process tree, the run summary per role, and the line
that folds idle helpers (docs/multiprocess.md). Consumes only the data API."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from rlscope.analysis import Analysis
from rlscope.analysis.processes.runsummary import ALL
from rlscope.reporters.units import seconds
from rlscope.trace import format as fmt

# Tables a one-table format (CSV, Markdown) can select; "operations" is table.py's.
TABLES = ("operations", "processes", "summary", "role-operations")
_TOP_OPERATIONS = 3  # per role in the text summary
_PIDS = 8  # pids listed per role on the idle helpers' line

# Ray's workers are children of its raylet, a C++ program: never traced.
RAYLET_CHILDREN = (fmt.ROLE_RAY_ACTOR, fmt.ROLE_RAY_TASK, fmt.ROLE_RAY_WORKER)


def table_frame(a: Analysis, name: str) -> pd.DataFrame:
    if name == "processes":
        return a.process_tree()
    if name == "summary":
        return a.run_summary()
    if name == "role-operations":
        return a.role_operations()
    if name == "operations":
        return a.operations()
    raise ValueError(f"unknown table {name!r}; choose from {', '.join(TABLES)}")


def json_sections(a: Analysis) -> dict[str, Any]:
    """The top-level JSON keys this module adds to the report."""
    tree = a.process_tree()
    return {
        "process_tree": _records(tree),
        "run_summary": {"wall_s": a.run_wall_s(), "processes": len(tree),
                        "idle_helpers": int(tree["idle_helper"].sum()),
                        "roles": _records(a.run_summary()),
                        "operations": _records(a.role_operations())},
    }


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return json.loads(df.to_json(orient="records"))


# -- text --------------------------------------------------------------------------------
def overview_lines(a: Analysis) -> list[str]:
    """The process tree and the run summary; nothing for a single-process run (its
    table says it all)."""
    tree = a.process_tree()
    if len(tree) < 2:
        return []
    launcher = a.run.get("launcher", {}).get("pid") if isinstance(a.run.get("launcher"),
                                                                   dict) else None
    return ["", *tree_lines(tree, a.run_wall_s(), launcher), "", *summary_lines(a)]


def _tree_prefixes(tree: pd.DataFrame) -> list[str]:
    """Box-drawing prefixes for rows in depth-first order."""
    depth = tree["depth"].tolist()
    n = len(depth)
    # Whether another sibling follows row i at its depth (before a shallower row).
    more = [False] * n
    for i in range(n):
        for j in range(i + 1, n):
            if depth[j] < depth[i]:
                break
            if depth[j] == depth[i]:
                more[i] = True
                break
    out: list[str] = []
    open_levels: list[bool] = []  # [d]: a sibling at depth d is still to come
    for i in range(n):
        d = depth[i]
        open_levels = open_levels[:d]
        if d == 0:
            out.append("")
        else:
            bars = "".join("│  " if o else "   " for o in open_levels[1:])
            out.append(bars + ("├─ " if more[i] else "└─ "))
        open_levels.append(more[i])
    return out


def tree_lines(tree: pd.DataFrame, run_wall: float, launcher: int | None = None) -> list[str]:
    idle = int(tree["idle_helper"].sum())
    later = int((tree["continues"] >= 0).sum())
    head = f"Processes: {len(tree) - later}" + (f" ({idle} idle helpers)" if idle else "") \
        + (f" in {len(tree)} recording sessions" if later else "") \
        + f", run wall time {run_wall:.2f} s"
    waiting = bool((tree["waiting_s"] > 0).any())
    cols = ["Process", "Role", "Start s", "Wall s", "Busy s",
            *(["Waiting s"] if waiting else []), "Operations s", "Notes"]
    body = []
    for pre, r in zip(_tree_prefixes(tree), tree.itertuples(), strict=True):
        notes = []
        if r.idle_helper:
            notes.append("idle helper")
        if not r.complete:
            notes.append("incomplete")
        if not r.parent_in_run:
            notes.append(f"parent {r.ppid} " + (
                "is rls-prof" if r.ppid == launcher
                else "not traced (Ray's raylet)" if r.role in RAYLET_CHILDREN
                else "not traced"))
        body.append([f"{pre}{r.pid} {r.name}", r.role_label, f"{r.start_s:.2f}",
                     f"{r.wall_s:.2f}", f"{r.busy_s:.2f}",
                     *([f"{r.waiting_s:.2f}"] if waiting else []),
                     seconds(r.operations_s), ", ".join(notes)])
    return [head, *_grid(cols, body, left=(0, 1, len(cols) - 1))]


def summary_lines(a: Analysis) -> list[str]:
    s = a.run_summary()
    ops = a.role_operations()
    waiting = bool((s["waiting_s"] > 0).any())
    cols = ["Role", "Processes", "Wall s", "Busy s", "Busy %",
            *(["Waiting s"] if waiting else []), "Operations s", "Top operations (s, calls)"]
    body = []
    for r in s.itertuples():
        n = f"{r.processes}" + (f" ({r.idle_helpers} idle)" if r.idle_helpers else "")
        top = ops[ops["role"] == r.role].head(_TOP_OPERATIONS) if r.role != ALL else ops[:0]
        body.append([r.role, n, f"{r.wall_s:.2f}", f"{r.busy_s:.2f}",
                     "-" if pd.isna(r.busy_pct) else f"{r.busy_pct:.1f}",
                     *([f"{r.waiting_s:.2f}"] if waiting else []), seconds(r.operations_s),
                     ", ".join(f"{o.operation} {seconds(o.wall_s)} ({o.calls:,})"
                               for o in top.itertuples())])
    return ["Run summary by role", *_grid(cols, body, left=(0, 1, len(cols) - 1)),
            "  Wall: the processes' recorded lifetimes, summed. Busy"
            + ("/Waiting" if waiting else "") + ": CPU seconds summed over threads"
            + ("" if waiting else " (blocked time counts as busy until it is traced as "
               "Waiting)") + "; Busy %: of Wall. Operations: time inside operations."]


def folded_lines(a: Analysis) -> list[str]:
    """One line for every idle helper, in place of their per-process tables."""
    tree = a.process_tree()
    idle = tree[tree["index"].isin(folded_indices(a))]
    if not len(idle):
        return []
    groups: dict[str, list[int]] = {}
    for r in idle.itertuples():
        groups.setdefault(str(r.role), []).append(int(r.pid))
    who = "; ".join(f"{role} {pids[0]}" if len(pids) == 1 else
                    f"{len(pids)} × {role}: " + " ".join(map(str, pids[:_PIDS]))
                    + (" …" if len(pids) > _PIDS else "")
                    for role, pids in groups.items())
    return ["", f"Idle helpers ({len(idle)}, tables folded: no operation, backend/simulator/"
            f"CUDA call or GPU work; {idle['wall_s'].sum():.2f} s wall in all): {who}"]


def folded_indices(a: Analysis) -> set[int]:
    """Rows of ``Analysis.processes()`` whose per-process table is folded."""
    tree = a.process_tree()
    return set(tree.loc[tree["idle_helper"], "index"].tolist()) if len(tree) > 1 else set()


def process_label(a: Analysis, role: bool = True) -> dict[int, str]:
    """Per ``processes()`` row: its display name (``-m pkg.mod``, not ``-m``) and, with
    ``role``, its role, for per-process titles."""
    tree = a.process_tree()
    return {int(r.index): f"{r.name} ({r.role_label})" if role else str(r.name)
            for r in tree.itertuples()}


def _grid(cols: list[str], body: list[list[str]], left: tuple[int, ...]) -> list[str]:
    last = len(cols) - 1
    widths = [max(len(c), *(len(b[i]) for b in body)) if body else len(c)
              for i, c in enumerate(cols)]

    def row(cells: list[str]) -> str:
        out = "  ".join((c.ljust(w) if i in left or i - len(cols) in left else c.rjust(w))
                        for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
        return "  " + out.rstrip() if last in left else "  " + out

    return [row(cols), "  " + "  ".join("-" * w for w in widths), *(row(b) for b in body)]
