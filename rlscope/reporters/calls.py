"""Top backend and simulator calls per operation (rlscope.analysis.calls), as one report
section (key ``top_calls``)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from rlscope.analysis import calls
from rlscope.analysis.frames import Analysis
from rlscope.reporters.section import Section
from rlscope.reporters.units import seconds

KEY = "top_calls"
CATEGORIES = ("Backend", "Simulator")


def to_dict(tops: dict[str, pd.DataFrame]) -> dict[str, Any]:
    """category -> operation -> its top calls (name, calls, seconds, per_call_us, share)."""
    out: dict[str, Any] = {}
    for cat, df in tops.items():
        out[cat] = {str(op): g.drop(columns="operation").to_dict("records")
                    for op, g in df.groupby("operation", sort=False)}
    out["rule"] = {"top": calls.TOP, "min_share": calls.MIN_SHARE}
    return out


def render_text(tops: dict[str, pd.DataFrame]) -> str:
    lines = []
    for cat, df in tops.items():
        if not len(df):
            continue
        lines.append(f"Top {cat.lower()} calls per operation (outermost calls; {cat} time "
                     f"inside them)")
        head = ["Operation", "Call", "Calls", "Total s", "Per call ms", f"% of {cat}"]
        body = [[str(r.operation), str(r.name), f"{int(r.calls):,}", seconds(r.seconds),
                 f"{r.per_call_us / 1e3:.3f}", f"{100 * r.share:.1f}"]
                for r in df.itertuples(index=False)]
        ops = df["operation"].tolist()
        for i in range(1, len(body)):  # an operation's name once, on its first row
            if ops[i] == ops[i - 1]:
                body[i][0] = ""
        widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
        for cells in [head, ["-" * w for w in widths], *body]:
            lines.append("  " + "  ".join(
                c.ljust(w) if i < 2 else c.rjust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip())
        lines.append("")
    return "\n".join(lines).rstrip()


def tops(a: Analysis) -> dict[str, pd.DataFrame]:
    """The tables the section shows, from an Analysis."""
    return {cat: calls.top_calls(a, cat) for cat in CATEGORIES}


def section(tables: dict[str, pd.DataFrame]) -> Section:
    return Section(KEY, lambda: to_dict(tables), lambda: render_text(tables))
