"""Lines rls-prof prints about a calibration it made. By default, in plain words: what
rlscope's book-keeping costs on this workload (in all, and per kind of event), how sure
that is, and how well the correction checked out. With ``--verbose`` also the technical
detail: each kind's cost, where it came from and, when it differs from the hook's
tight-loop microbenchmark, why; then the held-out check."""

from __future__ import annotations

import math

from rlscope.analysis.overhead.kinds import MICROBENCHMARK_ONLY, in_situ_what
from rlscope.analysis.overhead.model import NOT_TIMED, Calibration, KindCost

_UNIT = {"annotation": "event", "backend_call": "call", "simulator_call": "call",
         "wait_call": "call", "env_call": "env step or reset", "cuda_api": "call",
         "gpu_activity": "record", "pool_task": "pool task", "pool_call": "submission",
         "py_sample": "Python stack sample",
         "phase_marker": "module forward or optimizer step",
         "passed_call": "call passed on"}


def _ns(v: float) -> str:
    return f"{v / 1e3:.1f} µs" if abs(v) >= 10_000 else f"{v:.0f} ns"


def _estimate(c: KindCost) -> str:
    err = "" if not math.isfinite(c.error_ns) else f" ± {_ns(c.error_ns)}"
    return f"{_ns(c.estimate_ns)}{err}"


def cost_line(kind: str, c: KindCost, measured: str) -> str:
    """One kind's cost in words: the value correction uses and why that value."""
    if kind == "process":
        return (f"  process: {c.per_event_ns / 1e6:.1f} ms per process (start-up and the "
                "final flush, outside the recorded span)")
    if kind == "rlscope_import":
        return (f"  rlscope_import: {c.per_event_ns / 1e6:.1f} ms per process whose script "
                "does not use rlscope itself (importing it, outside the recorded span)")
    head = f"  {kind}: {_ns(c.per_event_ns)} per {_UNIT.get(kind, 'event')}"
    if c.fallback == NOT_TIMED:
        return f"{head} ({c.note})"
    mb = c.microbenchmark_ns
    has_estimate = math.isfinite(c.estimate_ns)
    if c.source == "microbenchmark":
        if kind in MICROBENCHMARK_ONLY:
            what = in_situ_what(kind) if c.per_event_ns > mb > 0 or kind != "env_call" \
                else "tight-loop microbenchmark of the env wrappers"
            return head + f" ({what}: no calibration configuration separates their cost)"
        if not has_estimate:
            if c.per_event_ns > mb > 0:  # the in-situ figure (calibration.microbench)
                return head + (f" ({in_situ_what(kind)}; the tight loop gives "
                               f"{_ns(mb)}; not measured on this workload)")
            return head + " (tight-loop microbenchmark; not measured on this workload)"
        used = (f"{in_situ_what(kind)} is used (the tight loop gives {_ns(mb)})"
                if c.per_event_ns > mb > 0 else "the tight-loop microbenchmark is used")
        if c.fallback == "held-out":
            return (head + f": the {measured} gave {_estimate(c)}, but correcting with "
                    "that made the held-out rounds worse than not correcting (see the "
                    f"check below): {used}")
        if c.fallback == "confounded":
            return (head + f": the {measured} gave {_estimate(c)}, but its events came "
                    "with another kind's in every configuration, so any split of their "
                    f"cost fits: {used}")
        if c.estimate_ns < mb:
            return (head + f": the {measured} gave {_estimate(c)}, below the tight-loop "
                    f"microbenchmark, which is a lower bound: {used}")
        why = ("an error bar wider than the value" if math.isfinite(c.error_ns)
               else "no error bar: one calibrating round; --repetitions 3 or more")
        return (head + f": not resolved on this workload (the {measured} gave "
                f"{_estimate(c)}, {why}): {used}")
    err = f" ± {_ns(c.error_ns)}" if math.isfinite(c.error_ns) else ""
    line = f"  {kind}: {_ns(c.per_event_ns)}{err} per {_UNIT.get(kind, 'event')}, " \
        f"measured on the {measured}"
    at_event = c.per_event_ns - c.diffuse_ns
    split = (f"{_ns(c.inside_ns)} inside the interval it times, "
             f"{_ns(at_event - c.inside_ns)} around it") if at_event >= c.inside_ns else \
        (f"{_ns(c.inside_ns)} of its own code between its stamps taken out of the interval "
         f"it times, {_ns(c.inside_ns - at_event)} of that put back around it (it runs "
         "when nothing records too)")
    if not math.isfinite(mb) or mb <= 0:
        line += f" (paid at each {_UNIT.get(kind, 'event')}: {split})"
        if not math.isfinite(c.error_ns):
            line += ("; not resolved: no error bar from one calibrating round "
                     "(--repetitions 3 or more), a rough figure")
        elif c.error_ns >= abs(c.per_event_ns) > 0:
            line += "; not resolved: the error bar is wider than the value, a rough figure"
        return line
    if c.diffuse_ns > 0:
        return (line + f": {_ns(at_event)} paid at each {_UNIT.get(kind, 'event')} "
                f"(2x the tight-loop microbenchmark's {_ns(mb)}; {split}) and "
                f"{_ns(c.diffuse_ns)} spread over the run — recording at all slows the "
                "thread a little, in proportion to these events (the writer thread, cache "
                "and memory traffic), so it is removed as a uniform stretch")
    extra = c.per_event_ns - mb
    why = (f"the other {_ns(extra)} is the same hook inside this workload (cache and "
           "branch-prediction misses a tight loop does not pay)" if extra > 0.1 * mb
           else "the same")
    return (line + f"; the tight-loop microbenchmark gives {_ns(mb)}: {why}; paid at each "
            f"{_UNIT.get(kind, 'event')}: {split}")


