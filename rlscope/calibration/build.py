"""Turn calibration runs (and a microbenchmark) into the calibration file's contents."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlscope.analysis.overhead.kinds import (
    ANNOTATION,
    ENV_CALL,
    GPU_ACTIVITY,
    MICROBENCHMARK_ONLY,
    PAIR_KINDS,
    PASSED_CALL,
    PHASE_MARKER,
    PROCESS,
    PY_SAMPLE,
    RLSCOPE_IMPORT,
    in_situ_what,
)
from rlscope.analysis.overhead.model import NOT_TIMED, Calibration, KindCost, machine_info
from rlscope.calibration.configs import Config
from rlscope.calibration.estimate import (
    RunSample,
    Validation,
    estimate_costs,
    split_rounds,
    uninstrumented_seconds,
    validate,
)

# Share of a cost inside the timed interval when no microbenchmark measured it.
DEFAULT_INSIDE = {ANNOTATION: 0.4, GPU_ACTIVITY: 1.0, PROCESS: 0.0, RLSCOPE_IMPORT: 0.0}
DEFAULT_INSIDE_OTHER = 0.3
# A kind's cost up to this many times its hook's microbenchmark is paid at its events;
# beyond, it is spread over time (KindCost.diffuse_ns).
LOCAL_FACTOR = 2.0
WARN_ERROR_PCT = 5.0  # the report warns above this residual error
WARN_NOISE_PCT = 3.0  # ... and when the uninstrumented runs spread more than this


def inside_part(inside_ns: float) -> float:
    """What an event's hook puts between its two stamps (the microbenchmark's empty
    interval), all of it removed from the interval even where it is more than the hook
    adds to the run: an annotation's code between its stamps runs when nothing records
    too (its cost, recording against idle, read 1-10 ns; its empty interval 20-50 ns).
    That code is not the operation's, so the interval loses all of it and the rest of
    the cost (negative then) moves that much time out of the interval, around it."""
    return max(inside_ns, 0.0)


def _kind_cost(kind: str, per_event: float, error: float, confounded: list[str],
               mb: dict[str, float] | None, events: int, measured: str = "runs",
               failed_check: bool = False) -> KindCost:
    """``measured``: what the estimate came from, "runs" or "chunks"; ``failed_check``:
    correcting with the estimates made the held-out rounds worse than not correcting.

    Rules, each said in the cost's note (reporters.calibration explains them): the
    tight-loop microbenchmark is a lower bound; an estimate whose error bar is wider than
    itself, or that has none (one calibrating round), is not resolved, and the
    microbenchmark is used, as it is for an estimate that failed the held-out check and
    for one not separable from another kind's (their counts moved together: any split
    of their sum fits);
    what is above twice the
    microbenchmark is paid not at the events but spread over time (diffuse)."""
    notes = []
    source = measured
    estimate = per_event
    fallback = ""
    # The tight loop's figure is a lower bound; the cost model's (the in-situ figure where
    # that is higher: a wrapped call between real ops) is what a fallback uses.
    mb_cost = float(mb.get("per_event_ns", math.nan)) if mb is not None else math.nan
    # A hook cheaper than its benchmark resolves reads 0 or a little below (an annotation:
    # -2..+2 ns): still a figure to fall back on, priced at nothing then.
    has_mb = mb is not None and math.isfinite(mb_cost)
    model_cost = max(priced(kind, mb)[0], 0.0) if mb is not None and has_mb else mb_cost
    # One calibrating round has no error bar: nothing says the estimate is not noise.
    bar = f"± {error:.0f} ns" if math.isfinite(error) else "no error bar from one round"
    unresolved = not math.isfinite(error) or error >= abs(per_event)
    if has_mb and (failed_check or unresolved or confounded or not per_event >= mb_cost):
        why = ("not separable from " + ", ".join(confounded) if confounded else
               "below the microbenchmark" if per_event < mb_cost else
               "not resolved" if unresolved else "failed the held-out check")
        notes.append(f"{measured} gave {per_event:.0f} ns, {bar} ({why}): "
                     "microbenchmark used")
        per_event, source = model_cost, "microbenchmark"
        fallback = "held-out" if why.startswith("failed") else \
            "confounded" if why.startswith("not separable") else ""
    elif unresolved:
        notes.append(f"not resolved by the {measured} ({bar}) and no "
                     "microbenchmark to fall back on")
    elif per_event < 0 or (math.isfinite(error) and 2 * error > abs(per_event)):
        notes.append(f"within the noise of the {measured} (± {error:.0f} ns)")
    if per_event < 0:
        notes.append(f"{measured} gave {per_event:.0f} ns (noise); set to 0")
        per_event = 0.0
    diffuse = 0.0
    if source == measured and kind in PAIR_KINDS and has_mb:
        # Far more than the hook itself costs (microbenchmark): the rest is what recording
        # at all costs, scaling with these events but not paid at them.
        diffuse = max(per_event - LOCAL_FACTOR * model_cost, 0.0)
        if diffuse:
            notes.append(f"{diffuse:.0f} ns of it spread over time (more than "
                         f"{LOCAL_FACTOR:g}x the microbenchmark's {model_cost:.0f} ns)")
    local = per_event - diffuse
    if mb is not None and math.isfinite(mb.get("inside_ns", math.nan)):
        inside = inside_part(float(mb["inside_ns"]))
        if source == measured:
            source = f"{measured} (inside part: microbenchmark)"
    else:
        inside = local * DEFAULT_INSIDE.get(kind, DEFAULT_INSIDE_OTHER)
    if confounded and source == measured:
        notes.append("not separable from " + ", ".join(confounded) + " by these runs")
    return KindCost(per_event, inside, error, source, events, "; ".join(notes), diffuse,
                    estimate_ns=estimate, microbenchmark_ns=mb_cost, fallback=fallback)


def _microbenchmark_costs(mb: dict[str, dict[str, float]], full: list[RunSample]
                          ) -> dict[str, KindCost]:
    """Kinds whose cost only the microbenchmark gives (kinds.MICROBENCHMARK_ONLY). Env
    steps are kept even when the calibration's runs recorded none: chunk copies are forked
    after the workload made its vector env, unrecorded, while the profiled run records
    its steps, and Python stack samples (the calibration's runs take none: the profiled
    run may). The pool kinds only where the runs had pool tasks."""
    out = {}
    for kind in MICROBENCHMARK_ONLY:
        m = mb.get(kind, {})
        tight = float(m.get("per_event_ns", math.nan))
        events = int(np.median([s.counts.get(kind, 0) for s in full])) if full else 0
        if not tight > 0 or (kind not in (ENV_CALL, PY_SAMPLE) and not events):
            continue
        cost, _error, source = priced(kind, m)
        inside = float(m.get("inside_ns", math.nan))
        inside = inside_part(inside) if math.isfinite(inside) else cost / 2
        out[kind] = KindCost(cost, inside, math.nan, "microbenchmark", events,
                             "no configuration separates these from the simulation "
                             f"operation recorded with them: {source} is used",
                             microbenchmark_ns=tight)
    return out


def _worse_than_raw(v: Validation, raw: Validation) -> bool:
    """The correction moved the held-out total further from the truth than no correction
    did (the demo: -1.2% corrected against +0.4% raw, issue 22): the workload's
    estimates give way to the cost model (microbenchmarks) where that does better."""
    c, r = abs(v.total_error_pct), abs(raw.total_error_pct)
    return math.isfinite(c) and math.isfinite(r) and c > r


def build_calibration(command: list[str], samples: list[RunSample], configs: list[Config],
                      rounds: int, microbenchmark: dict[str, dict[str, float]] | None = None,
                      run_dirs: list[str] | None = None, metric: str = "cpu",
                      mode: str = "runs") -> Calibration:
    """``metric``: what RunSample.seconds measures, "cpu" (process-tree CPU time),
    "wall" or "thread-cpu"; ``mode``: "runs" (a round is a set of whole runs) or
    "chunks" (a round is one chunk of work measured in every configuration)."""
    chunks = mode == "chunks"
    cal_rounds, val_rounds = split_rounds([s.round for s in samples])
    full = [s for s in samples if s.config == "full"]
    fixed = _microbenchmark_costs(microbenchmark or {}, full)
    est = estimate_costs(samples, cal_rounds, paired=chunks,
                         known={k: c.per_event_ns for k, c in fixed.items()})

    def kind_costs(failed_check: bool) -> dict[str, KindCost]:
        return {**{kind: _kind_cost(kind, e.per_event_ns, e.error_ns, e.confounded_with,
                                    (microbenchmark or {}).get(kind),
                                    int(np.median([s.counts.get(kind, 0) for s in full]))
                                    if full else 0, "chunks" if chunks else "runs",
                                    failed_check)
                   for kind, e in est.items()}, **fixed}

    independent = cal_rounds != val_rounds

    def check(c: dict[str, KindCost]) -> Validation:
        return validate(samples, {k: x.per_event_ns for k, x in c.items()}, val_rounds,
                        "full", independent, drop_outliers=chunks)

    costs = kind_costs(False)
    v = check(costs)
    raw = validate(samples, {}, val_rounds, "full", independent, drop_outliers=chunks)
    failed: dict[str, float] = {}
    if independent and _worse_than_raw(v, raw):
        # Estimates that make held-out rounds worse than no correction are noise that
        # passed for a cost (whole runs of a short workload: seen 316 µs per annotation
        # "± 29 µs" with the microbenchmark at 38 ns); the microbenchmarks, if better.
        costs_mb = kind_costs(True)
        v_mb = check(costs_mb)
        if abs(v_mb.total_error_pct) < abs(v.total_error_pct):
            failed = {"total_error_pct": v.total_error_pct,
                      "max_abs_error_pct": v.max_abs_pct}
            costs, v = costs_mb, v_mb
    u = uninstrumented_seconds(samples)
    uw = np.array([s.wall_s for s in samples if s.config == "uninstrumented"])
    unin = {"mean_s": float(u.mean()), "std_s": float(u.std(ddof=1)) if len(u) > 1 else 0.0,
            "median_s": float(np.median(u)), "min_s": float(u.min()), "max_s": float(u.max()),
            "n": len(u), "wall_mean_s": float(np.mean(uw)) if len(uw) else math.nan}
    if chunks:  # chunk times are of different work: no whole-run figure to compare with
        unin = {"chunks": len(u), "chunk_mean_s": unin["mean_s"]}
    warnings = []
    if failed:
        warnings.append(f"correcting with the {'chunks' if chunks else 'runs'}' "
                        f"estimates left the held-out {'chunks' if chunks else 'rounds'} "
                        f"{failed['total_error_pct']:+.1f}% off, worse than not correcting "
                        f"({raw.total_error_pct:+.1f}%): the tight-loop microbenchmarks "
                        f"are used instead ({v.total_error_pct:+.1f}%)")
    if chunks:
        if abs(v.total_error_pct) > WARN_ERROR_PCT:
            warnings.append(f"held-out chunks: corrected instrumented time is "
                            f"{v.total_error_pct:+.1f}% off the uninstrumented time")
    elif v.errors_pct and v.max_abs_pct > WARN_ERROR_PCT:
        warnings.append(f"held-out rounds: corrected full runs are off by up to "
                        f"{v.max_abs_pct:.1f}% from uninstrumented ones")
    noise = 0.0 if chunks else 100 * unin["std_s"] / max(unin["mean_s"], 1e-9)
    if noise > WARN_NOISE_PCT:
        warnings.append(f"uninstrumented runs vary by {noise:.1f}% (std/mean): the machine "
                        "is noisy or the work per run is not fixed")
    runs: list[dict[str, Any]] = []
    for i, s in enumerate(samples):
        runs.append({"config": s.config, "round": s.round, "seconds": s.seconds,
                     "wall_s": s.wall_s, "counts": s.counts,
                     **({"boundaries": s.boundaries} if s.boundaries else {}),
                     **({"directory": run_dirs[i]} if run_dirs else {})})
    return Calibration(
        command=list(command), costs=costs, machine=machine_info(), repetitions=rounds,
        configurations={c.name: {"record": str(c.record), "annotations": str(c.annotations),
                                 "intercept": c.intercept_spec, "cuda": str(c.cuda),
                                 "cuda_activity": str(c.cuda and c.cuda_activity)}
                        for c in configs},
        runs=runs, uninstrumented=unin,
        validation={"config": "full", "calibration_rounds": cal_rounds,
                    "validation_rounds": v.rounds, "independent": independent,
                    "errors_pct": v.errors_pct, "median_error_pct": v.median_pct,
                    "max_abs_error_pct": v.max_abs_pct,
                    "raw_errors_pct": raw.errors_pct,
                    "total_error_pct": v.total_error_pct,
                    "raw_total_error_pct": raw.total_error_pct,
                    "uninstrumented_total_s": v.uninstrumented_s,
                    "outlier_rounds": v.dropped,
                    **({"estimates_failed": failed} if failed else {})},
        microbenchmark=microbenchmark or {}, warnings=warnings, metric=metric, mode=mode)


def priced(kind: str, m: dict[str, float]) -> tuple[float, float, str]:
    """(cost, error, where it came from) of one kind's microbenchmark ``m``: its in-situ
    figure where that was measured and is above the tight loop's lower bound (timed
    around real work: microbench.in_situ_call, in_situ_env_step), else the tight loop's."""
    tight = float(m.get("per_event_ns", math.nan))
    share = m.get("not_timed_share")
    if share is not None:  # calibrate.not_timed: too few events to be worth timing
        what = ("at nothing (an error bar of its most)" if kind in (PHASE_MARKER, PASSED_CALL)
                else "the hook's tight-loop microbenchmark (a lower bound)")
        return tight, float(m.get("error_ns", math.nan)), (
            f"not timed in situ: this run's events of it could cost at most "
            f"{100 * share:.2g}% of its CPU time; priced {what}")
    if kind in (PY_SAMPLE, PHASE_MARKER, PASSED_CALL):  # timed in situ only
        loaded = "; other load delayed every try: the lower quartile of the stalls" \
            if m.get("loaded") else ""
        return tight, float(m.get("error_ns", math.nan)), in_situ_what(kind) + loaded
    situ = float(m.get("in_situ_ns", math.nan))
    if situ > tight:
        return (situ, float(m.get("in_situ_error_ns", math.nan)),
                f"{in_situ_what(kind)} (the tight loop gives {tight:.0f} ns, a lower bound)")
    return tight, float(m.get("error_ns", math.nan)), \
        "the hook's tight-loop microbenchmark (a lower bound)"


