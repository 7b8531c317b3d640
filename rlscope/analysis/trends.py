"""Trends over the whole run: each operation's time per trend interval (the sweep's
buckets, rlscope.analysis.engine.trendbins), steps/s, the user's metrics, and the named
drifts (docs/analysis.md#trends).

Drift rule: per process and operation (depth 0 and 1), the value per interval is its
time per step (where the interval's steps are known) or its share of the interval's
time. The intervals whose middle lies in the first :data:`WINDOW` of the process's
trend range are the "early" window, those in the last WINDOW the "late" one. A drift is
named when each window has at least :data:`MIN_INTERVALS` intervals, the late median is
at least :data:`RATIO` times the early one (or at most 1/RATIO), the two windows do not
overlap in their middle halves (the late window's 25th percentile above the early
window's 75th, or the reverse: noise moves medians, rarely whole quartiles), and the
operation holds at least :data:`MIN_SHARE` of the process's time in the window where it
is larger. Steps/s drifts by the same rule on the seconds per step.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rlscope.analysis.engine import categories as C
from rlscope.analysis.engine.paths import STARTUP_ID, STARTUP_IMPORTS_ID, PathTable
from rlscope.analysis.engine.process import ProcessResult
from rlscope.trace import format as fmt

WINDOW = 0.2  # early: the first fifth of the run; late: the last fifth
MIN_INTERVALS = 3  # intervals in each window, else no drift is named
RATIO = 1.3  # late median / early median (or its inverse) to name a drift
MIN_SHARE = 0.05  # of the process's time, in the window where the operation is larger
MAX_DEPTH = 1  # operations followed for drifts: top level and their children

INTERVAL_COLUMNS = ["pid", "process", "session", "interval", "start_s", "end_s", "seconds",
                    "timesteps", "steps", "steps_per_s", "position", "by", "unit"]
OPERATION_COLUMNS = ["pid", "process", "session", "interval", "operation", "depth", "calls",
                     "wall_s", "self_s", "share_pct", "ms_per_step", "python_s", "backend_s",
                     "simulator_s", "cuda_api_s", "waiting_s", "gpu_s"]
METRIC_COLUMNS = ["pid", "session", "time_s", "timesteps", "name", "value"]
_CAT = {C.PYTHON: "python_s", C.BACKEND: "backend_s", C.SIMULATOR: "simulator_s",
        C.CUDA_API: "cuda_api_s", C.WAITING: "waiting_s"}


@dataclass(frozen=True)
class ProcessKey:
    pid: int
    session: int
    process: str
    unit: str
    host: str = ""


@dataclass(frozen=True)
class Drift:
    pid: int
    process: str
    operation: str  # "steps/s" for the rate
    measure: str  # "per step", "share" or "rate"
    early: float  # median in the early window (s per step, share 0-1, or steps/s)
    late: float
    ratio: float  # late / early
    at: tuple[float, float]  # the windows' middles, fractions of the run
    unit: str

    @property
    def text(self) -> str:
        a, b = (f"{100 * x:.0f}%" for x in self.at)
        if self.measure == "rate":
            verb = "fell" if self.ratio < 1 else "rose"
            k = 1 / self.ratio if self.ratio < 1 else self.ratio
            return (f"{self.unit}/s {verb} {k:.1f}x between {a} and {b} of the run "
                    f"({self.early:,.0f} -> {self.late:,.0f}; {self.process})")
        verb = "grew" if self.ratio >= 1 else "shrank"
        k = self.ratio if self.ratio >= 1 else 1 / self.ratio
        if self.measure == "per step":
            what = f"{self.operation} per {singular(self.unit)}"
            vals = f"{1e3 * self.early:.3g} -> {1e3 * self.late:.3g} ms"
        else:
            what = f"{self.operation}'s share of the time"
            vals = f"{100 * self.early:.0f}% -> {100 * self.late:.0f}%"
        return f"{what} {verb} {k:.1f}x between {a} and {b} of the run ({vals}; {self.process})"


def singular(unit: str) -> str:
    return unit[:-1] if unit.endswith("s") else unit


# -- tables ----------------------------------------------------------------------------
def interval_table(results: Sequence[ProcessResult], keys: Sequence[ProcessKey],
                   t0: int) -> pd.DataFrame:
    """One row per (process, trend interval): its time (seconds from ``t0``), timesteps at
    its end and steps in it, steps/s, its middle as a fraction of the process's trend
    range (``position``) and whether it is cut at progress reports (``by``: "progress")
    or in equal slices of time ("time"; steps then from the run's progress at those
    times, on one host, NaN without)."""
    ref = _reference_progress(results, keys)
    rows: list[pd.DataFrame] = []
    for r, k in zip(results, keys, strict=True):
        e = np.asarray(r.trend_edges, np.int64)
        if len(e) < 2:
            continue
        if len(r.trend_steps) == len(e):
            steps_at, by, unit = r.trend_steps.astype(np.float64), "progress", k.unit
        elif ref is not None and ref[2] == k.host:
            steps_at = np.interp(e, ref[0], ref[1], left=np.nan, right=np.nan)
            by, unit = "time", ref[3]
        else:
            steps_at, by, unit = np.full(len(e), np.nan), "time", k.unit
        sec = np.diff(e) / 1e9
        steps = np.diff(steps_at)
        steps = np.where(steps >= 0, steps, np.nan)  # a restarted count: unknown
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.where(sec > 0, steps / sec, np.nan)
        mid = (e[:-1] + e[1:]) / 2
        rows.append(pd.DataFrame({
            "pid": r.pid, "process": k.process, "session": k.session,
            "interval": np.arange(len(e) - 1), "start_s": (e[:-1] - t0) / 1e9,
            "end_s": (e[1:] - t0) / 1e9, "seconds": sec, "timesteps": steps_at[1:],
            "steps": steps, "steps_per_s": rate,
            "position": (mid - e[0]) / max(int(e[-1] - e[0]), 1), "by": by, "unit": unit}))
    return (pd.concat(rows, ignore_index=True) if rows
            else pd.DataFrame(columns=INTERVAL_COLUMNS))


def _reference_progress(results: Sequence[ProcessResult], keys: Sequence[ProcessKey]
                        ) -> tuple[np.ndarray, np.ndarray, str, str] | None:
    """The run's progress curve: the process cut at the most progress reports."""
    best = max(((len(r.trend_steps), i) for i, r in enumerate(results)
                if len(r.trend_steps) == len(r.trend_edges) and len(r.trend_steps) > 1),
               default=None)
    if best is None:
        return None
    r, k = results[best[1]], keys[best[1]]
    return r.trend_edges.astype(np.float64), r.trend_steps.astype(np.float64), k.host, k.unit


