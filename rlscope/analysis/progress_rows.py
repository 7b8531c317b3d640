"""The progress tables (Analysis.iterations, Analysis.extrapolation): one row per progress
record with its rate, and the estimated time of the full run from the steady part of
each process's progress (after the warm-up, without compiling)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from rlscope.analysis import compile_rows as comprows
from rlscope.trace import format as fmt
from rlscope.trace.data import Progress

ITERATION_COLUMNS = ["pid", "time_s", "timesteps", "total_timesteps", "interval_s",
                     "steps_per_s", "session", "unit"]
EXTRAPOLATION_COLUMNS = ["pid", "timesteps", "total_timesteps", "recorded_s", "steps_per_s",
                         "fraction_done", "estimated_total_s", "compile_s", "steady_from_s",
                         "session", "unit"]


def progress_unit(metadata: dict[str, Any]) -> str:
    """What a process's progress records count: the unit it named last
    (``rlscope.report_progress(..., unit="episodes")``), else timesteps."""
    unit = metadata.get(fmt.META_PROGRESS_UNIT)
    return unit if isinstance(unit, str) and unit else fmt.PROGRESS_UNIT


def iteration_table(processes: Iterable[tuple[int, int, Progress, int, str]]
                    ) -> pd.DataFrame:
    """One row per progress record of each (pid, span start, progress, session, unit)."""
    frames = []
    for pid, start_ns, pr, session, unit in processes:
        if not len(pr.time_ns):
            continue
        o = np.argsort(pr.time_ns, kind="stable")
        t, steps = pr.time_ns[o], pr.timesteps[o]
        dt = np.diff(t, prepend=start_ns) / 1e9
        dsteps = np.diff(steps, prepend=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.where(dt > 0, dsteps / dt, np.nan)
        frames.append(pd.DataFrame({"pid": pid, "time_s": (t - start_ns) / 1e9,
                                    "timesteps": steps,
                                    "total_timesteps": pr.total_timesteps[o],
                                    "interval_s": dt, "steps_per_s": rate,
                                    "session": session, "unit": unit}))
    return (pd.concat(frames, ignore_index=True) if frames
            else pd.DataFrame(columns=ITERATION_COLUMNS))


def extrapolation_table(it: pd.DataFrame, comp: pd.DataFrame, wu: pd.DataFrame,
                        spans: dict[tuple[int, int], tuple[int, int]]) -> pd.DataFrame:
    """Per process of the iteration table ``it``: its rate in the steady part and the
    estimated total; ``comp``: the compile rows, ``wu``: the warm-up rows, ``spans``:
    each (pid, session)'s recorded span."""
    rows = []
    warm_end = wu.groupby(["pid", "session"])["end_ns"].max().to_dict() if len(wu) else {}
    for (pid, session), g in it.groupby(["pid", "session"], sort=False):
        span0, span1 = spans[(pid, session)]
        done = int(g["timesteps"].iloc[-1])
        total = int(g["total_timesteps"].max())
        elapsed = (span1 - span0) / 1e9
        # The rate from the steady part: after the operations' warm-up ...
        s = g
        end = warm_end.get((pid, session))
        if end is not None:
            later = g[g["time_s"] * 1e9 + span0 >= end]
            s = later if len(later) >= 2 else g
        span = s["time_s"].iloc[-1] - s["time_s"].iloc[0]
        # ... and without compiling (not the steady state either).
        compiling = comprows.compile_in(
            comp, pid, session, span0 + int(s["time_s"].iloc[0] * 1e9),
            span0 + int(s["time_s"].iloc[-1] * 1e9)) if len(comp) else 0.0
        span -= compiling
        steps = done - int(s["timesteps"].iloc[0])
        rate = steps / span if span > 0 and steps > 0 else np.nan
        remaining = max(total - done, 0) if total > 0 else np.nan
        est = elapsed + remaining / rate if rate == rate and remaining == remaining \
            else np.nan
        rows.append({"pid": pid, "timesteps": done, "total_timesteps": total,
                     "recorded_s": elapsed, "steps_per_s": rate,
                     # at most 1: loops finish their last rollout past the target
                     "fraction_done": min(done / total, 1.0) if total > 0 else np.nan,
                     "estimated_total_s": est, "session": session,
                     "unit": g["unit"].iloc[-1], "compile_s": compiling,
                     "steady_from_s": float(s["time_s"].iloc[0])})
    return pd.DataFrame(rows, columns=EXTRAPOLATION_COLUMNS)