def model_costs(mb: dict[str, dict[str, float]], startup_ns: float, startup_err_ns: float,
                counts: dict[str, int] | None = None, import_ns: float = math.nan
                ) -> dict[str, KindCost]:
    """The per-event cost model: each kind the run recorded (``counts``; None: every
    kind measured), at its hook's microbenchmark (inside part: the microbenchmark's; a
    wrapped call at its in-situ figure where that was measured and is higher), and the
    per-process start-up (``import_ns`` of it, importing rlscope, apart where known:
    kinds.RLSCOPE_IMPORT, paid by the processes whose script does not use rlscope)."""
    costs: dict[str, KindCost] = {}
    split = math.isfinite(import_ns) and math.isfinite(startup_ns)
    if counts is None:
        counts = {k: 1 for k in [PROCESS, RLSCOPE_IMPORT, *mb]}
    for kind, n in counts.items():
        if kind == PROCESS:
            if n and math.isfinite(startup_ns):
                ns = startup_ns - import_ns if split else startup_ns
                costs[kind] = KindCost(ns, 0.0, startup_err_ns, "microbenchmark", n,
                                       "a Python process with and without rlscope "
                                       "(beyond the standard library both import"
                                       + (", and beyond importing rlscope)" if split
                                          else ")"), microbenchmark_ns=ns)
            continue
        if kind == RLSCOPE_IMPORT:
            if n and split:
                costs[kind] = KindCost(import_ns, 0.0, startup_err_ns, "microbenchmark", n,
                                       "importing rlscope in a Python process",
                                       microbenchmark_ns=import_ns)
            continue
        m = mb.get(kind, {})
        tight = float(m.get("per_event_ns", math.nan))
        if not n or not math.isfinite(tight):
            continue
        cost, error, note = priced(kind, m)
        skipped = "not_timed_share" in m
        if not cost > 0 and not skipped:  # cheaper than the benchmark resolves (an annotation
            # measured -2..+2 ns on a quiet day): priced at nothing, not left out
            cost, note = 0.0, f"{note}; measured {cost:.1f} ns: below what it resolves"
        inside = float(m.get("inside_ns", math.nan))
        inside = inside_part(inside) if math.isfinite(inside) else \
            cost * DEFAULT_INSIDE.get(kind, DEFAULT_INSIDE_OTHER)
        costs[kind] = KindCost(cost, inside, error, "microbenchmark", n, note,
                               microbenchmark_ns=tight,
                               fallback=NOT_TIMED if skipped else "")
    return costs


