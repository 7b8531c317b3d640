"""A long run's check (issue 22: a short fixed budget for long runs): where the script
reports progress itself, pairs of runs with and without rlscope end at the same progress
report (RLSCOPE_MAX_PROGRESS), and the report compares them like for like. The budget is
made small here, so a ~2 s run counts as long."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rlscope.analysis.overhead.applied import validation
from rlscope.analysis.overhead.correction import CorrectionSummary
from rlscope.calibration import model_check
from rlscope.launch.child_env import Recording
from rlscope.trace.reader import read_trace
from tests.conftest import run_tool

WORKLOAD = Path(__file__).parent / "workloads" / "progress_loop.py"


def _profiled(tmp_path: Path, iterations: int) -> tuple[Path, list[str], dict]:
    import json

    out = tmp_path / "run"
    cmd = [sys.executable, str(WORKLOAD), str(iterations)]
    r = run_tool("rls-prof", "-o", str(out), "-q", "--no-cost-model", "--", *cmd,
                 timeout=300)
    assert r.returncode == 0, r.stderr
    return out, cmd, json.loads((out / "run.json").read_text())


def test_a_long_runs_check_ends_its_runs_at_a_progress_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    out, cmd, run = _profiled(tmp_path, 100)
    prof = model_check.profiled_run(out)
    assert len(prof.progress_s) == 100 and prof.progress_by == ""
    monkeypatch.setattr(model_check, "MAX_BUDGET_S", run["duration_s"] / 2)
    monkeypatch.setattr(model_check, "MIN_BUDGET_S", 0.1)
    said: list[str] = []
    cal = model_check.calibrate_by_model(
        cmd, out, Recording(str(out), cuda=False, sample_python_hz=0.0), run,
        lambda pools, counts: {}, None, echo=said.append)
    bound = cal.uninstrumented["bounded_progress"]
    expect, why = model_check.progress_bound(prof, model_check.MAX_BUDGET_S / 4)
    assert bound == expect and not why and 1 <= bound < 100
    assert not said  # nothing to explain: the check is short
    pairs = [r for r in cal.runs if r["round"] >= 0]
    n = cal.uninstrumented["n"]
    assert n >= 1 and len(pairs) == 2 * n
    for r in pairs:
        log = (out / r["directory"] / "output.log").read_text()
        # Both ended at that report, neither did the whole loop.
        assert f"stopping after {bound} progress reports" in log and "done" not in log
    for r in (r for r in pairs if r["config"] == "full"):
        t = read_trace(out / r["directory"])
        assert len(t.processes[0].progress.time_ns) == bound
        assert r["seconds"] < run["cpu_s"]
    # The report compares the pairs, not the whole run with the shorter ones.
    info = validation(run, cal, CorrectionSummary([]))
    u = cal.uninstrumented
    assert info["bounded_progress"] == bound
    assert info["raw_total_s"] == pytest.approx(u["profiled_mean_s"])
    assert info["uninstrumented_mean_s"] == pytest.approx(u["mean_s"])
    assert "raw_wall_s" not in info
    # Like for like: the whole run against these shorter runs would read ~+500%; these
    # runs of ~0.1 s (much of it start-up) differ by up to ~20% here, more under load.
    assert abs(info["raw_error_pct"]) < 100
    # rls-prof's lines: the pairs named; the book-keeping's share of the whole run.
    from rlscope.reporters.calibration import summary_lines

    text = "\n".join(summary_lines(cal))
    assert f"pairs of runs ended at progress report {bound}" in text or \
        f"1 pair of runs ended at progress report {bound}" in text
    removed = cal.validation["removed_s"]
    assert f"about {100 * removed / run['cpu_s']:.1f}% of this run" in text


def test_a_run_whose_progress_rlscope_reports_is_checked_whole(tmp_path: Path):
    """Progress reported by an integration is made only while recording: a run without
    rlscope can be ended there only where the integration's reports are counted with or
    without recording (SB3's progress updates, RLlib's training iterations); for any
    other, the check says why it runs whole."""
    prof = model_check.Profiled({}, 0.0, [0.5, 1.0, 1.5, 2.0], "some-library")
    bound, why = model_check.progress_bound(prof, 0.7)
    assert bound is None and "some-library integration" in why
    for by in ("sb3", "rllib"):
        known = model_check.Profiled({}, 0.0, [0.5, 1.0, 1.5, 2.0], by)
        assert model_check.progress_bound(known, 0.7) == (2, "")
        b = model_check.work_bound(known, 0.7)
        assert (b.n, b.by) == (2, by)
        assert b.unit == ("training iteration" if by == "rllib" else "progress report")
    bound, why = model_check.progress_bound(model_check.Profiled({}, 0.0, [], ""), 0.7)
    assert bound is None and "rlscope.report_progress" in why
    mine = model_check.Profiled({}, 0.0, [0.5, 1.0, 1.5, 2.0], "")
    assert model_check.progress_bound(mine, 0.7) == (2, "")
    assert model_check.progress_bound(mine, 1.9)[0] is None  # no shorter than the run


def test_calibrate_seconds_bounds_a_multi_process_runs_check(tmp_path: Path):
    """Through rls-prof: a run with a Pool worker (no chunks: forked copies could not
    share it), ``--calibrate-seconds 1`` shorter than the run, so its check ends its
    runs at a progress report; the report says so."""
    import json

    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "--calibrate", "--calibrate-seconds", "1",
                 "--", sys.executable, str(WORKLOAD), "150", "pool", timeout=300)
    assert r.returncode == 0, r.stderr
    assert "pair" in r.stderr and "ended at progress report" in r.stderr, r.stderr
    cal = json.loads((out / "calibration.json").read_text())
    assert cal["mode"] == "model"
    bound = cal["uninstrumented"]["bounded_progress"]
    assert 1 <= bound < 150
    rep = run_tool("rls-analyze", "report", str(out))
    assert rep.returncode == 0, rep.stderr
    assert f"in runs ended at progress report {bound}" in rep.stdout, rep.stdout


def test_an_sb3_runs_check_ends_at_sb3s_own_progress_update(tmp_path: Path):
    """An unmodified SB3 script reports no progress itself; rlscope's sb3 integration
    does, at SB3's updates of its progress counter, only while recording. The check's
    runs count those updates with and without rlscope (RLSCOPE_PROGRESS_BY=sb3), so a
    run longer than the budget is still checked on runs ended early."""
    import json

    pytest.importorskip("stable_baselines3")
    script = Path(__file__).parent / "workloads" / "sb3_vec.py"
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "--calibrate", "--calibrate-seconds", "1",
                 "--", sys.executable, str(script), "2", "1024", timeout=600)
    assert r.returncode == 0, r.stderr
    cal = json.loads((out / "calibration.json").read_text())
    bound = cal["uninstrumented"]["bounded_progress"]
    prof = model_check.profiled_run(out)
    assert prof.progress_by == "sb3" and 1 <= bound < len(prof.progress_s)
    for r_ in (r_ for r_ in cal["runs"] if r_["round"] >= 0):
        log = (out / r_["directory"] / "output.log").read_text()
        assert f"stopping after {bound} progress reports" in log and "done" not in log
    full = next(r_ for r_ in cal["runs"] if r_["round"] >= 0 and r_["config"] == "full")
    assert len(read_trace(out / full["directory"]).processes[0].progress.time_ns) == bound


def test_a_script_without_progress_is_checked_on_runs_ended_at_an_optimizer_step(
        tmp_path: Path):
    """A hand-written torch loop that reports no progress: a long run's check ends both
    runs of each pair at the same optimizer step of the main process (torch's step hook,
    recording or not), and says so; the recorded run's trace holds that many steps."""
    import json

    from rlscope.trace import format as fmt

    pytest.importorskip("torch")
    script = Path(__file__).parent / "workloads" / "optimizer_loop.py"
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "--calibrate", "--calibrate-seconds", "1",
                 "--", sys.executable, str(script), "1500", timeout=300)
    assert r.returncode == 0, r.stderr
    # No progress reports: no chunk run (it would run the whole command to find none).
    assert "not by chunks: its main process reported progress 0 times" in r.stderr
    assert not (out / "calibration" / "chunks").exists()
    prof = model_check.profiled_run(out)
    assert prof.progress_s == [] and len(prof.steps_s) == 1500  # a run of 2 s or more
    cal = json.loads((out / "calibration.json").read_text())
    u = cal["uninstrumented"]
    bound = u["bounded_progress"]
    assert u["bounded_unit"] == "optimizer step" and 1 <= bound < 1500
    assert f"ended at optimizer step {bound}" in r.stderr, r.stderr
    pairs = [r_ for r_ in cal["runs"] if r_["round"] >= 0]
    assert len(pairs) >= 2
    for r_ in pairs:
        log = (out / r_["directory"] / "output.log").read_text()
        assert f"stopping after {bound} optimizer steps" in log and "done" not in log, log
    full = next(r_ for r_ in pairs if r_["config"] == "full")
    (p,) = read_trace(out / full["directory"]).processes
    step = p.strings.index(fmt.MARK_STEP[0])
    assert int(((p.events.kind == fmt.MARK_CALL_BEGIN) & (p.events.name == step)).sum()) \
        == bound
    rep = run_tool("rls-analyze", "report", str(out))
    assert rep.returncode == 0, rep.stderr
    assert f"in runs ended at optimizer step {bound}" in rep.stdout, rep.stdout


