"""Runs compared as data: seconds per process role and operation (or category) for each
run (the mean and spread over its repetitions), the delta of each against the first run,
and whether a delta exceeds run-to-run noise (Welch: more than 2 standard errors of the
difference). A role's processes are summed (the main process, the vector-env workers, the
pool workers, ...); idle helpers (the forkserver, the resource tracker, processes that
recorded nothing) are left out and counted in the frame's ``attrs["left_out"]``.
Nothing here renders: rlscope/reporters/compare.py turns the frame into text, Markdown,
CSV, JSON or a figure."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rlscope.analysis.engine.paths import PATH_SEP, UNANNOTATED
from rlscope.errors import RLScopeError
from rlscope.trace import format as fmt

if TYPE_CHECKING:
    from rlscope.analysis import Analysis

COLUMNS = ["role", "key", "run", "repetitions", "processes", "present", "mean_s", "std_s",
           "delta_s", "delta_pct", "significant"]
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


def _role_name(role: str, label: str) -> str:
    """The role rows are keyed by: the tree's role, a Ray actor's with its class (actors
    of different classes do different work); never a worker's env index, so that the
    workers of one role sum."""
    return label if role == fmt.ROLE_RAY_ACTOR else role


def _roles(a: Analysis) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(pid, session) -> role of every process that is not an idle helper, and what was
    left out: the idle helpers' count, roles and recorded seconds."""
    tree = a.process_tree()
    # A single process is the main one whatever it recorded (as reports show it).
    idle = tree["idle_helper"].astype(bool) & (len(tree) > 1)
    keep = tree[~idle]
    roles = pd.DataFrame({
        "pid": keep["pid"], "session": keep["session"],
        "role": [_role_name(str(r), str(lb))
                 for r, lb in zip(keep["role"], keep["role_label"], strict=True)]})
    helpers = tree[idle]
    first = helpers["continues"] < 0
    left = {"processes": int(first.sum()),
            "roles": list(dict.fromkeys(str(r) for r in helpers["role"])),
            "seconds": float(helpers["wall_s"].sum())}
    return roles.drop_duplicates(["pid", "session"]), left


def role_order(roles: Iterable[str]) -> list[str]:
    """Roles in the process reports' order: main first, then the known roles in their
    canonical order (a Ray actor with its class beside the others), then the rest as
    first seen."""
    seen = list(dict.fromkeys(roles))

    def rank(r: str) -> int:
        base = r.split(" (", 1)[0]
        return fmt.ROLES.index(base) if base in fmt.ROLES else len(fmt.ROLES)

    return sorted(seen, key=lambda r: (rank(r), seen.index(r)))


def _seconds(a: Analysis, by: str, mapping: dict[str, str], per_timestep: bool,
             phase: str | None = None) -> tuple[pd.Series, pd.Series, dict[str, Any]]:
    """Seconds per (role, key) (roles in :func:`role_order`, operations in the report's
    row order with the unannotated last), processes per role, and the idle helpers left
    out."""
    roles, left = _roles(a)
    if by == "operation":
        frame = a.operations()
        value = "self_s"
    else:
        frame = a.breakdown(by=("pid", "session", "phase", "category"))
        value = "seconds"
    if phase is not None:
        _check_phase(a, set(frame["phase"]), phase)
        frame = frame[frame["phase"] == phase]
    frame = frame.merge(roles, on=["pid", "session"], how="inner")
    processes = roles.drop_duplicates("pid").groupby("role", sort=False)["pid"].count()
    s = frame.groupby(["role", by], sort=False)[value].sum()
    if mapping:
        s.index = pd.MultiIndex.from_tuples([(r, _rename(str(k), mapping))
                                             for r, k in s.index])
        s = s.groupby(level=[0, 1], sort=False).sum()
    order = {r: i for i, r in enumerate(role_order(r for r, _ in s.index))}
    s = s.reindex(sorted(s.index, key=lambda rk: (order[rk[0]], rk[1] == UNANNOTATED)))
    if per_timestep:
        n = timesteps(a)
        if n <= 0:
            raise RLScopeError(f"{a.directory} reported no progress: --per-timestep needs "
                               "rlscope.report_progress (or the sb3 integration's)")
        s = s / n
    return s, processes, left


