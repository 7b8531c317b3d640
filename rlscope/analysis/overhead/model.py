"""The calibration file (``DIR/calibration.json``): versioned JSON, reusable for later runs
of the same workload on the same machine (``rls-prof --calibration FILE``)."""

from __future__ import annotations

import json
import math
import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rlscope._version import __version__
from rlscope.errors import RLScopeError
from rlscope.trace import format as fmt

FILE_NAME = "calibration.json"
COST_MODEL_FILE = "costs.json"  # rls-prof's cost model of the run's machine (mode "model")
FORMAT = "rlscope-calibration"
VERSION = 1


# KindCost.fallback of a kind the run had too few events of for an in-situ timing to
# matter (rlscope.calibration.microbench.negligible).
NOT_TIMED = "not timed"


@dataclass
class KindCost:
    """Overhead of one book-keeping event of a kind, in ns.

    ``inside_ns`` of it lands inside the interval the event delimits (the operation or
    the intercepted call it times), the rest outside (in the enclosing scope, or, for
    the per-process cost, outside the recorded span). ``inside_ns`` may exceed
    ``per_event_ns`` (calibration.build.inside_part): the hook's code between its stamps
    is not the interval's, though most of it runs when nothing records too; the outside
    part is then negative, time moved from the interval to around it.
    """

    per_event_ns: float
    inside_ns: float
    error_ns: float  # nan: unknown (one round, or taken from a microbenchmark)
    source: str  # "runs" or "chunks" (+ " (inside part: microbenchmark)"), or
    # "microbenchmark" when those could not resolve the kind
    events: int = 0  # events of the kind in the calibration's full runs (median)
    note: str = ""
    # Part paid not at the event but spread over the thread's time (rlscope recording
    # at all slows the program a little; that scales with the events, not located at
    # them): removed as a uniform stretch of the thread's timeline.
    diffuse_ns: float = 0.0
    # What the runs/chunks estimated (before the rules above) and the tight-loop
    # microbenchmark of the hook (nan: none), so a report can explain the cost used.
    estimate_ns: float = math.nan
    microbenchmark_ns: float = math.nan
    # Why the microbenchmark replaced the estimate, when it did and the reason is not
    # read off the numbers: "held-out" (correcting with the estimate made the held-out
    # rounds worse than not correcting), "confounded" (its events came with another
    # kind's in every configuration), "not timed" (the run had too few events of it for
    # an in-situ timing to matter: the tight loop's figure, or nothing, with the note
    # saying how much they could cost at most). "" otherwise.
    fallback: str = ""

    @property
    def outside_ns(self) -> float:
        return self.per_event_ns - self.inside_ns - self.diffuse_ns


@dataclass
class Calibration:
    command: list[str]
    costs: dict[str, KindCost]
    machine: dict[str, Any] = field(default_factory=dict)
    repetitions: int = 0
    configurations: dict[str, dict[str, str]] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)
    uninstrumented: dict[str, Any] = field(default_factory=dict)  # mean_s, std_s, n...
    validation: dict[str, Any] = field(default_factory=dict)
    microbenchmark: dict[str, dict[str, float]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    metric: str = "cpu"  # times compared: "cpu" (process-tree CPU s), "wall", or
    # "thread-cpu" (the main thread's CPU s over a chunk)
    mode: str = "runs"  # "runs" (whole runs) or "chunks" (paired chunks, one process)
    rlscope_version: str = __version__

    def cost_table(self) -> dict[str, KindCost]:
        return self.costs

    def bound_point(self) -> str:
        """Where a long run's check ended its pairs of runs ("progress report 21",
        "optimizer step 40"), or "" (checked on whole runs)."""
        n = self.uninstrumented.get("bounded_progress")
        if not n:
            return ""
        unit = self.uninstrumented.get("bounded_unit") or "progress report"
        return f"{unit} {int(n)}"


def machine_info() -> dict[str, Any]:
    return {"host": fmt.host_name(), "platform": platform.platform(),
            "machine": platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version()}


def _clean(v: Any) -> Any:
    """JSON has no NaN: write null."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return v


def write_calibration(cal: Calibration, path: str | os.PathLike[str]) -> None:
    d = _clean(asdict(cal))
    d = {"format": FORMAT, "version": VERSION, **d}
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(d, indent=2) + "\n")
    os.replace(tmp, p)


def read_calibration(path: str | os.PathLike[str]) -> Calibration:
    p = Path(path)
    try:
        d = json.loads(p.read_text())
    except OSError as e:
        raise RLScopeError(f"cannot read calibration file {p}: {e.strerror}") from None
    except ValueError as e:
        raise RLScopeError(f"calibration file {p} is not valid JSON ({e}); re-run "
                           "rls-prof --calibrate") from None
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise RLScopeError(f"{p} is not an rlscope calibration file")
    if d.get("version") != VERSION:
        raise RLScopeError(f"{p} has calibration format version {d.get('version')}, this "
                           f"rlscope reads version {VERSION}; re-run rls-prof --calibrate")
    costs = {}
    for k, c in d.get("costs", {}).items():
        costs[k] = KindCost(
            float(c["per_event_ns"]), float(c.get("inside_ns") or 0.0),
            math.nan if c.get("error_ns") is None else float(c["error_ns"]),
            str(c.get("source", "")), int(c.get("events", 0)), str(c.get("note", "")),
            float(c.get("diffuse_ns") or 0.0), _float(c.get("estimate_ns")),
            _float(c.get("microbenchmark_ns")), str(c.get("fallback") or ""))
    known = {"command", "machine", "repetitions", "configurations", "runs",
             "uninstrumented", "validation", "microbenchmark", "warnings",
             "rlscope_version", "metric", "mode"}
    rest = {k: v for k, v in d.items() if k in known}
    rest.setdefault("command", [])
    return Calibration(costs=costs, **rest)


def _float(v: Any) -> float:
    return math.nan if v is None else float(v)


def find_calibration(directory: str | os.PathLike[str]) -> Calibration | None:
    """The calibration stored in a trace directory (``calibration.json``; else the cost
    model rls-prof measured after the run, ``costs.json``, unchecked), or None."""
    for name in (FILE_NAME, COST_MODEL_FILE):
        p = Path(directory) / name
        if p.exists():
            return read_calibration(p)
    return None