def test_the_bound_falls_back_to_optimizer_steps():
    """No progress reports (or too few, too late): the main process's optimizer steps
    bound the check's runs, at the first step at or after the target time."""
    from rlscope.libraries import OPTIMIZER_STEPS

    steps = [1.0 + 0.01 * k for k in range(300)]
    b = model_check.work_bound(model_check.Profiled({}, 0.0, [], "", steps), 2.0)
    assert (b.n, b.by, b.unit) == (101, OPTIMIZER_STEPS, "optimizer step")
    late = model_check.Profiled({}, 0.0, [1.0, 9.0], "", steps)
    assert model_check.work_bound(late, 2.0).n == 101  # the reports come too late
    mine = model_check.Profiled({}, 0.0, [0.5, 1.0, 1.5, 2.0], "", steps)
    assert (model_check.work_bound(mine, 0.7).n, model_check.work_bound(mine, 0.7).by) \
        == (2, "")  # the script's own reports first
    b = model_check.work_bound(model_check.Profiled({}, 0.0, [], "", steps), 10.0)
    assert b.n is None and "optimizer steps come too late" in b.why
    b = model_check.work_bound(model_check.Profiled({}, 0.0, [], "", []), 1.0)
    assert b.n is None and "rlscope.report_progress" in b.why


