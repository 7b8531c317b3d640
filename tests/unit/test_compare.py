"""Run comparison: deltas per operation and category, and noise from repetitions."""

from __future__ import annotations

from pathlib import Path

from rlscope.analysis import analyze
from rlscope.analysis.synthetic import process_trace
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


def test_the_same_run_twice_gets_two_columns():
    assert cmp.unique_labels(["a", "a", "b", "a"]) == ["a", "a #2", "b", "a #3"]
    df = cmp.compare([[run(1000, 500)], [run(1000, 500)]], ["a", "a #2"])
    assert "Δ a #2" in cmp.render(df, ["a", "a #2"], "text")