def model_calibration(command: list[str], mb: dict[str, dict[str, float]],
                      startup_ns: float, startup_err_ns: float, counts: dict[str, int],
                      cpu_s: float, wall_s: float, unrecorded: list[RunSample],
                      installs_s: float, run_dirs: list[str], bounded: int | None = None,
                      checked: list[tuple[RunSample, float]] | None = None,
                      checked_dirs: list[str] | None = None,
                      import_ns: float = math.nan,
                      bounded_unit: str = "progress report",
                      runs_import_rlscope: bool = False,
                      root_imports_rlscope: bool = False,
                      unlike_work: str = "") -> Calibration:
    """Mode "model": the cost model, checked by the profiled run (``cpu_s``: its process
    tree's CPU time, ``wall_s``; ``installs_s``: the CPU its processes recorded setting
    up interception and in rlscope's own threads) against runs without rlscope
    (``unrecorded``). A long run's check (``bounded``: the progress report, or the
    ``bounded_unit``, its runs ended at): ``checked`` runs with rlscope (their samples
    with their events, and installs) each paired with the ``unrecorded`` one of the same
    index. ``runs_import_rlscope``: the runs without rlscope imported it (a work bound
    the user set, RLSCOPE_MAX_PROGRESS, is rlscope's code), so their check does not
    charge that import; ``root_imports_rlscope``: their main process did (it counted its
    work, RLSCOPE_WORK_TALLY), so the check does not charge the profiled one's.
    ``unlike_work``: why the runs without rlscope did other work than the profiled run
    (then there is no check: the correction is withheld, and the report says why)."""
    costs = model_costs(mb, startup_ns, startup_err_ns, counts, import_ns)

    def removed_s(events: dict[str, int], installs: float) -> float:
        return installs + sum(c.per_event_ns * events.get(k, 0)
                              for k, c in costs.items()) / 1e9

    removed = removed_s(counts, installs_s)
    u = np.array([s.seconds for s in unrecorded])
    uw = np.array([s.wall_s for s in unrecorded])
    mean = float(u.mean()) if len(u) else math.nan
    unin: dict[str, Any] = {
        "mean_s": mean, "std_s": float(u.std(ddof=1)) if len(u) > 1 else 0.0,
        "median_s": float(np.median(u)) if len(u) else math.nan,
        "min_s": float(u.min()) if len(u) else math.nan,
        "max_s": float(u.max()) if len(u) else math.nan, "n": len(u),
        "wall_mean_s": float(uw.mean()) if len(uw) else math.nan}
    if bounded is not None and checked:
        prof = np.array([s.seconds for s, _ in checked])
        corr = prof - np.array([removed_s(s.counts, i) for s, i in checked])
        errs = [100.0 * (c / x - 1.0) for c, x in zip(corr, u, strict=True) if x > 0]
        raw_errs = [100.0 * (c / x - 1.0) for c, x in zip(prof, u, strict=True) if x > 0]
        unin.update(bounded_progress=bounded, bounded_unit=bounded_unit,
                    profiled_mean_s=float(prof.mean()),
                    corrected_mean_s=float(corr.mean()))
        corrected, raw = float(corr.mean()), float(prof.mean())
    else:
        imports = counts.get(RLSCOPE_IMPORT, 0)
        charged = 0 if runs_import_rlscope else \
            max(imports - 1, 0) if root_imports_rlscope else imports
        checked_removed = removed_s(dict(counts, **{RLSCOPE_IMPORT: charged}), installs_s)
        corrected, raw = cpu_s - checked_removed, cpu_s
        if runs_import_rlscope:
            unin["runs_import_rlscope"] = True
        elif root_imports_rlscope:
            unin["root_imports_rlscope"] = True
        errs = [100.0 * (corrected / x - 1.0) for x in u if x > 0]
        raw_errs = [100.0 * (cpu_s / x - 1.0) for x in u if x > 0]
    if unlike_work:  # nothing to check against
        errs, raw_errs, corrected, raw = [], [], math.nan, math.nan
    total = 100.0 * (corrected / mean - 1.0) if mean > 0 else math.nan
    raw_total = 100.0 * (raw / mean - 1.0) if mean > 0 else math.nan
    runs: list[dict[str, Any]] = [{"config": "full", "round": -1, "seconds": cpu_s,
                                   "wall_s": wall_s, "counts": counts,
                                   "directory": "."}]
    runs += [{"config": s.config, "round": s.round, "seconds": s.seconds,
              "wall_s": s.wall_s, "counts": s.counts, "directory": d}
             for (s, _i), d in zip(checked or [], checked_dirs or [], strict=True)]
    runs += [{"config": s.config, "round": s.round, "seconds": s.seconds,
              "wall_s": s.wall_s, "counts": {}, "directory": d}
             for s, d in zip(unrecorded, run_dirs, strict=True)]
    warnings = []
    noise = 100 * unin["std_s"] / mean if mean > 0 else 0.0
    if noise > WARN_NOISE_PCT:
        warnings.append(f"uninstrumented runs vary by {noise:.1f}% (std/mean): the machine "
                        "is noisy or the work per run is not fixed")
    return Calibration(
        command=list(command), costs=costs, machine=machine_info(), repetitions=len(u),
        configurations={"uninstrumented": {"record": "False"}, "full": {"record": "True"}},
        runs=runs, uninstrumented=unin,
        validation={"config": "full", "calibration_rounds": [],
                    "validation_rounds": [s.round for s in unrecorded],
                    "independent": True, "errors_pct": errs,
                    "median_error_pct": float(np.median(errs)) if errs else math.nan,
                    "max_abs_error_pct": float(np.max(np.abs(errs))) if errs else math.nan,
                    "raw_errors_pct": raw_errs, "total_error_pct": total,
                    "raw_total_error_pct": raw_total, "uninstrumented_total_s": mean,
                    "removed_s": removed, "installs_s": installs_s,
                    "outlier_rounds": [],
                    **({"unlike_work": unlike_work} if unlike_work else {})},
        microbenchmark=mb, warnings=warnings, metric="cpu", mode="model")