def test_what_the_checks_runs_count_and_where_unlike_runs_are_ended():
    """The runs without rlscope count the profiled run's unit of work (its own progress
    reports first, an integration's that a run can count, else optimizer steps; nothing
    once a bounded trace has thinned them); runs that did other work are compared at a
    common point instead: the unit about the target time, before the end of the run
    that did least."""
    from rlscope.libraries import OPTIMIZER_STEPS

    P = model_check.Profiled
    steps = [1.0 + 0.01 * k for k in range(300)]
    t = model_check.work_tally(P({}, 0.0, [1.0, 2.0, 3.0], "", steps))
    assert t == model_check.Tally(3, "", "progress report")
    t = model_check.work_tally(P({}, 0.0, [], "", steps))
    assert t == model_check.Tally(300, OPTIMIZER_STEPS, "optimizer step")
    assert model_check.work_tally(P({}, 0.0, [1.0], "sb3", [])) == \
        model_check.Tally(1, "sb3", "progress report")
    assert model_check.work_tally(P({}, 0.0, [1.0, 2.0], "ray", [])) is None  # cannot count
    assert model_check.work_tally(P({}, 0.0, [1.0], "", [], whole=False)) is None
    assert model_check.work_tally(P({}, 0.0, [], "", [])) is None

    tally = model_check.Tally(300, OPTIMIZER_STEPS, "optimizer step")
    assert model_check.unlike_work(tally, [300, None]) == ""
    why = model_check.unlike_work(tally, [240, 300])
    assert why.startswith("the run without rlscope did 240 optimizer steps against the "
                          "profiled run's 300: the command does not do the same work")
    prof = P({}, 0.0, [], "", steps)
    b = model_check.common_bound(prof, tally, [240], 2.0)
    assert (b.n, b.by, b.unit) == (101, OPTIMIZER_STEPS, "optimizer step")
    assert model_check.common_bound(prof, tally, [80], 2.0).n == 40  # before 80: half-way
    assert model_check.common_bound(prof, tally, [1], 2.0).n is None


def _calibrated_unlike(tmp_path: Path, library: str, workload: str, *args: str):
    """rls-prof --calibrate on a workload that does other work when recorded: the run,
    its directory and the one line saying the runs did not do the same work."""
    pytest.importorskip(library)
    out = tmp_path / "run"
    r = run_tool("rls-prof", "-o", str(out), "--calibrate", "--", sys.executable,
                 str(Path(__file__).parent / "workloads" / workload), *args, timeout=300)
    assert r.returncode == 0, r.stderr
    (line,) = [x for x in r.stderr.splitlines() if "does not do the same work" in x]
    return r, out, line


