"""Compare runs side by side: seconds per operation or category, deltas against the first
run, and whether a delta exceeds run-to-run noise (when runs have repetitions)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlscope.analysis import Analysis
from rlscope.analysis.engine.paths import PATH_SEP, UNANNOTATED
from rlscope.errors import RLScopeError
from rlscope.reporters.markdown import to_markdown

COLUMNS = ["key", "run", "repetitions", "present", "mean_s", "std_s", "delta_s",
           "delta_pct", "significant"]


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


def compare(runs: list[list[Analysis]], names: list[str], by: str = "operation",
            mapping: dict[str, str] | None = None, per_timestep: bool = False,
            phase: str | None = None) -> pd.DataFrame:
    """Long table: one row per (key, run) with the mean and standard deviation over the
    run's repetitions, the delta of the mean against the first run, ``present`` (the key
    was seen in some repetition of the run) and ``significant``: True/False when both runs
    have at least two repetitions (|delta| > 2 standard errors of the difference, Welch),
    None otherwise. A key absent from every repetition of a run counts as measured zero
    (no spread). ``mapping`` renames operations before comparing (summing merged ones);
    ``per_timestep`` divides each run by the timesteps it reported; ``phase`` keeps only
    that phase's time (``rlscope.phase``), leaving out set-up and other phases."""
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
            sig = None
            if n > 1 and base_n > 1 and name != names[0]:
                se = math.sqrt(s * s / n + bs * bs / base_n)
                sig = bool(abs(delta) > 2 * se) if se > 0 else bool(delta != 0)
            rows.append({"key": key, "run": name, "repetitions": n, "present": key in seen,
                         "mean_s": m, "std_s": s, "delta_s": delta,
                         "delta_pct": 100 * delta / b if b else np.nan, "significant": sig})
    return pd.DataFrame(rows, columns=COLUMNS)


def render(df: pd.DataFrame, names: list[str], fmt: str, per_timestep: bool = False) -> str:
    if fmt == "csv":
        return df.to_csv(index=False).rstrip("\n")
    if fmt == "json":
        return df.to_json(orient="records", indent=2)
    wide = _wide(df, names, per_timestep)
    if fmt == "markdown":
        return to_markdown(wide)
    head = list(wide.columns)
    body = [[str(v) for v in r] for r in wide.itertuples(index=False)]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                       for i, (h, w) in enumerate(zip(head, widths, strict=True))),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(b, widths, strict=True))) for b in body]
    lines.append("")
    noise = df["significant"].notna().any()
    unit = "Microseconds per timestep" if per_timestep else "Seconds"
    marks = ("*: the delta exceeds run-to-run noise (2 standard errors); ~: it does not."
             if noise else "Give repetitions as DIR1,DIR2 to tell deltas from noise.")
    lines.append(f"{unit} (mean over repetitions ± standard deviation); –: not in that "
                 f"run; Δ: against {names[0]}. {marks}")
    return "\n".join(lines)


def _wide(df: pd.DataFrame, names: list[str], per_timestep: bool = False) -> pd.DataFrame:
    scale, digits = (1e6, 2) if per_timestep else (1.0, 3)
    out: dict[str, list[str]] = {"": []}
    for name in names:
        out[name] = []
        if name != names[0]:
            out[f"Δ {name}"] = []
    for key, g in df.groupby("key", sort=False):
        out[""].append(str(key))
        rows = list(g.itertuples())
        base_present = rows[0].present
        for r in rows:
            cell = f"{scale * r.mean_s:.{digits}f}" if r.present else "–"
            if r.present and r.repetitions > 1 and not math.isnan(r.std_s):
                cell += f" ±{scale * r.std_s:.{digits}f}"
            out[r.run].append(cell)
            if r.run != names[0]:
                mark = {True: " *", False: " ~", None: ""}[r.significant]
                if not r.present and not base_present:
                    out[f"Δ {r.run}"].append("–")
                elif not r.present:
                    out[f"Δ {r.run}"].append(f"absent{mark}")
                elif not base_present:
                    out[f"Δ {r.run}"].append(f"new{mark}")
                else:
                    pct = "" if math.isnan(r.delta_pct) else f" ({r.delta_pct:+.0f}%)"
                    out[f"Δ {r.run}"].append(f"{scale * r.delta_s:+.{digits}f}{pct}{mark}")
    return pd.DataFrame(out)


def figure(df: pd.DataFrame, names: list[str], by: str = "operation",
           per_timestep: bool = False) -> Any:
    """Grouped horizontal bars of the comparison, one row per operation (full path) or
    category in the table's order, one colour per run, error bars from the repetitions
    and the table's significance marks; the caller saves and closes it."""
    from rlscope.reporters.plots import RUN_COLOURS, pyplot, row_labels, value_label

    plt = pyplot()
    keys = list(dict.fromkeys(df["key"]))
    n = len(keys)
    scale, unit = (1e6, "µs per timestep") if per_timestep else (1.0, "s")
    height = max(2.6, (0.15 * len(names) + 0.1) * n + 2.0)
    fig, ax = plt.subplots(figsize=(9.0, height), constrained_layout=True)
    y = np.arange(n)
    h = 0.8 / len(names)
    for i, name in enumerate(names):
        g = df[df["run"] == name].set_index("key").reindex(keys)
        vals = scale * g["mean_s"].fillna(0.0).to_numpy()
        err = scale * g["std_s"].fillna(0.0).to_numpy()
        pos = y + (i - (len(names) - 1) / 2) * h
        ax.barh(pos, vals, h, xerr=err if err.any() else None, capsize=2,
                color=RUN_COLOURS[i % len(RUN_COLOURS)], label=name,
                error_kw={"linewidth": 0.8})
        # Each bar's value (a row far smaller than the largest is unreadable from its
        # length alone), then the run's significance mark against the first run.
        for p_, v, e, sig, present in zip(pos, vals, err, g["significant"], g["present"],
                                          strict=True):
            mark = "*" if sig is True else ("~" if sig is False else "")
            if present is False:
                mark = "–"
            label = "" if present is False else value_label(v)
            ax.text(v + e, p_, f" {label}{mark if i else ''}", va="center", fontsize=7)
    ax.margins(x=0.08)  # room for the largest bar's label
    ax.set_yticks(y, row_labels([str(k) for k in keys]))
    ax.set_ylim(n - 0.5, -0.5)  # first row on top, as in the table
    what = (f"Self time ({unit}): nested operations excluded, summed over processes and "
            "phases" if by == "operation" else f"Time ({unit}) per category, summed over "
            "processes")
    reps = df["repetitions"].max() > 1 if len(df) else False
    ax.set_xlabel(what + ("\nmean ± standard deviation over each run's repetitions"
                          if reps else ""))
    ax.grid(axis="x", linewidth=0.4, alpha=0.5)
    ax.set_axisbelow(True)
    fig.legend(loc="outside lower center", ncols=min(len(names), 4), frameon=False)
    noise = df["significant"].notna().any()
    ax.set_title("Run comparison" + (f" (* beyond the run-to-run noise, ~ within it, "
                                     f"– absent; against {names[0]})" if noise else ""),
                 fontsize=9)
    return fig
