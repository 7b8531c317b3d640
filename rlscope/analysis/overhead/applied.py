"""Applying a run's calibration (overhead.correction does the shifting) and what the
report says about it: the costs scaled by the run's speed, the corrected totals beside
the calibration's runs without rlscope, and why a correction is withheld (its own check
could not show that correcting helps: the report then stays raw)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from rlscope.analysis.overhead.correction import CorrectionSummary, correct_trace
from rlscope.analysis.overhead.kinds import PY_SAMPLE
from rlscope.analysis.overhead.model import Calibration, KindCost
from rlscope.trace.argv import shell_line
from rlscope.trace.data import Trace
from rlscope.trace.pystacks_reader import sample_times, stack_files

WARN_PCT = 5.0


def apply_correction(trace: Trace, calibration: Calibration | None = None) -> Trace:
    """``trace`` corrected with its directory's calibration.json (or ``calibration``).

    The returned trace's ``run`` dict carries a ``"correction"`` entry: what was removed
    and the validation against the calibration's uninstrumented runs (reporters show it).
    Without a calibration the trace is returned unchanged, marked as not corrected.
    """
    if calibration is None and trace.directory is not None:
        from rlscope.analysis.overhead.model import find_calibration

        calibration = find_calibration(trace.directory)
    if calibration is None:
        run = dict(trace.run, correction={"applied": False})
        return dataclasses.replace(trace, run=run)
    root = trace.processes[0].progress.time_ns if trace.processes else None
    costs, scale = scaled_costs(calibration, root)
    # The stack files are read only where the calibration prices their samples.
    sampled = with_py_samples(trace) if PY_SAMPLE in costs else trace
    corrected, summary = correct_trace(sampled, costs)
    if withheld_reason(calibration):
        info = withheld_entry(calibration, trace.run, summary)
        return dataclasses.replace(trace, run=dict(trace.run, correction=info))
    info = correction_entry(trace.run, calibration, summary, scale)
    return dataclasses.replace(corrected, run=dict(trace.run, correction=info))


def with_py_samples(trace: Trace) -> Trace:
    """``trace`` with each process's Python stack sample times (its stack files beside
    its trace file; kinds.PY_SAMPLE), where its directory has them."""
    if trace.directory is None:
        return trace
    found: dict[tuple[Path, int], list[np.ndarray]] = {}
    for f in stack_files(trace.directory):
        try:
            pid, times = sample_times(f)
        except OSError:
            continue
        found.setdefault((f.parent, pid), []).append(times)
    if not found:
        return trace
    procs = []
    for p in trace.processes:
        parts = found.get((p.path.parent, p.pid))
        procs.append(p if not parts else
                     dataclasses.replace(p, py_samples=np.sort(np.concatenate(parts))))
    return dataclasses.replace(trace, processes=procs)


def withheld_reason(cal: Calibration) -> str:
    """Why the calibration's own check cannot show that correcting helps ("" when it
    does): the corrected time of its held-out chunks, rounds or profiled run came out
    further from the same work without rlscope than the raw time. The report then shows
    raw numbers and says so: a correction must never make a report worse."""
    v = cal.validation
    if cal.mode == "model" and not v.get("validation_rounds"):
        return ("rlscope's cost model (measured by rls-prof on this machine) has not been "
                "checked against runs without rlscope; rls-prof --calibrate checks it, "
                "and then the report is corrected")
    if v.get("unlike_work"):
        return (f"the calibration could not check it: {v['unlike_work']}; make every "
                "run do the same work (fixed seeds and step counts) or bound it "
                "(RLSCOPE_MAX_PROGRESS), then calibrate again")
    c, r = _num(v.get("total_error_pct")), _num(v.get("raw_total_error_pct"))
    if not (math.isfinite(c) and math.isfinite(r)) or abs(c) <= abs(r) + 0.05:
        return ""
    what = {"chunks": "held-out chunks", "runs": "held-out runs",
            "model": "the profiled run"}.get(cal.mode, "the check")
    where = f"({what} against the same work without rlscope)"
    point = cal.bound_point()
    if cal.mode == "model" and point:
        where = f"in runs ended at {point} (with rlscope and without, in pairs),"
    return (f"on the calibration's check {where} correcting left the time {c:+.1f}% off, "
            f"further than the raw {r:+.1f}%: rlscope's cost here is below what this "
            "machine resolves")


def withheld_entry(cal: Calibration, run: dict | None = None,
                   summary: CorrectionSummary | None = None) -> dict:
    """The ``correction`` entry of a run whose calibration is not applied (its check
    failed, or there was none), with what it would have removed when known."""
    out: dict = {"applied": False, "withheld": withheld_reason(cal), "mode": cal.mode,
                 "metric": cal.metric}
    # The unchecked cost model's share is its best figure; costs that failed their own
    # check give none worth showing.
    if cal.mode == "model" and not cal.validation.get("validation_rounds"):
        out["costs_ns"] = {k: round(c.per_event_ns, 1) for k, c in cal.costs.items()}
        if summary is not None:
            out.update(overhead_share(run or {}, summary))
    return out


def overhead_share(run: dict, summary: CorrectionSummary) -> dict:
    """rlscope's book-keeping in this run by the cost model: CPU seconds over every
    process, and their share of the run's CPU time without them (run.json's cpu_s)."""
    removed = summary.tree_overhead_s()
    out: dict = {"removed_cpu_s": removed, "removed_cpu_error_s": summary.tree_error_s()}
    cpu = run.get("cpu_s")
    if cpu is not None and float(cpu) - removed > 0:
        out["overhead_pct"] = 100.0 * removed / (float(cpu) - removed)
        out["overhead_error_pct"] = 100.0 * summary.tree_error_s() / (float(cpu) - removed)
    return out


def scaled_costs(cal: Calibration, root_progress_ns: np.ndarray | None
                 ) -> tuple[dict[str, KindCost], float | None]:
    """The costs to remove from every process of a run, scaled by the run's speed
    (:func:`speed_scale`, from the root process's progress times), and the scale. Each
    process is then corrected on its own (rls-analyze --jobs/--ray do it in parallel)."""
    scale = speed_scale_of(root_progress_ns, cal)
    costs = cal.costs if scale is None else {
        k: dataclasses.replace(c, per_event_ns=c.per_event_ns * scale,
                               inside_ns=c.inside_ns * scale, diffuse_ns=c.diffuse_ns * scale)
        for k, c in cal.costs.items()}
    return costs, scale


def correction_entry(run: dict, cal: Calibration, summary: CorrectionSummary,
                     scale: float | None) -> dict:
    """The ``correction`` entry of a corrected run's dict (what the report shows)."""
    info = validation(run, cal, summary)
    if scale is not None:
        info["speed_scale"] = scale
    return info


SCALE_LIMITS = (0.25, 4.0)


def speed_scale(trace: Trace, cal: Calibration) -> float | None:
    """How fast this run went, relative to the chunk calibration's copies, over the same
    work: the root process's time between the progress reports each chunk spanned,
    summed, over the full copies' times of those chunks. The machine's speed changes
    (up to 2x here), and book-keeping costs in ns change with it, so chunk costs are
    scaled by this before they are removed. None: not a chunk calibration, or no
    progress reports to match."""
    return speed_scale_of(trace.processes[0].progress.time_ns if trace.processes else None,
                          cal)


def speed_scale_of(pt: np.ndarray | None, cal: Calibration) -> float | None:
    """:func:`speed_scale` from the root process's progress times."""
    if cal.mode != "chunks" or pt is None:
        return None
    full = sorted((int(r["round"]), int(r.get("boundaries", 0)), float(r["seconds"]))
                  for r in cal.runs if r.get("config") == "full")
    start, run_s, copies_s = 0, 0.0, 0.0
    for _chunk, k, seconds in full:
        if k <= 0 or start + k >= len(pt):
            break
        run_s += (int(pt[start + k]) - int(pt[start])) / 1e9
        copies_s += seconds
        start += k
    if not (run_s > 0 and copies_s > 0):
        return None
    return min(max(run_s / copies_s, SCALE_LIMITS[0]), SCALE_LIMITS[1])


def validation(run: dict, cal: Calibration, summary: CorrectionSummary) -> dict:
    """Corrected total of the run beside the uninstrumented runs of the calibration."""
    info: dict = {"applied": True, "metric": cal.metric, "mode": cal.mode,
                  "costs_ns": {k: round(c.per_event_ns, 1) for k, c in cal.costs.items()},
                  "cost_sources": {k: _source(c) for k, c in cal.costs.items()},
                  "removed_s": summary.run_overhead_s(),
                  **overhead_share(run, summary), "warnings": []}
    # Like for like: the whole tree's CPU time (run.json's cpu_s, and the calibration
    # runs', both with the command's orphans reaped) less what was removed from every
    # process; the wall time less what was removed from the root's main thread.
    cpu = cal.metric == "cpu"
    raw = run.get("cpu_s") if cpu else run.get("duration_s")
    u = cal.uninstrumented
    bounded = u.get("bounded_progress")
    if bounded and u.get("n"):
        # A long run checked on pairs of runs ended at one progress report: the pairs'
        # means, like for like (the whole run had no run without rlscope to match).
        raw, corrected = float(u["profiled_mean_s"]), float(u["corrected_mean_s"])
        info["bounded_progress"] = int(bounded)
        info["bounded_at"] = cal.bound_point()
    elif raw is not None and u.get("n"):
        corrected = float(raw) - (summary.tree_overhead_s() if cpu
                                  else summary.run_overhead_s())
        if cpu and u.get("runs_import_rlscope"):  # a work bound's runs import it too
            corrected += summary.tree_import_s()
        elif cpu and u.get("root_imports_rlscope"):  # their main process counted its work
            corrected += summary.root_import_s()
    if raw is not None and u.get("n"):
        mean = float(u["mean_s"])
        err = 100.0 * (corrected / mean - 1.0) if mean > 0 else math.nan
        info.update(raw_total_s=float(raw), corrected_total_s=corrected,
                    uninstrumented_mean_s=mean, uninstrumented_std_s=float(u.get("std_s", 0)),
                    uninstrumented_n=int(u["n"]), error_pct=err,
                    raw_error_pct=100.0 * (float(raw) / mean - 1.0) if mean > 0 else math.nan)
        # The command's own wall time, like the runs without rlscope (not the launcher's
        # wait for its orphans after it).
        wall, u_wall = run.get("command_wall_s", run.get("duration_s")), \
            _num(u.get("wall_mean_s"))
        if cpu and wall is not None and u_wall > 0 and not bounded:
            w = float(wall) - summary.run_overhead_s()
            info.update(raw_wall_s=float(wall), corrected_wall_s=w,
                        uninstrumented_wall_s=u_wall,
                        wall_error_pct=100.0 * (w / u_wall - 1.0),
                        raw_wall_error_pct=100.0 * (float(wall) / u_wall - 1.0))
        if abs(err) > WARN_PCT:
            info["warnings"].append(
                f"corrected total is {err:+.1f}% off the uninstrumented runs; make every run "
                "do the same work (fixed seeds and steps, RLSCOPE_MAX_PROGRESS), pin threads "
                "(OMP_NUM_THREADS=1) and re-run rls-prof --calibrate with more --repetitions")
    v = cal.validation
    if cal.mode == "chunks" and v.get("validation_rounds"):
        info.update(heldout_chunks=len(v["validation_rounds"]),
                    heldout_error_pct=_num(v.get("total_error_pct")),
                    heldout_raw_error_pct=_num(v.get("raw_total_error_pct")))
        if abs(info["heldout_error_pct"]) > WARN_PCT:
            info["warnings"].append(
                f"on held-out chunks the corrected time is {info['heldout_error_pct']:+.1f}% "
                "off the uninstrumented time; re-run rls-prof --calibrate on a quieter "
                "machine, with more --chunks")
    noise = 100.0 * float(u.get("std_s", 0)) / max(float(u.get("mean_s", 0)), 1e-9)
    if noise > WARN_PCT or (cal.warnings and cal.mode != "chunks"):
        info["warnings"].append(
            "calibration is noisy (" + "; ".join(cal.warnings or [f"runs vary {noise:.1f}%"])
            + "); the correction is unreliable: re-run rls-prof --calibrate on a quiet "
            "machine with more --repetitions")
    if summary.ray_waits():
        info["warnings"].append(
            f"{summary.ray_waits():,} waits in ray.get/ray.wait are not shortened by what "
            "rlscope cost the Ray workers they waited on (waits of actors on other actors, "
            "or on workers that recorded no calls): operations that wait there keep that "
            "share")
    if summary.pool_tasks():
        info["warnings"].append(
            f"{summary.pool_tasks():,} pool tasks: this calibration has no price for "
            "rlscope's own work per task (making, sending and recording each one), so the "
            "waits for their results keep it: a pool of short tasks reads slower than it "
            "is; re-run rls-prof --calibrate (docs/overhead-correction.md)")
    if cal.command and run.get("command") and list(run["command"]) != list(cal.command):
        info["warnings"].append("the calibration was made for another command ("
                                + shell_line(cal.command, 120) + "); costs may not transfer")
    return info


def _source(c: KindCost) -> str:
    """Where a cost came from, in a few words (the report's costs line)."""
    if c.source != "microbenchmark":
        return "measured" + (", partly diffuse" if c.diffuse_ns > 0 else "")
    if c.fallback == "held-out":
        return "microbenchmark: the estimate failed the held-out check"
    if math.isfinite(c.estimate_ns) and c.estimate_ns < c.per_event_ns:
        return "microbenchmark: the estimate was below it"
    if math.isfinite(c.estimate_ns):
        return "microbenchmark: not resolved on this workload"
    if c.per_event_ns > c.microbenchmark_ns > 0:
        return "microbenchmark, in situ"
    return "microbenchmark"


def _num(v: object) -> float:
    return math.nan if v is None else float(v)  # type: ignore[arg-type]
