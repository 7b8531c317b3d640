"""rlscope's cost model of the machine a run used, measured by rls-prof right after the
run (issue 22: a few seconds, not a workload calibration): the hooks' microbenchmarks
(per event, with the part inside the timed interval) and rlscope's start-up in a Python
process (model_check.startup_cost_ns), written to ``DIR/costs.json`` as an unchecked
calibration (mode "model", no validation). rls-analyze reports rlscope's overhead from
it; it corrects only once ``rls-prof --calibrate`` has checked the model against runs
without rlscope."""

from __future__ import annotations

import math
import time
from pathlib import Path

from rlscope.analysis.overhead.model import (
    COST_MODEL_FILE,
    Calibration,
    machine_info,
    write_calibration,
)
from rlscope.calibration.build import model_costs
from rlscope.calibration.calibrate import microbenchmark
from rlscope.calibration.model_check import ran_pool_tasks, startup_cost_ns, took_py_samples
from rlscope.calibration.runner import Status
from rlscope.launch.child_env import Recording

MIN_RUN_S = 10.0  # shorter runs: the model would take a large share of the run's time


def measure(command: list[str], out: Path, rec: Recording,
            status: Status | None = None) -> tuple[Calibration | None, float]:
    """(the cost model written to ``out/costs.json``, or None if the benchmark failed;
    seconds it took)."""
    t0 = time.monotonic()
    mb = microbenchmark(rec.recorder, status, ran_pool_tasks(out), took_py_samples(out))
    if mb is None:
        return None, time.monotonic() - t0
    startup = startup_cost_ns(rec, status)
    cal = Calibration(list(command),
                      model_costs(mb, startup.ns, startup.spread_ns,
                                  import_ns=startup.import_ns),
                      machine_info(), microbenchmark=mb, metric="cpu", mode="model",
                      warnings=[] if math.isfinite(startup.ns) else
                      ["rlscope's start-up in a Python process could not be timed"])
    write_calibration(cal, out / COST_MODEL_FILE)
    return cal, time.monotonic() - t0


def summary(cal: Calibration) -> str:
    """The model in a few words: "an annotation 54 ns, a wrapped call 85 ns, ..."."""
    words = {"annotation": "an annotation", "backend_call": "a wrapped call",
             "env_call": "an env step", "process": "a process's start-up"}
    parts = []
    for kind, what in words.items():
        c = cal.costs.get(kind)
        if c is not None:
            ns = c.per_event_ns
            parts.append(f"{what} {ns / 1e6:.0f} ms" if ns >= 1e6 else
                         f"{what} {ns / 1e3:.1f} µs" if ns >= 1e4 else f"{what} {ns:.0f} ns")
    return ", ".join(parts)