def _check_phase(a: Analysis, phases: set[Any], phase: str) -> None:
    # The frame's phase of time outside every phase is "" (not a phase to name).
    have = sorted(p for p in phases if isinstance(p, str) and p)
    if phase in have:
        return
    if not have:
        raise RLScopeError(f"{a.directory} has no phase {phase!r}: it has no phases "
                           "(rlscope.phase); leave --phase out")
    raise RLScopeError(f"{a.directory} has no phase {phase!r} (its phases: "
                       f"{', '.join(repr(p) for p in have)}); name one of them with "
                       "--phase, or leave --phase out")


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
            phase: str | None = None, role: str | None = None) -> pd.DataFrame:
    """Long table: one row per (role, key, run) with the mean and standard deviation over
    the run's repetitions, the delta of the mean against the first run, ``processes``
    (the role's processes in the run, the most over its repetitions), ``present`` (the
    key was seen in some repetition of the run) and ``significant``: True/False when both
    runs have at least two repetitions (:func:`significant`), None otherwise. A key absent
    from every repetition of a run counts as measured zero (no spread).

    ``role`` is the process tree's role (main, vector-env worker, pool worker, ...; a
    Ray actor's with its class), the processes of one role summed; idle helpers are left
    out (``attrs["left_out"]``: per run, the most processes left out over its
    repetitions, their roles and recorded seconds). ``role=`` keeps one role (a Ray
    actor's class may be left out: ``ray actor`` keeps every class). ``mapping``
    renames operations before comparing (summing merged ones); ``per_timestep`` divides
    each run by the timesteps it reported; ``phase`` keeps only that phase's time
    (``rlscope.phase``), leaving out set-up and other phases."""
    rows = []
    stats = []
    keys: list[tuple[str, str]] = []
    left_out: dict[str, dict[str, Any]] = {}
    seen_roles: list[str] = []
    for name, reps in zip(names, runs, strict=True):
        parts = [_seconds(a, by, mapping or {}, per_timestep, phase) for a in reps]
        table = pd.concat([p[0] for p in parts], axis=1).fillna(0.0)
        seen_roles += [r for p in parts for r in p[1].index]
        if role is not None:
            table = table[np.array([_is_role(str(k[0]), role) for k in table.index],
                                   dtype=bool)]
        procs = pd.concat([p[1] for p in parts], axis=1).fillna(0).max(axis=1)
        std = table.std(axis=1, ddof=1) if len(reps) > 1 else table.mean(axis=1) * np.nan
        stats.append((table.mean(axis=1), std, len(reps), set(table.index), procs))
        keys += [k for k in table.index if k not in keys]
        lefts = [p[2] for p in parts]
        worst = max(lefts, key=lambda d: d["processes"])
        left_out[name] = {"processes": worst["processes"],
                          "roles": list(dict.fromkeys(r for d in lefts for r in d["roles"])),
                          "seconds": float(np.mean([d["seconds"] for d in lefts]))}
    if role is not None and not keys:
        have = ", ".join(repr(r) for r in role_order(seen_roles)) or "none"
        raise RLScopeError(f"no run has a process of role {role!r} with time recorded "
                           f"(roles: {have}; idle helpers are left out)")
    order = {r: i for i, r in enumerate(role_order(r for r, _ in keys))}
    keys.sort(key=lambda rk: order[rk[0]])  # stable: each role's keys as first seen
    base_mean, base_std, base_n, _, _ = stats[0]
    for key in keys:
        b = float(base_mean.get(key, 0.0))
        bs = float(base_std.get(key, 0.0 if base_n > 1 else np.nan))
        for name, (mean, std, n, seen, procs) in zip(names, stats, strict=True):
            m = float(mean.get(key, 0.0))
            s = float(std.get(key, 0.0 if n > 1 else np.nan))
            delta = m - b
            sig = significant(delta, s, n, bs, base_n) if name != names[0] else None
            rows.append({"role": key[0], "key": key[1], "run": name, "repetitions": n,
                         "processes": int(procs.get(key[0], 0)), "present": key in seen,
                         "mean_s": m, "std_s": s, "delta_s": delta,
                         "delta_pct": 100 * delta / b if b else np.nan, "significant": sig})
    df = pd.DataFrame(rows, columns=COLUMNS)
    df.attrs["left_out"] = left_out
    return df


def _is_role(have: str, want: str) -> bool:
    return have == want or have.startswith(f"{want} (")


def roles(df: pd.DataFrame) -> list[str]:
    """The comparison's roles in their order."""
    return list(dict.fromkeys(df["role"]))


def left_out_line(df: pd.DataFrame) -> str | None:
    """One line on the idle helpers left out of the comparison, or None when none was."""
    left = df.attrs.get("left_out") or {}
    if not any(v["processes"] for v in left.values()):
        return None
    counts = {v["processes"] for v in left.values()}
    n = (f"{counts.pop()}" if len(counts) == 1
         else ", ".join(f"{v['processes']} in {k}" for k, v in left.items()))
    kinds = list(dict.fromkeys(r for v in left.values() for r in v["roles"]))
    return (f"Left out: idle helper processes ({n}: {', '.join(kinds)}), which recorded "
            "no operation, call, GPU work or progress.")
