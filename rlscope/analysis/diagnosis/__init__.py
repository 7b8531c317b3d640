"""What limits this run: run-level verdicts (``run``), per-operation verdicts
(``operations``) and GPU findings (``gpu``); rules and thresholds in docs/analysis.md."""

from rlscope.analysis.diagnosis.actors import actor_verdicts
from rlscope.analysis.diagnosis.gpu import GpuFinding, gpu_findings
from rlscope.analysis.diagnosis.operations import Verdict, diagnose
from rlscope.analysis.diagnosis.run import (
    RunVerdict,
    diagnose_run,
    refine,
    run_cores,
    run_wall,
)

__all__ = ["GpuFinding", "RunVerdict", "Verdict", "actor_verdicts", "diagnose",
           "diagnose_run", "gpu_findings", "refine", "run_cores", "run_wall"]
