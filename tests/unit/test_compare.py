"""Run comparison: deltas per operation and category, and noise from repetitions."""

from __future__ import annotations

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
