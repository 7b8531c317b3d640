"""Lines rls-prof prints about a calibration it made: each kind's cost, where it came
from and, when it differs from the hook's tight-loop microbenchmark, why; then the
held-out check."""

from __future__ import annotations

import math

from rlscope.analysis.overhead.kinds import MICROBENCHMARK_ONLY
from rlscope.analysis.overhead.model import Calibration, KindCost

_UNIT = {"annotation": "event", "backend_call": "call", "simulator_call": "call",
         "wait_call": "call", "env_call": "env step or reset", "cuda_api": "call",
         "gpu_activity": "record"}


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
    head = f"  {kind}: {_ns(c.per_event_ns)} per {_UNIT.get(kind, 'event')}"
    mb = c.microbenchmark_ns
    has_estimate = math.isfinite(c.estimate_ns)
    if c.source == "microbenchmark":
        if kind in MICROBENCHMARK_ONLY:
            return (head + " (tight-loop microbenchmark of the env wrappers: no "
                    "calibration configuration separates their cost)")
        if not has_estimate:
            return head + " (tight-loop microbenchmark; not measured on this workload)"
        if c.fallback == "held-out":
            return (head + f": the {measured} gave {_estimate(c)}, but correcting with "
                    "that made the held-out rounds worse than not correcting (see the "
                    "check below): the tight-loop microbenchmark is used")
        if c.estimate_ns < c.per_event_ns:
            return (head + f": the {measured} gave {_estimate(c)}, below the tight-loop "
                    "microbenchmark, which is a lower bound: the microbenchmark is used")
        why = ("an error bar wider than the value" if math.isfinite(c.error_ns)
               else "no error bar: one calibrating round; --repetitions 3 or more")
        return (head + f": not resolved on this workload (the {measured} gave "
                f"{_estimate(c)}, {why}): the tight-loop microbenchmark is used")
    err = f" ± {_ns(c.error_ns)}" if math.isfinite(c.error_ns) else ""
    line = f"  {kind}: {_ns(c.per_event_ns)}{err} per {_UNIT.get(kind, 'event')}, " \
        f"measured on the {measured}"
    at_event = c.per_event_ns - c.diffuse_ns
    split = (f"{_ns(c.inside_ns)} inside the interval it times, "
             f"{_ns(at_event - c.inside_ns)} around it")
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


def summary_lines(cal: Calibration) -> list[str]:
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