# Each kind of book-keeping event, as a user knows it.
_WHAT = {"annotation": "an operation or phase beginning or ending",
         "backend_call": "a call into the ML backend (torch, tensorflow, jax, ...)",
         "simulator_call": "a call into the simulator (mujoco, box2d, ...)",
         "wait_call": "a blocking call (sleep, pipe or socket receive, lock, ...)",
         "env_call": "an env step or reset",
         "pool_task": "a pool task run in a worker process (receiving and recording it)",
         "pool_call": "a submission to a process pool (making and sending its task)",
         "py_sample": "a Python stack sample (the thread running Python pauses for it)",
         "phase_marker": "a module forward or optimizer step (the wrappers of its module "
                         "calls)",
         "passed_call": "a marked call inside its own open operation (a marked env's "
                        "step inside your `simulation`: its wrapper, nothing recorded)",
         "cuda_api": "a CUDA API call",
         "gpu_activity": "a GPU kernel, copy or memset recorded"}
_BENCHMARK = "from a benchmark of rlscope's hooks"
WARN_PCT = 5.0  # a held-out check further off is poor (calibration.build warns above it)
NOISE_PCT = 3.0  # runs without rlscope spread more: the machine or the work is noisy


def _time(ns: float) -> str:
    """A duration for the plain lines: "43 ns", "1.2 µs", "6.4 ms"."""
    if abs(ns) >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    return f"{ns / 1e3:.1f} µs" if abs(ns) >= 1000 else f"{ns:.0f} ns"


def _sure(c: KindCost) -> str:
    """How sure a measured cost is, in words."""
    if not math.isfinite(c.error_ns):
        return ("a rough figure: one round of runs gives no error margin "
                "(--repetitions 3 or more)")
    if c.error_ns >= abs(c.per_event_ns):
        return "a rough figure: the error margin is as large as the value"
    if 2 * c.error_ns > abs(c.per_event_ns):
        return f"± {_time(c.error_ns)}, within the noise"
    return f"± {_time(c.error_ns)}"


