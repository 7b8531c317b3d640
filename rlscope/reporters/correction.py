"""Report lines about overhead correction, from the ``correction`` entry that
:func:`rlscope.analysis.overhead.applied.apply_correction` puts in a trace's run dict."""

from __future__ import annotations

from typing import Any


def correction_lines(run: dict[str, Any], worst: dict[str, Any] | None = None) -> list[str]:
    """The report's lines about the correction (empty when no correction info);
    ``worst``: the operation rlscope inflated most (analysis.overhead.per_operation)."""
    c = run.get("correction")
    if not c:
        return []
    share = _share(c)
    if share and worst is not None:
        share += (f"; per operation at most {worst['overhead_pct']:.1f}% "
                  f"({worst['operation']})")
    if not c.get("applied") and c.get("withheld"):
        return [f"Overhead: not corrected, raw numbers shown{share}: {c['withheld']}"]
    if not c.get("applied"):
        return ["Overhead: not corrected (no calibration.json; record with rls-prof "
                "--calibrate, or reuse one with --calibration FILE)"]
    lines = [f"Overhead corrected: {c['removed_s']:.3f} s of rlscope book-keeping removed "
             f"from the main process{share} (--no-correct shows raw numbers)"]
    sources = c.get("cost_sources", {})
    costs = [f"{k} {_ns(v)} ({sources.get(k, '?')})"
             for k, v in c.get("costs_ns", {}).items()
             if k not in ("process", "rlscope_import")]
    if costs:
        lines.append("  costs per event: " + ", ".join(costs)
                     + " (rls-prof --calibrate printed why; calibration.json has them)")
    if "corrected_total_s" in c:
        what = ("CPU time of all processes" if c.get("metric") == "cpu"
                else "wall time of the main process")
        if c.get("bounded_progress"):
            at = c.get("bounded_at") or f"progress report {c['bounded_progress']}"
            what += f", in runs ended at {at} (with rlscope and without, in pairs)"
        lines.append(
            f"  total {what}: raw {c['raw_total_s']:.3f} s, corrected "
            f"{c['corrected_total_s']:.3f} s, "
            f"uninstrumented {c['uninstrumented_mean_s']:.3f} ± "
            f"{c['uninstrumented_std_s']:.3f} s (n={c['uninstrumented_n']}): "
            f"residual error {c['error_pct']:+.1f}% (raw {c['raw_error_pct']:+.1f}%)")
    if "corrected_wall_s" in c:
        lines.append(
            f"  wall time of the main process: raw {c['raw_wall_s']:.3f} s, corrected "
            f"{c['corrected_wall_s']:.3f} s, uninstrumented {c['uninstrumented_wall_s']:.3f} "
            f"s: residual error {c['wall_error_pct']:+.1f}% (raw "
            f"{c['raw_wall_error_pct']:+.1f}%; wall time moves with the machine's load)")
    if "speed_scale" in c:
        lines.append(f"  chunk costs scaled by {c['speed_scale']:.2f}: this run's speed vs the "
                     "calibration copies' over the same work (the machine's speed changes)")
    if "heldout_chunks" in c:
        lines.append(
            f"  calibration check: on {c['heldout_chunks']} held-out chunks (the same work "
            f"with and without rlscope, moments apart) the corrected time is "
            f"{c['heldout_error_pct']:+.1f}% off the uninstrumented time "
            f"(raw {c['heldout_raw_error_pct']:+.1f}%)")
    lines += [f"  warning: {w}" for w in c.get("warnings", [])]
    return lines


def _share(c: dict[str, Any]) -> str:
    """", rlscope took 2.1% of this run's CPU time (0.412 s, all processes)" or ""."""
    if "overhead_pct" not in c:
        return ""
    err = c.get("overhead_error_pct")
    bar = f" ± {err:.1f}%" if err is not None and err >= 0.05 else ""
    return (f"; rlscope's book-keeping took {c['overhead_pct']:.1f}%{bar} of this run's "
            f"CPU time ({c['removed_cpu_s']:.3f} s over all its processes, by the cost "
            "model)")


def _ns(v: float) -> str:
    """A cost per event: "43 ns", or "7.6 µs" from 10 µs (a pool task, a stack sample)."""
    return f"{v / 1e3:.1f} µs" if abs(v) >= 10_000 else f"{v:.0f} ns"
