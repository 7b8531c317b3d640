"""The units of the text reports, one per kind of figure (docs/analysis.md): totals (time
summed over a run, a process, an operation's calls) in seconds; per-step and per-call
figures in milliseconds. In a table the unit is in the column header and the cells are
bare numbers; in a sentence it follows the number."""

from __future__ import annotations

import math


def seconds(v: float | None, signed: bool = False) -> str:
    """A total in seconds, to the millisecond; a non-zero time below that is not shown as
    zero (``<0.001``); "-" for none."""
    if v is None or math.isnan(v):
        return "-"
    if 0 < abs(v) < 0.0005:
        return ("-" if v < 0 else "+" if signed else "") + "<0.001"
    return format(v, "+.3f" if signed else ".3f")


def s(v: float | None, signed: bool = False) -> str:
    """A total in a sentence: ``1.234 s``."""
    out = seconds(v, signed)
    return out if out == "-" else out + " s"


def millis(v: float | None) -> str:
    """A per-step or per-call figure, given in seconds, in milliseconds."""
    return "-" if v is None or math.isnan(v) else f"{v * 1e3:.2f}"


def ms(v: float | None) -> str:
    """A per-step or per-call figure in a sentence: ``3.74 ms``."""
    out = millis(v)
    return out if out == "-" else out + " ms"