def plain_cost_line(kind: str, c: KindCost) -> str:
    """One kind's cost in plain words: per what, how much, measured or not, how sure."""
    if kind == "process":
        return (f"  each process: {_time(c.per_event_ns)}, at its start and exit "
                "(outside the time the report covers)")
    if kind == "rlscope_import":
        return (f"  each process whose script does not import rlscope itself: "
                f"{_time(c.per_event_ns)} more, importing it (outside the time the report "
                "covers)")
    head = f"  {_WHAT.get(kind, kind)}: {_time(c.per_event_ns)}"
    if c.fallback == NOT_TIMED:  # its note says why
        return f"{head} ({c.note})"
    if c.source == "microbenchmark":
        if kind in MICROBENCHMARK_ONLY:
            why = ("it cannot be measured apart from the simulation around it"
                   if kind == "env_call" else
                   "timed on a Python loop under the sampler" if kind == "py_sample" else
                   "timed on a small policy's forward" if kind == "phase_marker" else
                   "timed around CartPole's step" if kind == "passed_call" else
                   "timed on a small pool of this machine")
        elif not math.isfinite(c.estimate_ns):
            why = "not measured on this workload"
        elif c.fallback == "held-out":
            why = "the value measured on this workload failed the check below"
        elif c.estimate_ns < c.microbenchmark_ns:
            why = ("the workload's measurement came out lower, within its noise; a "
                   "hook costs at least this")
        else:
            why = "the workload's measurement was too noisy to use"
        return f"{head}, {_BENCHMARK} ({why})"
    line = f"{head}, measured on this workload ({_sure(c)})"
    if c.diffuse_ns > 0.5 * c.per_event_ns:
        line += ("; most of it is recording slowing the program down in general, so it "
                 "is removed evenly over the run rather than at each event")
    return line


def _share_pct(cal: Calibration) -> float:
    """The book-keeping's share of the workload's measured time: the costs times the
    events of the calibration's instrumented runs (or chunks), over the time of the same
    work without rlscope (nan when unknown)."""
    u = cal.uninstrumented
    base = u.get("chunk_mean_s", u.get("mean_s", math.nan))
    cost_ns = sum(c.per_event_ns * c.events for k, c in cal.costs.items()
                  if k not in ("process", "rlscope_import"))
    if cal.mode == "model":  # every process's: events, start-ups, set-up, own threads
        cost_ns = 1e9 * float(cal.validation.get("removed_s", math.nan))
        if u.get("bounded_progress"):  # the runs without rlscope did only part of it
            base = next((float(r["seconds"]) for r in cal.runs if r.get("round") == -1),
                        math.nan)
    return 100 * cost_ns / 1e9 / base if base and math.isfinite(base) and base > 0 \
        else math.nan


def _check_line(cal: Calibration) -> str | None:
    """The held-out check in words: how close the corrected time came to the same work
    run without rlscope."""
    v = cal.validation
    if not v.get("validation_rounds"):
        return None
    if cal.mode == "model":
        return _model_check_line(cal)
    if cal.mode == "chunks":
        err, raw = v["total_error_pct"], v["raw_total_error_pct"]
        where = (f"on {len(v['validation_rounds'])} chunks of work not used to measure "
                 "the costs")
        how = (f"the corrected time came out {abs(err):.1f}% "
               f"{'above' if err >= 0 else 'below'} the same work without rlscope "
               f"(uncorrected: {abs(raw):.1f}% {'above' if raw >= 0 else 'below'})")
        if abs(err) > abs(raw):
            how += ("; correcting did not bring it closer here: rlscope's cost on this "
                    "workload is within the measurement's noise")
        worst = abs(err)
    else:
        worst = v["max_abs_error_pct"]
        n = len(v["validation_rounds"])
        where = (f"on {n} whole run{'s' if n != 1 else ''} not used to measure the "
                 "costs")
        how = f"corrected times came within {worst:.1f}% of runs without rlscope"
    if worst <= 2:
        return f"  check (good): {where}, {how}"
    if worst <= WARN_PCT:
        return f"  check (fair): {where}, {how}"
    more = "--chunks" if cal.mode == "chunks" else "--repetitions"
    return (f"  check (poor): {where}, {how}; differences of a few percent in the report "
            "may be the correction's error. Calibrate again on a quieter machine, with "
            f"more {more}, and with the same work in every run (fixed seeds and steps, "
            "OMP_NUM_THREADS=1)")


