"""Lines rls-prof prints about a calibration it made (costs per kind and the held-out
check)."""

from __future__ import annotations

from rlscope.analysis.overhead.model import Calibration


def summary_lines(cal: Calibration) -> list[str]:
    lines = []
    for k, c in cal.costs.items():
        err = "" if c.error_ns != c.error_ns else f" ± {c.error_ns:.0f}"
        unit = f"{c.per_event_ns / 1e6:.1f} ms" if k == "process" else \
            f"{c.per_event_ns:.0f}{err} ns"
        mb = cal.microbenchmark.get(k, {}).get("per_event_ns")
        check = f"; tight-loop microbenchmark {mb:.0f} ns" if mb and c.source != \
            "microbenchmark" else ""
        lines.append(f"  {k}: {unit} per event ({c.source}{check})")
    v = cal.validation
    if cal.mode == "chunks" and v.get("validation_rounds"):
        lines.append(f"  held-out check: on {len(v['validation_rounds'])} chunks the corrected "
                     f"time is {v['total_error_pct']:+.1f}% off the uninstrumented time "
                     f"(raw {v['raw_total_error_pct']:+.1f}%)")
    elif v.get("validation_rounds"):
        lines.append(f"  held-out check: corrected full runs within "
                     f"{v['max_abs_error_pct']:.1f}% of uninstrumented "
                     f"(median {v['median_error_pct']:+.1f}%)")
    lines += [f"  warning: {w}" for w in cal.warnings]
    return lines
