"""The report's closing section: what limits the run (rlscope.analysis.diagnosis)."""

from __future__ import annotations

from typing import Any

from rlscope.analysis.diagnosis import Verdict


def _s(v: float) -> str:
    return f"{v:.3f} s" if v >= 0.01 else f"{1e3 * v:.2f} ms"


def lines(verdicts: list[Verdict]) -> list[str]:
    if not verdicts:
        return []
    out = ["What limits this run (from the tables above; thresholds in docs/analysis.md)"]
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
