"""A bounded trace's aggregate rows (docs/trace-format.md) as the sweep's rows and counts:
each aggregated state's time and calls, charged as the sweep charges the same state."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rlscope.analysis.engine import categories as C
from rlscope.analysis.engine.paths import NameTable, PathTable
from rlscope.analysis.engine.trendsums import TrendSums
from rlscope.trace import format as fmt
from rlscope.trace.data import Aggregates

# An aggregate state's innermost call kind -> its CPU category.
_CALL_CATEGORY = {fmt.BACKEND_CALL_BEGIN: C.BACKEND, fmt.SIMULATOR_CALL_BEGIN: C.SIMULATOR,
                  fmt.WAIT_CALL_BEGIN: C.WAITING}


@dataclass
class AggregatedRows:
    # (thread, phase, path, category, region) columns and ns, as the sweep's rows
    rows: list[np.ndarray] | None = None
    counts: np.ndarray | None = None  # (thread, phase, path, what, n), as the sweep's
    events: dict[int, int] = field(default_factory=dict)  # events aggregated per thread


def aggregated_rows(agg: Aggregates, strings: list[str], paths: PathTable,
                    phases: NameTable, main: int, phase_threads: set[int],
                    inherited_phase: int, trend: TrendSums | None) -> AggregatedRows:
    """The rows and counts of ``agg``; a thread with no phases of its own (not main, not
    in ``phase_threads``) takes ``inherited_phase`` (the main thread's last), as in the
    sweep. With ``trend``, the rows also go to the trends."""
    out = AggregatedRows()
    if not len(agg.thread):
        return out
    resolved: dict[int, tuple[int, int, int, int]] = {0: (0, 0, C.PYTHON, 0)}

    def state(s: int) -> tuple[int, int, int, int]:
        """(phase id, path id, category, innermost kind) of a state."""
        got = resolved.get(s)
        if got is not None:
            return got
        parent, kind, name = agg.states.get(s, (0, 0, 0))
        phase, path, cat, _ = state(parent) if parent != s else resolved[0]
        label = strings[name] if 0 <= name < len(strings) else f"<string {name}>"
        if kind == fmt.OPERATION_BEGIN:
            path = paths.intern(path, label)
        elif kind == fmt.PHASE_BEGIN:
            phase = phases.intern(label)
        elif kind in _CALL_CATEGORY:
            cat = _CALL_CATEGORY[kind]
        resolved[s] = (phase, path, cat, kind)
        return resolved[s]

    rows, counts = [], []
    # When each row was written (0: unknown, a file from before the field).
    until = (agg.until_ns.tolist() if len(agg.until_ns) == len(agg.thread)
             else [0] * len(agg.thread))
    for t, g, s, ns, calls, n, u in zip(agg.thread.tolist(), agg.gap.tolist(),
                                        agg.state.tolist(), agg.ns.tolist(),
                                        agg.calls.tolist(), agg.events.tolist(), until,
                                        strict=True):
        phase, path, cat, kind = state(s)
        is_main = t == main
        if not phase and not is_main and t not in phase_threads:
            phase = inherited_phase
        if ns and (is_main or path > 0 or cat in (C.BACKEND, C.SIMULATOR)):
            rows.append((t, phase, path, cat, C.CPU_ONLY, ns))
            if trend is not None:
                trend.gap_row(t, g, phase, path, cat, ns, 0, u)
        if calls and kind == fmt.OPERATION_BEGIN:
            counts.append((t, phase, path, -1, calls))
            if trend is not None:
                trend.gap_row(t, g, phase, path, -1, 0, calls, u)
        elif calls and kind in _CALL_CATEGORY:
            counts.append((t, phase, path, cat, calls))
        out.events[t] = out.events.get(t, 0) + n
    if rows:
        r = np.array(rows, np.float64)
        out.rows = [r[:, i].astype(np.int64) for i in range(5)] + [r[:, 5]]
    if counts:
        out.counts = np.array(counts, np.int64)
    return out
