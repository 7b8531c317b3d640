"""Python hotspots per operation (rlscope.analysis.hotspots) as one report section (key
``python_hotspots``): per operation, its samples, the share taken in Python, and the top
functions by self and by total samples (file:line, share of its Python samples)."""

from __future__ import annotations

import os
from typing import Any

from rlscope.analysis.hotspots import FunctionRow, OperationHotspots, Samples, per_operation
from rlscope.reporters.section import Section

KEY = "python_hotspots"
TEXT_TOP = 5  # functions per ranking in the text report (JSON: hotspots.TOP)


def _row(r: FunctionRow) -> dict[str, Any]:
    return {"function": r.name, "file": r.file, "line": r.line, "samples": r.samples,
            "share": r.share}


def to_dict(s: Samples, ops: list[OperationHotspots]) -> dict[str, Any]:
    """``operations``: one entry per sampled operation, most sampled first; ``rate_hz``:
    the requested rate per pid; ``unjoined``: samples no trace covers."""
    return {
        "operations": [{"operation": o.operation, "samples": o.samples,
                        "python_samples": o.python_samples, "by_category": o.by_category,
                        "by_process": o.by_process, "by_phase": o.by_phase,
                        "top_self": [_row(r) for r in o.by_self],
                        "top_total": [_row(r) for r in o.by_total]} for o in ops],
        "samples": len(s), "rate_hz": {str(p): hz for p, hz in s.hz.items()},
        "unjoined": s.unjoined}


def _where(r: FunctionRow) -> str:
    return f"{_short(r.file)}:{r.line}"


def _short(path: str) -> str:
    """The last two parts of a path: enough to find it, short enough for a table."""
    parts = path.replace(os.sep, "/").split("/")
    return "/".join(parts[-2:])


def render_text(ops: list[OperationHotspots], top: int = TEXT_TOP) -> str:
    if not ops:
        return ""
    lines = ["Python hotspots per operation (sampled stacks; %: share of the operation's "
             "samples taken in Python)"]
    for o in ops:
        lines.append(f"  {o.operation}: {o.samples:,} samples, {o.python_samples:,} in "
                     "Python")
        if not o.python_samples:
            continue
        for title, rows in (("self", o.by_self), ("total", o.by_total)):
            lines.append(f"    by {title}:")
            for r in rows[:top]:
                lines.append(f"      {100 * r.share:5.1f}%  {r.name}  ({_where(r)})")
    return "\n".join(lines)


def section(s: Samples, top: int | None = None) -> Section:
    ops = per_operation(s) if top is None else per_operation(s, top)
    return Section(KEY, lambda: to_dict(s, ops), lambda: render_text(ops))
