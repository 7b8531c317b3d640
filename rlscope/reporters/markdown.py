"""The reporters' one Markdown table writer: a frame as a GitHub-flavoured table, its
column names as the header, floats to six significant digits."""

from __future__ import annotations

import pandas as pd


def to_markdown(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    out = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        out.append("| " + " | ".join(f"{v:.6g}" if isinstance(v, float) else str(v)
                                      for v in row) + " |")
    return "\n".join(out)
