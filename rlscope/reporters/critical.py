"""The main process's critical path (rlscope.analysis.diagnosis.critical) as one report
section (key ``critical_path``)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from rlscope.reporters.section import Section
from rlscope.reporters.units import seconds

KEY = "critical_path"


def to_dict(rows: pd.DataFrame) -> list[dict[str, Any]]:
    return rows.to_dict("records")


def render_text(rows: pd.DataFrame) -> str:
    if not len(rows):
        return ""
    head = ["Part", "Waiting on / done by", "Total s", "%", "Detail"]
    body = [[str(r.part), str(r.on), seconds(r.seconds), f"{100 * r.share:.1f}",
             str(r.detail)] for r in rows.itertuples(index=False)]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head[:4])]
    lines = ["Critical path of the main process: its wall time, part by part, and what it "
             "waited on (the rows add up to its wall time)"]
    for cells in [head, ["-" * w for w in widths] + ["------"], *body]:
        lines.append("  " + "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells[:4], widths, strict=True)))
            + "  " + cells[4])
    return "\n".join(ln.rstrip() for ln in lines)


def section(rows: pd.DataFrame) -> Section:
    return Section(KEY, lambda: to_dict(rows), lambda: render_text(rows))
