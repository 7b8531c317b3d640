"""Runs compared as data: seconds per operation or category for each run (the mean and
spread over its repetitions), the delta of each against the first run, and whether a
delta exceeds run-to-run noise (Welch: more than 2 standard errors of the difference).
Nothing here renders: rlscope/reporters/compare.py turns the frame into text, Markdown,
CSV, JSON or a figure."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from rlscope.analysis.engine.paths import PATH_SEP, UNANNOTATED
from rlscope.errors import RLScopeError

if TYPE_CHECKING:
    from rlscope.analysis import Analysis

COLUMNS = ["key", "run", "repetitions", "present", "mean_s", "std_s", "delta_s",
           "delta_pct", "significant"]
NOISE_SE = 2.0  # a delta beyond this many standard errors of the difference is significant


def run_label(dirs: list[Path]) -> str:
    name = dirs[0].resolve().name or str(dirs[0])
    return name if len(dirs) == 1 else f"{name} (x{len(dirs)})"


def unique_labels(names: list[str]) -> list[str]:
    """Run labels, a repeated one numbered (the same directory given twice)."""
    out: list[str] = []
    for n in names:
        label, k = n, 2
        while label in out:
            label, k = f"{n} #{k}", k + 1
        out.append(label)
    return out


def parse_map(items: Iterable[str]) -> dict[str, str]:
    """``--map OLD=NEW`` items: operation names (a path, or one level of it) to rename."""
    out = {}
    for item in items:
        old, sep, new = item.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise ValueError(f"--map {item!r}: expected OLD=NEW, e.g. --map "
                             "train_step=backprop")
        out[old.strip()] = new.strip()
    return out


def _rename(key: str, mapping: dict[str, str]) -> str:
    if key in mapping:
        return mapping[key]
    return PATH_SEP.join(mapping.get(part, part) for part in key.split(PATH_SEP))


def timesteps(a: Analysis) -> int:
    """Timesteps the run reported (its main process's last progress record); 0 if none."""
    ex = a.extrapolation()
    return int(ex["timesteps"].max()) if len(ex) else 0


def _seconds(a: Analysis, by: str, mapping: dict[str, str], per_timestep: bool,
             phase: str | None = None) -> pd.Series:
    if by == "operation":  # in the report's row order, unannotated last
        ops = a.operations()
        if phase is not None:
            _check_phase(a, set(ops["phase"]), phase)
            ops = ops[ops["phase"] == phase]
        s = ops.groupby("operation", sort=False)["self_s"].sum()
        s = s.reindex([k for k in s.index if k != UNANNOTATED]
                      + [k for k in s.index if k == UNANNOTATED])
    elif phase is None:
        bd = a.breakdown(by=("category",))
        s = bd.set_index("category")["seconds"]
    else:
        bd = a.breakdown(by=("phase", "category"))
        _check_phase(a, set(bd["phase"]), phase)
        s = bd[bd["phase"] == phase].groupby("category", sort=False)["seconds"].sum()
    if mapping:
        s = s.groupby([_rename(str(k), mapping) for k in s.index], sort=False).sum()
    if per_timestep:
        n = timesteps(a)
        if n <= 0:
            raise RLScopeError(f"{a.directory} reported no progress: --per-timestep needs "
                               "rlscope.report_progress (or the sb3 integration's)")
        s = s / n
    return s


def _check_phase(a: Analysis, phases: set[str], phase: str) -> None:
    if phase not in phases:
        have = ", ".join(repr(p) for p in sorted(phases) if p) or "none"
        raise RLScopeError(f"{a.directory} has no phase {phase!r} (its phases: {have}); "
                           "name one of them with --phase, or leave --phase out")


def correction_warnings(runs: list[list[Analysis]], names: list[str]) -> list[str]:
    """A warning when corrected runs are compared with uncorrected ones."""
    state = {name: {bool(a.run.get("correction", {}).get("applied")) for a in reps}
             for name, reps in zip(names, runs, strict=True)}
    if len({x for v in state.values() for x in v}) < 2:
        return []
    corrected = [n for n, v in state.items() if True in v]
    raw = [n for n, v in state.items() if False in v]
    return [f"comparing runs with rlscope's overhead removed ({', '.join(corrected)}) with "
            f"runs without ({', '.join(raw)}): calibrate them all (rls-prof --calibrate) or "
            "compare with --no-correct"]


def significant(delta: float, std: float, n: int, base_std: float, base_n: int
                ) -> bool | None:
    """Whether ``delta`` (a run's mean minus the first run's) exceeds run-to-run noise:
    more than NOISE_SE standard errors of the difference (Welch). None when either run has
    fewer than two repetitions (no spread to judge by)."""
    if n < 2 or base_n < 2:
        return None
    se = math.sqrt(std * std / n + base_std * base_std / base_n)
    return bool(abs(delta) > NOISE_SE * se) if se > 0 else bool(delta != 0)


def noise_known(df: pd.DataFrame) -> bool:
    """Whether the comparison could tell any delta from noise (some run pair had
    repetitions)."""
    return bool(df["significant"].notna().any())


def compare(runs: list[list[Analysis]], names: list[str], by: str = "operation",
            mapping: dict[str, str] | None = None, per_timestep: bool = False,
            phase: str | None = None) -> pd.DataFrame:
    """Long table: one row per (key, run) with the mean and standard deviation over the
    run's repetitions, the delta of the mean against the first run, ``present`` (the key
    was seen in some repetition of the run) and ``significant``: True/False when both runs
    have at least two repetitions (:func:`significant`), None otherwise. A key absent from
    every repetition of a run counts as measured zero (no spread). ``mapping`` renames
    operations before comparing (summing merged ones); ``per_timestep`` divides each run by
    the timesteps it reported; ``phase`` keeps only that phase's time
    (``rlscope.phase``), leaving out set-up and other phases."""
    rows = []
    stats = []
    keys: list[str] = []
    for reps in runs:
        table = pd.concat([_seconds(a, by, mapping or {}, per_timestep, phase)
                           for a in reps],
                          axis=1).fillna(0.0)
        std = table.std(axis=1, ddof=1) if len(reps) > 1 else table.mean(axis=1) * np.nan
        stats.append((table.mean(axis=1), std, len(reps), set(table.index)))
        keys += [k for k in table.index if k not in keys]
    base_mean, base_std, base_n, _ = stats[0]
    for key in keys:
        b = float(base_mean.get(key, 0.0))
        bs = float(base_std.get(key, 0.0 if base_n > 1 else np.nan))
        for name, (mean, std, n, seen) in zip(names, stats, strict=True):
            m = float(mean.get(key, 0.0))
            s = float(std.get(key, 0.0 if n > 1 else np.nan))
            delta = m - b
            sig = significant(delta, s, n, bs, base_n) if name != names[0] else None
            rows.append({"key": key, "run": name, "repetitions": n, "present": key in seen,
                         "mean_s": m, "std_s": s, "delta_s": delta,
                         "delta_pct": 100 * delta / b if b else np.nan, "significant": sig})
    return pd.DataFrame(rows, columns=COLUMNS)
