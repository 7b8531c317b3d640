"""Render the operation summary as a terminal table, CSV, JSON or Markdown."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from rlscope.analysis.summary import UNANNOTATED

FORMATS = ("text", "csv", "json", "markdown")

_HEAD = ("Phase", "Operation", "Calls", "Wall s", "Wall %", "Self s", "Self %")


def _process_title(proc: dict[str, Any]) -> str:
    state = "complete" if proc["complete"] else "incomplete: the process did not stop cleanly"
    return (f"Process {proc['pid']} {proc['process']}: {proc['seconds']:.3f} s recorded, "
            f"{proc['recorder']} recorder, {state}")


def _row(cells: tuple[str, ...], widths: list[int]) -> str:
    return "  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                     for i, (c, w) in enumerate(zip(cells, widths, strict=True)))


def render_text(df: pd.DataFrame, processes: list[dict[str, Any]], run: dict[str, Any]) -> str:
    lines = []
    if run:
        cmd = " ".join(run.get("command", []))
        lines.append(f"Run: {cmd}  [{run.get('status', '?')}"
                     + (f", exit status {run['exit_status']}" if "exit_status" in run else "")
                     + "]")
    for proc in processes:
        lines.append("")
        lines.append(_process_title(proc))
        rows = df[df["pid"] == proc["pid"]]
        body = []
        for r in rows.itertuples():
            op = "  " * int(r.depth) + r.operation.split(" > ")[-1]
            calls = "-" if r.operation == UNANNOTATED else f"{r.calls:,}"
            body.append((r.phase or "-", op, calls, f"{r.wall_s:.3f}", f"{r.wall_pct:.1f}",
                         f"{r.self_s:.3f}", f"{r.self_pct:.1f}"))
        widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
                  for i, h in enumerate(_HEAD)]

        lines.append("  " + _row(_HEAD, widths))
        lines.append("  " + "  ".join("-" * w for w in widths))
        lines.extend("  " + _row(b, widths) for b in body)
    lines.append("")
    lines.append("Wall: time inside the operation, children included. Self: excluding nested "
                 "operations. %: of the process's recorded time.")
    return "\n".join(lines)


def render(df: pd.DataFrame, fmt: str, processes: list[dict[str, Any]],
           run: dict[str, Any]) -> str:
    if fmt == "text":
        return render_text(df, processes, run)
    if fmt == "csv":
        return df.to_csv(index=False).rstrip("\n")
    if fmt == "markdown":
        cols = list(df.columns)
        out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for row in df.itertuples(index=False):
            out.append("| " + " | ".join(f"{v:.6g}" if isinstance(v, float) else str(v)
                                          for v in row) + " |")
        return "\n".join(out)
    if fmt == "json":
        return json.dumps({"run": run, "processes": processes,
                           "operations": json.loads(df.to_json(orient="records"))}, indent=2)
    raise ValueError(f"unknown format {fmt!r}")
