"""Warm-up in the report (docs/analysis.md#warm-up): the operations whose first calls
were slower than their steady state, apart from it. No I/O: lines and data."""

from __future__ import annotations

from typing import Any

from rlscope.analysis.frames import Analysis
from rlscope.reporters.units import seconds


def lines(a: Analysis) -> list[str]:
    wu = a.warmup()
    if not len(wu):
        return []
    out = ["", "Warm-up (first calls slower than the steady state; the estimated full run's "
               "rate starts after it):"]
    for r in wu.itertuples():
        line = (f"  {r.operation} (pid {r.pid}{f', phase {r.phase}' if r.phase else ''}): "
                f"first {r.warmup_calls} call{'s' if r.warmup_calls != 1 else ''} "
                f"{seconds(r.warmup_s)} s, then {1e3 * r.steady_call_s:.3g} ms per call: "
                f"{seconds(r.excess_s)} s above the steady state "
                f"({100 * r.share:.0f}% of the operation)")
        if r.compile_s > 0:
            line += f", {seconds(r.compile_s)} s of it compiling"
        out.append(line)
    return out


def json_section(a: Analysis) -> dict[str, Any]:
    wu = a.warmup()
    if not len(wu):
        return {}
    return {"warmup": [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}
                       for r in wu.to_dict("records")]}
