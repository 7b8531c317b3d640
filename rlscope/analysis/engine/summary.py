"""Per process / phase / operation summary: wall time, exclusive time, calls, share."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from rlscope.analysis.engine.scopes import Intervals, operation_intervals, phase_intervals
from rlscope.trace import format as fmt
from rlscope.trace.data import ProcessTrace, Trace

UNANNOTATED = "(unannotated)"
NO_PHASE = ""
PATH_SEP = " > "

COLUMNS = ["pid", "process", "phase", "operation", "depth", "calls", "wall_s", "self_s",
           "wall_pct", "self_pct"]


@dataclass
class ProcessSpan:
    start_ns: int
    end_ns: int
    main_thread: int

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


def process_span(p: ProcessTrace) -> ProcessSpan:
    """From PROCESS_START to PROCESS_END (or the last event after a crash)."""
    ev = p.events
    if len(ev) == 0:
        return ProcessSpan(0, 0, 0)
    starts = np.flatnonzero(ev.kind == fmt.PROCESS_START)
    ends = np.flatnonzero(ev.kind == fmt.PROCESS_END)
    start = int(ev.time_ns[starts[0]]) if len(starts) else int(ev.time_ns.min())
    end = int(ev.time_ns[ends[-1]]) if len(ends) else int(ev.time_ns.max())
    main = int(ev.thread[starts[0]]) if len(starts) else int(ev.thread[0])
    return ProcessSpan(start, max(end, start), main)


def _phase_of(ops: Intervals, phases: Intervals) -> np.ndarray:
    """Index of the innermost phase open (on any thread) when each operation started."""
    out = np.full(len(ops), -1, np.int64)
    if len(phases) == 0 or len(ops) == 0:
        return out
    # Later-starting phases are more inner; assign in start order so inner ones win.
    for i in np.argsort(phases.start_ns, kind="stable"):
        inside = (ops.start_ns >= phases.start_ns[i]) & (ops.start_ns < phases.end_ns[i])
        out[inside] = i
    return out


def summarize_process(p: ProcessTrace) -> pd.DataFrame:
    span = process_span(p)
    total_ns = max(span.end_ns - span.start_ns, 1)
    ops = operation_intervals(p.events, span.end_ns)
    phases = phase_intervals(p.events, span.end_ns)
    rows = []
    if len(ops):
        phase_idx = _phase_of(ops, phases)
        phase_name = np.array([p.name_of(int(phases.name[i])) if i >= 0 else NO_PHASE
                               for i in phase_idx], dtype=object)
        path = [PATH_SEP.join(p.name_of(s) for s in ids) for ids in ops.path_ids()]
        df = pd.DataFrame({"phase": phase_name, "operation": path, "depth": ops.depth,
                           "wall_ns": ops.duration_ns, "self_ns": ops.self_ns()})
        g = df.groupby(["phase", "operation"], sort=False).agg(
            depth=("depth", "first"), calls=("wall_ns", "size"), wall_ns=("wall_ns", "sum"),
            self_ns=("self_ns", "sum")).reset_index()
        rows.append(g)
    # Time on the main thread outside any operation.
    top = (ops.depth == 0) & (ops.thread == span.main_thread) if len(ops) else np.zeros(0, bool)
    covered = int(ops.duration_ns[top].sum()) if len(ops) else 0
    rows.append(pd.DataFrame({"phase": [NO_PHASE], "operation": [UNANNOTATED], "depth": [0],
                              "calls": [0], "wall_ns": [total_ns - covered],
                              "self_ns": [total_ns - covered]}))
    out = pd.concat(rows, ignore_index=True)
    out.insert(0, "process", p.header.process_name)
    out.insert(0, "pid", p.pid)
    out["wall_s"] = out.pop("wall_ns") / 1e9
    out["self_s"] = out.pop("self_ns") / 1e9
    out["wall_pct"] = 100.0 * out["wall_s"] / (total_ns / 1e9)
    out["self_pct"] = 100.0 * out["self_s"] / (total_ns / 1e9)
    return out[COLUMNS]


def summarize(trace: Trace) -> pd.DataFrame:
    """One row per (process, phase, operation path), plus unannotated time per process."""
    frames = [summarize_process(p) for p in trace.processes if p.header.source == "python"]
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    return pd.concat(frames, ignore_index=True)
