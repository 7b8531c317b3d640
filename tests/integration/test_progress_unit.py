"""``rlscope.report_progress(i, n, unit="episodes")``: the unit is kept in the trace (as
process metadata, the binary progress record unchanged) and every report says it: the text
report's progress line and rate, the JSON report's extrapolation, the timeline's counter.
A forked child's trace and a second session's file carry it too."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from rlscope import annotate
from rlscope.trace import format as fmt
from rlscope.trace.reader import read_trace
from tests.conftest import run_tool

WORKLOAD = textwrap.dedent("""
    import os, sys
    import rlscope

    n = 6
    for i in range(1, n + 1):
        with rlscope.operation("rollout"):
            sum(range(20000))
        rlscope.report_progress(i, n, unit="episodes")
    pid = os.fork()
    if pid == 0:  # the child's own trace file: it names the unit again
        for i in (1, 2):
            with rlscope.operation("rollout"):
                sum(range(20000))
            rlscope.report_progress(i, 2, unit="episodes")
        os._exit(0)
    os.waitpid(pid, 0)
""")


def test_reports_say_the_unit(tmp_path: Path, recorder: str) -> None:
    script = tmp_path / "episodes.py"
    script.write_text(WORKLOAD)
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "-q", "--recorder", recorder, "--",
                 sys.executable, str(script))
    assert r.returncode == 0, r.stderr

    trace = read_trace(out)
    assert len(trace.processes) == 2
    for p in trace.processes:
        assert p.metadata[fmt.META_PROGRESS_UNIT] == "episodes"

    rep = run_tool("rls-analyze", "report", str(out))
    assert rep.returncode == 0, rep.stderr
    progress = [ln.strip() for ln in rep.stdout.splitlines()
                if ln.strip().startswith("Progress:")]
    assert len(progress) == 2, rep.stdout
    assert progress[0].startswith("Progress: 6 episodes of 6 (100.0%) at ")
    assert progress[1].startswith("Progress: 2 episodes of 2 (100.0%) at ")
    assert all(ln.split(" at ")[1].split()[1] == "episodes/s" for ln in progress)
    assert "timestep" not in "\n".join(progress)

    js = run_tool("rls-analyze", "report", str(out), "--format", "json")
    assert js.returncode == 0, js.stderr
    extra = json.loads(js.stdout)["extrapolation"]
    assert sorted((e["timesteps"], e["unit"]) for e in extra) == [(2, "episodes"),
                                                                   (6, "episodes")]

    tl = run_tool("rls-analyze", "timeline", str(out), "--format", "json",
                  "-o", str(tmp_path / "t.json"))
    assert tl.returncode == 0, tl.stderr
    events = json.loads((tmp_path / "t.json").read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    counters = {e["name"] for e in events if e.get("ph") == "C"}
    assert "episodes" in counters and "timesteps" not in counters


def test_unit_under_a_work_limit(tmp_path: Path) -> None:
    """RLSCOPE_MAX_PROGRESS (calibration's bounded runs) wraps rlscope.report_progress:
    the wrapper takes the unit too."""
    script = tmp_path / "episodes.py"
    script.write_text(WORKLOAD)
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "-q", "--", sys.executable, str(script),
                 env={**os.environ, "RLSCOPE_MAX_PROGRESS": "3"})
    assert r.returncode == 0, r.stderr
    assert "stopping after 3 progress reports" in r.stderr
    (p,) = read_trace(out).processes  # stopped before the fork
    assert list(p.progress.timesteps) == [1, 2, 3]
    assert p.metadata[fmt.META_PROGRESS_UNIT] == "episodes"


def test_default_unit_is_timesteps(tmp_path: Path) -> None:
    script = tmp_path / "steps.py"
    script.write_text("import rlscope\nfor i in (5, 10):\n"
                      "    rlscope.report_progress(i, 20)\n")
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "-q", "--", sys.executable, str(script))
    assert r.returncode == 0, r.stderr
    (p,) = read_trace(out).processes
    assert fmt.META_PROGRESS_UNIT not in p.metadata  # nothing recorded for the default
    rep = run_tool("rls-analyze", "report", str(out))
    assert "Progress: 10 timesteps of 20 (50.0%)" in rep.stdout


def test_unit_recorded_once_per_change_and_per_session(tmp_path: Path,
                                                       recorder: str) -> None:
    """The metadata is written when the unit changes, not at every report; a new session
    (its own trace file) names it again."""
    calls: list[tuple[str, str]] = []

    def run_session(directory: Path, units: list[str]) -> None:
        annotate.start(directory, recorder=recorder)
        rec = annotate.active_recorder()
        assert rec is not None
        real = rec.metadata
        try:
            # count what report_progress asks the recorder to record
            annotate._recorder = _Counting(rec, real, calls)  # type: ignore[assignment]
            for i, unit in enumerate(units):
                annotate.report_progress(i, len(units), unit=unit)
        finally:
            annotate._recorder = rec
            annotate.stop()

    run_session(tmp_path / "a", ["episodes"] * 5 + ["iterations"] * 3 + ["episodes"])
    assert calls == [(fmt.META_PROGRESS_UNIT, '"episodes"'),
                     (fmt.META_PROGRESS_UNIT, '"iterations"'),
                     (fmt.META_PROGRESS_UNIT, '"episodes"')]
    calls.clear()
    run_session(tmp_path / "a", ["episodes"] * 2)  # second session, own file
    assert calls == [(fmt.META_PROGRESS_UNIT, '"episodes"')]
    procs = read_trace(tmp_path / "a").processes
    assert [p.metadata[fmt.META_PROGRESS_UNIT] for p in procs] == ["episodes", "episodes"]


def test_a_unit_that_is_not_a_name_is_refused(tmp_path: Path, recorder: str) -> None:
    annotate.start(tmp_path / "t", recorder=recorder)
    try:
        for bad in ("", "  ", 3):
            with pytest.raises(annotate.RLScopeError, match="unit must be a non-empty str"):
                annotate.report_progress(1, 2, unit=bad)  # type: ignore[arg-type]
    finally:
        annotate.stop()
    annotate.report_progress(1, 2, unit="")  # not recording: a no-op, as every annotation


class _Counting:
    """The recorder, with its metadata calls listed."""

    def __init__(self, rec: object, real: object, calls: list[tuple[str, str]]) -> None:
        self._rec, self._real, self._calls = rec, real, calls

    def metadata(self, key: str, value: str) -> None:
        self._calls.append((key, value))
        self._real(key, value)  # type: ignore[operator]

    def __getattr__(self, name: str) -> object:
        return getattr(self._rec, name)



def test_per_unit_reads_as_english() -> None:
    from rlscope.reporters.table import per_progress_unit

    assert [per_progress_unit(u) for u in ("timesteps", "episodes", "batches",
                                           "policy updates", "frames", "epoch")] == [
        "per timestep", "per episode", "per batch", "per policy update", "per frame",
        "per epoch"]