def operation_table(results: Sequence[ProcessResult], keys: Sequence[ProcessKey],
                    paths: PathTable, intervals: pd.DataFrame) -> pd.DataFrame:
    """One row per (process, trend interval, operation) with time in it (phases summed):
    calls begun in it, wall (inclusive) and self seconds, the share of the interval's
    time (wall), milliseconds per step (NaN where its steps are unknown) and the self
    time by category."""
    frames = []
    per = intervals.set_index(["pid", "session", "interval"])
    for r, k in zip(results, keys, strict=True):
        if not len(r.trend_ns):
            continue
        tr = r.trend_rows
        f = pd.DataFrame({"interval": tr[:, 0], "path_id": tr[:, 2], "category": tr[:, 3],
                          "ns": r.trend_ns})
        f = f[~f["path_id"].isin((STARTUP_ID, STARTUP_IMPORTS_ID))]
        f["col"] = f["category"].map(lambda c: _CAT.get(int(c), "gpu_s"))
        wide = f.pivot_table(index=["interval", "path_id"], columns="col", values="ns",
                             aggfunc="sum").fillna(0.0) / 1e9
        for c in ("python_s", "backend_s", "simulator_s", "cuda_api_s", "waiting_s", "gpu_s"):
            if c not in wide:
                wide[c] = 0.0
        wide["self_s"] = wide[["python_s", "backend_s", "simulator_s", "cuda_api_s",
                               "waiting_s", "gpu_s"]].sum(axis=1)
        wide = wide.reset_index()
        calls = pd.DataFrame({"interval": r.trend_call_rows[:, 0],
                              "path_id": r.trend_call_rows[:, 2], "calls": r.trend_call_n})
        calls = calls.groupby(["interval", "path_id"], as_index=False)["calls"].sum()
        wide = wide.merge(calls, on=["interval", "path_id"], how="outer").fillna(0.0)
        wide = _with_ancestors(wide, paths)
        wide["calls"] = wide["calls"].astype(np.int64)
        wide["pid"], wide["process"], wide["session"] = r.pid, k.process, k.session
        wide["operation"] = [paths.path(int(i)) for i in wide["path_id"]]
        wide["depth"] = [max(paths.depth[int(i)], 0) for i in wide["path_id"]]
        iv = per.reindex(pd.MultiIndex.from_arrays(
            [wide["pid"], wide["session"], wide["interval"]]))
        sec, steps = iv["seconds"].to_numpy(float), iv["steps"].to_numpy(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            wide["share_pct"] = np.where(sec > 0, 100 * wide["wall_s"].to_numpy() / sec, np.nan)
            wide["ms_per_step"] = np.where(steps > 0, 1e3 * wide["wall_s"].to_numpy() / steps,
                                           np.nan)
        frames.append(wide.sort_values(["interval", "path_id"], kind="stable"))
    if not frames:
        return pd.DataFrame(columns=OPERATION_COLUMNS)
    return pd.concat(frames, ignore_index=True)[OPERATION_COLUMNS]


def _with_ancestors(wide: pd.DataFrame, paths: PathTable) -> pd.DataFrame:
    """Rows for enclosing operations, and wall (inclusive) seconds per row."""
    cols = ["python_s", "backend_s", "simulator_s", "cuda_api_s", "waiting_s", "gpu_s",
            "self_s", "calls"]
    have = {(int(b), int(p)) for b, p in zip(wide["interval"], wide["path_id"], strict=True)}
    extra = []
    for b, p in sorted(have):
        for a in paths.ancestors(p)[1:]:
            if (b, a) not in have:
                have.add((b, a))
                extra.append({"interval": b, "path_id": a, **dict.fromkeys(cols, 0.0)})
    if extra:
        wide = pd.concat([wide, pd.DataFrame(extra)], ignore_index=True)
    total: dict[tuple[int, int], float] = {}
    for b, p, s in zip(wide["interval"], wide["path_id"], wide["self_s"], strict=True):
        for a in paths.ancestors(int(p)) or [0]:
            total[(int(b), a)] = total.get((int(b), a), 0.0) + float(s)
    wide["wall_s"] = [total.get((int(b), int(p)), 0.0)
                      for b, p in zip(wide["interval"], wide["path_id"], strict=True)]
    return wide


def metric_table(processes: Iterable[tuple[int, int, dict[str, Any]]], t0: int
                 ) -> pd.DataFrame:
    """The metrics reported with progress (report_progress(metrics=...)): one row per
    (report, name), in time order; time in seconds from ``t0``."""
    rows = []
    for pid, session, metadata in processes:
        for key, v in metadata.items():
            if not key.startswith(fmt.META_METRIC_PREFIX) or not isinstance(v, list) \
                    or len(v) < 3 or not isinstance(v[2], dict):
                continue
            for name, value in v[2].items():
                if isinstance(value, int | float):
                    rows.append((pid, session, (v[0] - t0) / 1e9, v[1], str(name),
                                 float(value)))
    out = pd.DataFrame(rows, columns=METRIC_COLUMNS)
    return out.sort_values(["time_s", "pid", "name"], kind="stable", ignore_index=True)


def is_metric_key(key: str) -> bool:
    return key.startswith(fmt.META_METRIC_PREFIX)


# -- drifts ----------------------------------------------------------------------------
def drifts(intervals: pd.DataFrame, operations: pd.DataFrame, window: float = WINDOW,
           ratio: float = RATIO, min_share: float = MIN_SHARE,
           min_intervals: int = MIN_INTERVALS) -> list[Drift]:
    """The named drifts of a run (the module's rule), largest first."""
    out: list[tuple[float, Drift]] = []
    for (pid, session), iv in intervals.groupby(["pid", "session"], sort=False):
        early = iv["position"].to_numpy() < window
        late = iv["position"].to_numpy() > 1 - window
        if early.sum() < min_intervals or late.sum() < min_intervals:
            continue
        name, unit = str(iv["process"].iloc[0]), str(iv["unit"].iloc[0])
        at = (window / 2, 1 - window / 2)
        sec = iv["seconds"].to_numpy(float)
        steps = iv["steps"].to_numpy(float)
        per_step = bool(np.all(steps[early | late] > 0))
        if per_step and iv["by"].iloc[0] == "progress":
            d = _drift(sec / steps, early, late, ratio)
            if d is not None:
                e, lt = 1 / d[0], 1 / d[1]
                out.append((abs(np.log(d[2])), Drift(int(pid), name, "steps/s", "rate", e,
                                                     lt, 1 / d[2], at, unit)))
        ops = operations[(operations["pid"] == pid) & (operations["session"] == session)
                         & (operations["depth"] <= MAX_DEPTH)]
        index = {int(i): j for j, i in enumerate(iv["interval"])}
        for op, g in ops.groupby("operation", sort=False):
            wall = np.zeros(len(iv))
            pos = [index[int(i)] for i in g["interval"]]
            wall[pos] = g["wall_s"].to_numpy(float)
            with np.errstate(divide="ignore", invalid="ignore"):
                value = wall / steps if per_step else wall / sec
            d = _drift(value, early, late, ratio)
            if d is None:
                continue
            share = [wall[w].sum() / max(sec[w].sum(), 1e-12) for w in (early, late)]
            if max(share) < min_share:
                continue
            drift = Drift(int(pid), name, str(op), "per step" if per_step else "share",
                          d[0], d[1], d[2], at, unit)
            out.append((abs(np.log(d[2])) * max(share), drift))
    return [d for _, d in sorted(out, key=lambda x: -x[0])]


def _drift(value: np.ndarray, early: np.ndarray, late: np.ndarray, ratio: float
           ) -> tuple[float, float, float] | None:
    """(early median, late median, late/early) when they differ by ``ratio`` and their
    middle halves do not overlap; else None."""
    a, b = value[early], value[late]
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if len(a) < MIN_INTERVALS or len(b) < MIN_INTERVALS:
        return None
    ma, mb = float(np.median(a)), float(np.median(b))
    if ma <= 0 or mb <= 0:
        return None
    r = mb / ma
    qa, qb = np.percentile(a, [25, 75]), np.percentile(b, [25, 75])
    if r >= ratio and qb[0] > qa[1]:
        return ma, mb, r
    if r <= 1 / ratio and qb[1] < qa[0]:
        return ma, mb, r
    return None