def _model_check_line(cal: Calibration) -> str:
    """The cost model's check: the profiled run's CPU time (every process), corrected and
    raw, against whole runs of the command without rlscope."""
    v, u = cal.validation, cal.uninstrumented
    if v.get("unlike_work"):
        return (f"  check: none: {v['unlike_work']}; so rls-analyze shows raw numbers "
                "(make every run do the same work, or bound it with RLSCOPE_MAX_PROGRESS, "
                "and calibrate again)")
    err, raw = float(v["total_error_pct"]), float(v["raw_total_error_pct"])
    n = int(u.get("n", 0))
    spread = 100 * float(u.get("std_s", 0.0)) / float(u["mean_s"]) if n > 1 else math.nan
    noise = f"; those runs spread {spread:.1f}%" if math.isfinite(spread) else \
        "; one run: no measure of the machine's noise"
    point = cal.bound_point()
    head = (f"  check: the profiled run's CPU time (all processes), corrected, came out "
            f"{err:+.1f}% off {n} run{'s' if n != 1 else ''} of the command without "
            f"rlscope (uncorrected {raw:+.1f}%{noise})" if not point else
            f"  check: {n} pair{'s' if n != 1 else ''} of runs ended at {point}, "
            "with rlscope and without: the CPU time (all processes) with it, "
            f"corrected, came out {err:+.1f}% off the time without (uncorrected "
            f"{raw:+.1f}%{noise})")
    if abs(err) > abs(raw) + 0.05:
        return (head + ": correcting did not bring it closer, so rls-analyze shows raw "
                "numbers and says so")
    return head + ("" if abs(err) <= WARN_PCT else
                   ": runs of this command differ by more than rlscope's cost here")


def _noise_line(cal: Calibration) -> str | None:
    """Whole runs without rlscope that took different times: the comparison is noisy."""
    u = cal.uninstrumented
    if cal.mode == "chunks" or not u.get("mean_s") or u.get("n", 0) < 2:
        return None
    spread = 100 * u.get("std_s", 0.0) / u["mean_s"]
    if spread <= NOISE_PCT:
        return None
    return (f"  note: the runs without rlscope took times {spread:.1f}% apart (one standard "
            "deviation): the machine was busy or the command does not do the same work "
            "each time")


def plain_summary_lines(cal: Calibration) -> list[str]:
    """What rls-prof prints after calibrating, for everyone."""
    share = _share_pct(cal)
    lines = []
    if math.isfinite(share):
        about = f"about {share:.1f}%" if share >= 0.05 else "less than 0.1%"
        what = ("this run's CPU time (all its processes; its cost model: the hooks' "
                "benchmarks, start-ups, interception set-up, rlscope's own threads)"
                if cal.mode == "model" else "this workload's time")
        lines.append(f"  rlscope's book-keeping took {about} of {what}; rls-analyze "
                     "removes it from every number it reports (--no-correct shows them "
                     "raw)")
    lines.append("  what it costs, per event:")
    lines += ["  " + plain_cost_line(k, c) for k, c in cal.costs.items()]
    lines += [line for line in (_check_line(cal), _noise_line(cal)) if line]
    return lines


def summary_lines(cal: Calibration, verbose: bool = False) -> list[str]:
    """The plain lines; with ``verbose`` then the technical detail: how each cost was
    estimated, the held-out check and the calibration's warnings in its own terms."""
    lines = plain_summary_lines(cal)
    if verbose:
        return [*lines, "  detail:", *("  " + line for line in detail_lines(cal))]
    n = len(cal.warnings)
    warned = f", and {n} technical warning{'s' if n != 1 else ''}" if n else ""
    return [*lines, f"  (rls-prof --verbose also shows how each cost was estimated{warned})"]


def detail_lines(cal: Calibration) -> list[str]:
    """How each cost was estimated, in the terms of docs/overhead-correction.md."""
    chunks = cal.mode == "chunks"
    measured = "chunks" if chunks else "runs"
    how = ("jackknife over the calibration chunks" if chunks
           else "of the median over the rounds")
    lines = [f"  cost per book-keeping event (what the correction removes); ± is one "
             f"standard error ({how}):"]
    lines += ["  " + cost_line(k, c, measured) for k, c in cal.costs.items()]
    v = cal.validation
    if chunks and v.get("validation_rounds"):
        lines.append(f"  held-out check: on {len(v['validation_rounds'])} chunks the corrected "
                     f"time is {v['total_error_pct']:+.1f}% off the uninstrumented time "
                     f"(raw {v['raw_total_error_pct']:+.1f}%)")
    elif v.get("validation_rounds"):
        lines.append(f"  held-out check: corrected full runs within "
                     f"{v['max_abs_error_pct']:.1f}% of uninstrumented "
                     f"(median {v['median_error_pct']:+.1f}%)")
    lines += [f"  warning: {w}" for w in cal.warnings]
    return lines
