"""The report's closing section: what limits the run (rlscope.analysis.diagnosis)."""

from __future__ import annotations

from typing import Any

from rlscope.analysis.diagnosis import GpuFinding, RunVerdict, Verdict
from rlscope.reporters.section import Section
from rlscope.reporters.units import s as _s


def gpu_lines(findings: list[GpuFinding]) -> list[str]:
    """The sampled-utilisation warning, one per process whose GPU NVML overstates; with
    NVML GPM metrics, the three views side by side (NVML busy, SMs active, kernels)."""
    out = []
    for f in findings:
        x = "∞" if f.overstated_x == float("inf") else f"{f.overstated_x:.0f}"
        if f.sm_active_pct is not None:
            out.append(f"  the GPU of {f.process} (pid {f.pid}, device {f.devices}) is not "
                       f"what limits it: NVML (what nvidia-smi shows) reads "
                       f"{f.sampled_busy_pct:.0f}% busy ({f.samples} samples, mean "
                       f"utilisation {f.sampled_util_pct:.0f}%); SMs were active "
                       f"{f.sm_active_pct:.1f}% of the time (occupancy "
                       f"{f.sm_occupancy_pct or 0.0:.1f}%, NVML GPM, {f.gpm_samples} samples); "
                       f"kernels and copies covered {f.gpu_pct:.1f}% ({_s(f.gpu_s)}), {x}x "
                       "less than NVML's busy: NVML counts a sample period busy when any "
                       "kernel ran in it"
                       + (f", device-wide ({f.sharing} other process(es) of this run used it "
                          "too)" if f.sharing else "")
                       + "; the CPU-side limits are the ones to act on")
            continue
        out.append(f"  the GPU of {f.process} (pid {f.pid}, device {f.devices}) is not what "
                   f"limits it: NVML (what nvidia-smi shows) read it busy in "
                   f"{f.sampled_busy_pct:.0f}% of {f.samples} samples (mean utilisation "
                   f"{f.sampled_util_pct:.0f}%), yet its kernels and copies filled "
                   f"{f.gpu_pct:.1f}% of the time ({_s(f.gpu_s)}), {x}x less: NVML counts a "
                   "sample period busy when any kernel ran in it"
                   + (f", device-wide ({f.sharing} other process(es) of this run used it "
                      "too)" if f.sharing else "")
                   + "; the CPU-side limits are the ones to act on")
    return out


def run_lines(run_verdicts: list[RunVerdict]) -> list[str]:
    """The run-level verdicts, numbered: per-step costs by their bound, then start-up."""
    out = []
    for i, r in enumerate(run_verdicts, 1):
        out.append(f"  {i}. {r.verdict}")
        out += [f"     evidence: {e}" for e in r.evidence]
        out.append(f"     remedy: {r.remedy}")
        out.append(f"     saves at most {_s(r.bound_s)} ({100 * r.bound_share:.0f}% of the "
                   f"run's wall time): {r.bound_of}"
                   + ("" if r.recurring else "; paid once, it does not grow with the run"))
    return out


def lines(verdicts: list[Verdict], findings: list[GpuFinding] | None = None,
          run_verdicts: list[RunVerdict] | None = None) -> list[str]:
    gpu = gpu_lines(findings or [])
    run = run_lines(run_verdicts or [])
    if not verdicts and not gpu and not run:
        return []
    out = ["What limits this run (from the tables above; thresholds in docs/analysis.md)"]
    out += run
    if run and verdicts:
        out.append("  Per operation:")
    out += gpu
    for v in verdicts:
        where = f"{v.operation} in {v.process} (pid {v.pid}): {_s(v.wall_s)}, " \
            f"{100 * v.process_share:.1f}% of the process"
        if v.bound is None:
            out.append(f"  {where}: balanced, no single limit ({v.evidence[0]})")
            continue
        out.append(f"  {where}: bound by {v.bound}")
        out.append(f"    evidence: {'; '.join(v.evidence)}")
        share_p = v.max_saving_s / v.wall_s * v.process_share if v.wall_s > 0 else 0.0
        out.append(f"    remedy: {v.remedy}")
        out.append(f"    saves at most {_s(v.max_saving_s)}, {v.saving_of} "
                   f"({100 * v.max_saving_share:.0f}% of the operation, "
                   f"{100 * share_p:.0f}% of the process)")
    return out


def to_list(verdicts: list[Verdict]) -> list[dict[str, Any]]:
    return [v.to_dict() for v in verdicts]


def gpu_to_list(findings: list[GpuFinding]) -> list[dict[str, Any]]:
    return [f.to_dict() for f in findings]


def section(verdicts: list[Verdict], findings: list[GpuFinding],
            run_verdicts: list[RunVerdict] | None = None) -> Section:
    """What limits the run, closing a report (rlscope.reporters.section): the run-level
    verdicts first (JSON: run_diagnosis), then the per-operation ones."""
    rv = run_verdicts or []
    return Section("diagnosis", lambda: {"run_diagnosis": [r.to_dict() for r in rv],
                                         "diagnosis": to_list(verdicts),
                                         "gpu_findings": gpu_to_list(findings)},
                   lambda: "\n".join(lines(verdicts, findings, rv)), merge=True)
