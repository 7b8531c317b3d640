"""The report's line on a bounded trace (rls-prof --trace-budget): which parts of a
process have every event (detail windows) and which only aggregates."""

from __future__ import annotations

from typing import Any

BUDGET_KEY = "rlscope.trace_budget"  # metadata the native writer records (bytes)
WINDOW_PREFIX = "rlscope.window:"  # one per detail window: reason, begin_ns, end_ns


def _size(n: float) -> str:
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= div:
            return f"{n / div:.3g} {unit}"
    return f"{n:.0f} B"


def windows_line(metadata: dict[str, Any], seconds: float) -> str | None:
    """One line for a process recorded under a budget, None for a full trace."""
    budget = metadata.get(BUDGET_KEY)
    if not isinstance(budget, int | float):
        return None
    wins = [v for k, v in metadata.items() if k.startswith(WINDOW_PREFIX) and isinstance(v, dict)]
    detail = sum(max(0, int(w.get("end_ns", 0)) - int(w.get("begin_ns", 0))) for w in wins) / 1e9
    by_reason: dict[str, int] = {}
    for w in wins:
        by_reason[str(w.get("reason", "?"))] = by_reason.get(str(w.get("reason", "?")), 0) + 1
    kinds = ", ".join(f"{n} {r}" for r, n in by_reason.items()) or "none"
    aggregated = max(0.0, seconds - detail)
    return (f"  Bounded trace (budget {_size(budget)} for the run directory): every event in "
            f"detail windows ({kinds}; {detail:.1f} s), aggregates for the other "
            f"{aggregated:.1f} s: calls and times are whole, the timeline, lock-step, "
            "inferred operations and GPU attribution cover the windows only")
