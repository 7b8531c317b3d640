"""Run comparison: deltas per operation and category, and noise from repetitions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlscope.analysis import analyze
from rlscope.analysis.engine.synthetic import process_trace
from rlscope.errors import RLScopeError
from rlscope.reporters import compare as cmp
from rlscope.trace import format as fmt
from rlscope.trace.data import Trace

OB, OE = fmt.OPERATION_BEGIN, fmt.OPERATION_END


def run(a_ns: int, b_ns: int):
    ev = [(0, 0, fmt.PROCESS_START, ""), (0, 0, OB, "a"), (a_ns, 0, OE, "a"),
          (a_ns, 0, OB, "b"), (a_ns + b_ns, 0, OE, "b"), (a_ns + b_ns, 0, fmt.PROCESS_END, "")]
    return analyze(Trace(Path("."), {}, [process_trace(ev)]))


def test_deltas_and_noise():
    base = [run(1000, 500), run(1010, 520), run(990, 480)]
    other = [run(2000, 505), run(2020, 495), run(1980, 500)]
    df = cmp.compare([base, other], ["base", "other"])
    row = df[(df.key == "a") & (df.run == "other")].iloc[0]
    assert round(row.delta_s * 1e9) == 1000 and round(row.delta_pct) == 100
    assert row.significant is True or row.significant == True  # noqa: E712
    row_b = df[(df.key == "b") & (df.run == "other")].iloc[0]
    assert not row_b.significant
    text = cmp.render(df, ["base", "other"], "text")
    assert "*" in text and "~" in text and "Δ other" in text
    # Without repetitions, no claim about noise.
    single = cmp.compare([[run(1000, 500)], [run(2000, 500)]], ["x", "y"], by="category")
    assert single["significant"].isna().all()
    assert set(single["key"]) == {"Python"}


def test_plot(tmp_path: Path):
    df = cmp.compare([[run(1000, 500)], [run(2000, 500)]], ["x", "y"])
    cmp.figure(df, ["x", "y"]).savefig(tmp_path / "c.svg")
    assert (tmp_path / "c.svg").stat().st_size > 1000


def ops_run(ops: dict[str, int], timesteps: int = 0, corrected: bool | None = None):
    ev, t = [(0, 0, fmt.PROCESS_START, "")], 0
    for name, ns in ops.items():
        ev += [(t, 0, OB, name), (t + ns, 0, OE, name)]
        t += ns
    ev.append((t, 0, fmt.PROCESS_END, ""))
    prog = [(t, timesteps, timesteps)] if timesteps else []
    run_meta = {} if corrected is None else {"correction": {"applied": corrected}}
    return analyze(Trace(Path("."), run_meta, [process_trace(ev, progress=prog)]))


def test_an_operation_absent_from_a_group_is_a_significant_difference_and_a_dash():
    with_x = [ops_run({"x": 10_000 + d, "y": 1000}) for d in (-2000, 0, 2000)]
    without = [ops_run({"y": 1000 + d}) for d in (-10, 0, 10)]
    df = cmp.compare([with_x, without], ["with", "without"])
    row = df[(df.key == "x") & (df.run == "without")].iloc[0]
    assert not row.present and row.mean_s == 0 and row.significant is True
    text = cmp.render(df, ["with", "without"], "text")
    line = next(ln for ln in text.splitlines() if ln.startswith("x "))
    assert "–" in line and "absent *" in line and "-100%" not in line
    df2 = cmp.compare([without, with_x], ["without", "with"])
    assert "new *" in cmp.render(df2, ["without", "with"], "text")


def test_map_lines_up_differently_named_operations_and_per_timestep_normalises():
    torch_run = ops_run({"policy_forward": 3000, "update": 5000}, timesteps=100)
    tf_run = ops_run({"act": 6000, "train_step": 10000}, timesteps=200)
    mapping = cmp.parse_map(["policy_forward=inference", "act=inference",
                             "update=backprop", "train_step=backprop"])
    df = cmp.compare([[torch_run], [tf_run]], ["torch", "tf"], mapping=mapping,
                     per_timestep=True)
    got = {(r.key, r.run): round(r.mean_s * 1e9, 3) for r in df.itertuples()}
    # ns per timestep: both runs spend the same per step once normalised and renamed
    assert got[("inference", "torch")] == got[("inference", "tf")] == 30
    assert got[("backprop", "torch")] == got[("backprop", "tf")] == 50
    assert "Microseconds per timestep" in cmp.render(df, ["torch", "tf"], "text", True)
    with pytest.raises(ValueError):
        cmp.parse_map(["no-equals-sign"])


def test_mixed_correction_is_warned_about():
    a, b = ops_run({"x": 100}, corrected=True), ops_run({"x": 100}, corrected=False)
    assert cmp.correction_warnings([[a], [b]], ["a", "b"])
    assert cmp.correction_warnings([[a], [a]], ["a", "c"]) == []


def test_plot_has_the_significance_marks(tmp_path: Path):
    base = [ops_run({"x": 1000 + d, "y": 500}) for d in (-10, 0, 10)]
    other = [ops_run({"x": 3000 + d, "y": 500 + d}) for d in (-10, 0, 10)]
    df = cmp.compare([base, other], ["base", "other"])
    fig = cmp.figure(df, ["base", "other"])
    # Every bar is labelled with its value; the second run's also with its mark: x
    # tripled (beyond the noise), y within the noise.
    texts = [t.get_text().strip() for t in fig.axes[0].texts]
    assert len(texts) == 4
    assert [t[-1] for t in texts[2:]] == ["*", "~"]
    assert not any(t.endswith(("*", "~")) for t in texts[:2])
    fig.savefig(tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 1000


def phased_run(setup_ns: int, train_ns: int, timesteps: int = 10):
    PB, PE = fmt.PHASE_BEGIN, fmt.PHASE_END
    t = setup_ns + train_ns
    ev = [(0, 0, fmt.PROCESS_START, ""), (0, 0, OB, "setup"), (setup_ns, 0, OE, "setup"),
          (setup_ns, 0, PB, "training"), (setup_ns, 0, OB, "step"), (t, 0, OE, "step"),
          (t, 0, PE, "training"), (t, 0, fmt.PROCESS_END, "")]
    return analyze(Trace(Path("."), {}, [process_trace(ev, progress=[(t, timesteps,
                                                                       timesteps)])]))


def test_phase_keeps_only_that_phase_for_operations_and_categories():
    a, b = phased_run(5000, 1000), phased_run(9000, 2000)
    df = cmp.compare([[a], [b]], ["a", "b"], phase="training", per_timestep=True)
    assert set(df["key"]) == {"step"}
    got = {r.run: round(r.mean_s * 1e9) for r in df.itertuples()}
    assert got == {"a": 100, "b": 200}  # ns per timestep, set-up left out
    cat = cmp.compare([[a], [b]], ["a", "b"], by="category", phase="training")
    assert {r.run: round(r.mean_s * 1e9) for r in cat.itertuples()} == {"a": 1000,
                                                                         "b": 2000}
    everything = cmp.compare([[a], [b]], ["a", "b"], by="category")
    assert round(everything[everything.run == "a"].mean_s.sum() * 1e9) == 6000
    with pytest.raises(RLScopeError, match=r"no phase 'eval'.*'training'"):
        cmp.compare([[a]], ["a"], phase="eval")


def test_the_same_run_twice_gets_two_columns():
    assert cmp.unique_labels(["a", "a", "b", "a"]) == ["a", "a #2", "b", "a #3"]
    df = cmp.compare([[run(1000, 500)], [run(1000, 500)]], ["a", "a #2"])
    assert "Δ a #2" in cmp.render(df, ["a", "a #2"], "text")


def mp_run(main_ns: int, task_ns: tuple[int, ...], phased: bool = False,
           helper_ns: int = 5000):
    """A main process, pool workers each running one ``task`` (``task_ns``) and an idle
    forkserver (it runs ``helper_ns`` and records nothing)."""
    PB, PE = fmt.PHASE_BEGIN, fmt.PHASE_END
    main = [(0, 0, fmt.PROCESS_START, ""), (0, 0, OB, "loop"), (main_ns, 0, OE, "loop"),
            (main_ns, 0, fmt.PROCESS_END, "")]
    if phased:
        main = [main[0], (0, 0, PB, "training"), *main[1:3], (main_ns, 0, PE, "training"),
                main[3]]
    procs = [process_trace(main, pid=100, ppid=1, argv=["python", "train.py"])]
    for i, ns in enumerate(task_ns):
        ev = [(0, 0, fmt.PROCESS_START, ""), (0, 0, OB, "task"), (ns, 0, OE, "task"),
              (ns, 0, fmt.PROCESS_END, "")]
        procs.append(process_trace(ev, pid=200 + i, ppid=100, metadata={
            fmt.META_ROLE: fmt.ROLE_POOL_WORKER}))
    procs.append(process_trace([(0, 0, fmt.PROCESS_START, ""),
                                (helper_ns, 0, fmt.PROCESS_END, "")], pid=300, ppid=100,
                               metadata={fmt.META_ROLE: fmt.ROLE_FORKSERVER}))
    return analyze(Trace(Path("."), {}, [*procs]))


def test_rows_per_role_workers_summed_idle_helpers_left_out():
    a, b = mp_run(1000, (300, 500)), mp_run(1000, (300, 500, 700))
    df = cmp.compare([[a], [b]], ["two", "three"])
    assert list(dict.fromkeys(df["role"])) == [fmt.ROLE_MAIN, fmt.ROLE_POOL_WORKER]
    got = {(r.role, r.key, r.run): round(r.mean_s * 1e9) for r in df.itertuples()}
    assert got[(fmt.ROLE_POOL_WORKER, "task", "two")] == 800  # the workers summed
    assert got[(fmt.ROLE_POOL_WORKER, "task", "three")] == 1500
    assert got[(fmt.ROLE_MAIN, "loop", "two")] == got[(fmt.ROLE_MAIN, "loop", "three")] \
        == 1000
    # The idle forkserver is in no row: its 5000 ns are nowhere in the comparison.
    assert fmt.ROLE_FORKSERVER not in set(df["role"])
    assert round(df[df.run == "two"].mean_s.sum() * 1e9) == 1800
    procs = {(r.role, r.run): r.processes for r in df.itertuples()}
    assert procs[(fmt.ROLE_POOL_WORKER, "three")] == 3 and procs[(fmt.ROLE_MAIN, "two")] == 1
    text = cmp.render(df, ["two", "three"], "text")
    lines = text.splitlines()
    main_at = lines.index("main (1 process)")
    pool_at = next(i for i, ln in enumerate(lines) if ln.startswith("pool worker (2 / 3"))
    assert main_at < pool_at  # main first, each role's rows below it, indented
    assert lines[main_at + 1].startswith("  loop") and lines[pool_at + 1].startswith("  task")
    left = next(ln for ln in lines if ln.startswith("Left out:"))
    assert "1" in left and fmt.ROLE_FORKSERVER in left
    assert "| pool worker | task |" in cmp.render(df, ["two", "three"], "markdown")
    records = json.loads(cmp.render(df, ["two", "three"], "json"))
    assert {r["role"] for r in records} == {fmt.ROLE_MAIN, fmt.ROLE_POOL_WORKER}
    assert cmp.render(df, ["two", "three"], "csv").splitlines()[0].startswith("role,key,")
    cat = cmp.compare([[a], [b]], ["two", "three"], by="category")
    assert set(zip(cat["role"], cat["key"], strict=True)) == {(fmt.ROLE_MAIN, "Python"),
                                                  (fmt.ROLE_POOL_WORKER, "Python")}


def test_role_keeps_one_role_and_an_unknown_role_is_one_error():
    a, b = mp_run(1000, (300, 500)), mp_run(2000, (300,))
    df = cmp.compare([[a], [b]], ["a", "b"], role=fmt.ROLE_POOL_WORKER)
    assert set(df["role"]) == {fmt.ROLE_POOL_WORKER} and set(df["key"]) == {"task"}
    text = cmp.render(df, ["a", "b"], "text")
    assert "pool worker (" not in text  # one role: no group headers
    with pytest.raises(RLScopeError, match=r"role 'forkserver'.*'main', 'pool worker'.*"
                                           "idle helpers are left out"):
        cmp.compare([[a], [b]], ["a", "b"], role=fmt.ROLE_FORKSERVER)


def test_a_single_process_run_is_one_role_main_as_before():
    df = cmp.compare([[run(1000, 500)], [run(2000, 500)]], ["x", "y"])
    assert set(df["role"]) == {fmt.ROLE_MAIN} and set(df["processes"]) == {1}
    text = cmp.render(df, ["x", "y"], "text")
    assert "main (" not in text and "Left out" not in text
    assert text.splitlines()[2].startswith("a ")  # rows as before: no header, no indent


def test_runs_without_phases_compare_and_a_missing_phase_is_one_line():
    plain, phased = mp_run(1000, (300,)), mp_run(1000, (300,), phased=True)
    for by in ("operation", "category"):
        df = cmp.compare([[plain], [plain]], ["a", "b"], by=by)
        assert len(df) and df["mean_s"].gt(0).all()
        mixed = cmp.compare([[plain], [phased]], ["plain", "phased"], by=by)
        assert set(mixed["role"]) == {fmt.ROLE_MAIN, fmt.ROLE_POOL_WORKER}
    with pytest.raises(RLScopeError) as e:
        cmp.compare([[phased], [plain]], ["phased", "plain"], phase="training")
    msg = str(e.value)
    assert "no phase 'training'" in msg and "it has no phases" in msg and "\n" not in msg
    with pytest.raises(RLScopeError, match=r"no phase 'eval' \(its phases: 'training'\)"):
        cmp.compare([[phased]], ["phased"], by="category", phase="eval")
    only = cmp.compare([[phased]], ["phased"], phase="training")
    # The workers recorded outside every phase: only the main process's loop is kept.
    assert list(zip(only["role"], only["key"], strict=True)) == [(fmt.ROLE_MAIN, "loop")]