def test_runs_that_do_other_work_are_compared_at_a_common_optimizer_step(
        tmp_path: Path):
    """A command whose work is not the same each run (here: 800 optimizer steps
    recorded, 600 not): the check's run without rlscope counts its steps, finds that it
    did other work, says so in one line, and checks the correction on a pair of runs
    ended at one step before the shorter run's end instead."""
    import json

    r, out, line = _calibrated_unlike(tmp_path, "torch", "optimizer_loop.py", "600", "800")
    assert "the run without rlscope did 600 optimizer steps against the profiled run's " \
        "800" in line, line
    cal = json.loads((out / "calibration.json").read_text())
    u = cal["uninstrumented"]
    bound = u["bounded_progress"]
    assert u["bounded_unit"] == "optimizer step" and 1 <= bound < 600
    assert f"so the check compares runs ended at optimizer step {bound}" in line
    assert "unlike_work" not in cal["validation"]
    whole = out / "calibration" / "other-work-0-uninstrumented"  # the whole run, kept
    assert json.loads((whole / "work-tally.json").read_text()) == {"count": 600}
    pairs = [r_ for r_ in cal["runs"] if r_["round"] >= 0]
    assert {r_["config"] for r_ in pairs} == {"full", "uninstrumented"}
    for r_ in pairs:
        log = (out / r_["directory"] / "output.log").read_text()
        assert f"stopping after {bound} optimizer steps" in log and "done" not in log, log
    assert f"ended at optimizer step {bound}" in r.stderr


def test_keras_steps_and_jitted_calls_bound_loops_without_progress_or_torch():
    """A loop with neither progress reports nor torch optimizer steps: its Keras
    optimizer steps, else its most-called jitted JAX function's calls, bound the check's
    runs (and are what its runs without rlscope count)."""
    from rlscope.libraries import JIT_CALLS, KERAS_STEPS

    P = model_check.Profiled
    calls = [1.0 + 0.01 * k for k in range(300)]
    jax_only = P({}, 0.0, [], "", [], calls_s={JIT_CALLS + "update": calls})
    b = model_check.work_bound(jax_only, 2.0)
    assert (b.n, b.by, b.unit) == (101, "jax-jit:update", "jitted update call")
    assert model_check.work_tally(jax_only) == \
        model_check.Tally(300, "jax-jit:update", "jitted update call")
    # Counting 300 calls costs ~0.45 ms: not where that is over 0.1% of the run's CPU.
    assert model_check.work_tally(jax_only, 1.0) == model_check.work_tally(jax_only)
    assert model_check.work_tally(jax_only, 0.4) is None
    # ... nor where the other jitted functions' calls, wrapped too, make it so.
    busy = P({}, 0.0, [], "", [], calls_s={JIT_CALLS + "update": calls}, jit_calls=3000)
    assert model_check.work_tally(busy, 1.0) is None
    both = P({}, 0.0, [], "", [], calls_s={JIT_CALLS + "update": calls,
                                           KERAS_STEPS: calls[:50]})
    assert model_check.work_bound(both, 1.2).by == KERAS_STEPS  # optimizer steps first
    late = model_check.work_bound(P({}, 0.0, [], "", [], calls_s={KERAS_STEPS: [9.0, 9.5]}),
                                  9.7)
    assert late.n is None and "optimizer steps come too late" in late.why


def test_a_jax_loop_that_does_other_work_is_compared_at_a_common_jitted_call(
        tmp_path: Path):
    """A hand-written JAX loop (no progress reports, no torch) that does other work each
    run (1200 jitted updates recorded, 900 not): the run without rlscope counts its
    calls of the jitted ``update`` (as the recorder records them), and the check
    compares a pair of runs ended at one such call."""
    import json

    _r, out, line = _calibrated_unlike(tmp_path, "jax", "jax_loop.py", "900", "1200")
    prof = model_check.profiled_run(out)
    assert len(prof.calls_s["jax-jit:update"]) == 1200
    # Every jitted call, what a tally wraps: the updates, and JAX's own set-up (PRNG).
    assert 1200 <= prof.jit_calls < 1250, prof.jit_calls
    assert "did 900 jitted update calls against the profiled run's 1,200" in line, line
    u = json.loads((out / "calibration.json").read_text())["uninstrumented"]
    bound = u["bounded_progress"]
    assert u["bounded_unit"] == "jitted update call" and 1 <= bound < 900
    for d in ("0-full", "0-uninstrumented"):
        log = (out / "calibration" / d / "output.log").read_text()
        assert f"stopping after {bound} calls of update" in log and "done" not in log, log
