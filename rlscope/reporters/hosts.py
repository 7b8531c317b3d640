"""The hosts of a run over several hosts and how their clocks were aligned
(docs/multiprocess.md#several-hosts): report lines and the JSON section."""

from __future__ import annotations

import json
from typing import Any

from rlscope.analysis import Analysis


def host_lines(a: Analysis) -> list[str]:
    """Nothing for a one-host run; else one line per host with its shift and the bound
    of the shift's error."""
    hosts = a.hosts()
    if len(hosts) < 2:
        return []
    ref = hosts[hosts["reference"]]["host"].iloc[0]
    out = ["", f"Hosts: {len(hosts)}; times on {ref}'s clock, the others moved onto it by "
           "their (monotonic, realtime) clock pairs:"]
    width = max(len(h) for h in hosts["host"])
    for r in hosts.itertuples():
        n = f"{r.processes} trace file{'s' if r.processes != 1 else ''}"
        what = ("reference" if r.reference else
                f"shifted {_span(r.shift_s, sign=True)}, error bound ±{_span(r.error_bound_s)}")
        out.append(f"  {r.host.ljust(width)}  {n}  {what}")
    out.append("  The bound covers the clock readings and the realtime clocks' drift during "
               "the run, not how far the hosts' realtime clocks disagree (NTP: typically "
               "under 1 ms on a LAN).")
    return out


def json_section(a: Analysis) -> dict[str, Any]:
    return {"hosts": json.loads(a.hosts().to_json(orient="records"))}


def _span(s: float, sign: bool = False) -> str:
    v = abs(s)
    txt = (f"{v:.3f} s" if v >= 1 else f"{v * 1e3:.3f} ms" if v >= 1e-3
           else f"{v * 1e6:.1f} µs")
    return (("-" if s < 0 else "+") + txt) if sign else txt
