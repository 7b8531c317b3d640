"""The cost model's choice of figure per kind (rlscope.calibration.build.model_costs): a
wrapped call is priced at its in-situ figure (timed between real torch ops) where that
was measured and is above the tight loop's lower bound, else at the tight loop's."""

from __future__ import annotations

import math

from rlscope.calibration.build import model_costs
from rlscope.reporters.calibration import cost_line


def _mb(**backend: float) -> dict[str, dict[str, float]]:
    call = {"per_event_ns": 34.0, "error_ns": 1.0, "inside_ns": 17.0, **backend}
    return {"backend_call": call, "simulator_call": dict(call),
            "annotation": {"per_event_ns": 50.0, "error_ns": 2.0, "inside_ns": 20.0}}


def test_wrapped_calls_cost_their_in_situ_figure():
    costs = model_costs(_mb(in_situ_ns=70.0, in_situ_error_ns=9.0), math.nan, math.nan,
                        {"backend_call": 10, "simulator_call": 5, "annotation": 3})
    for kind in ("backend_call", "simulator_call"):
        c = costs[kind]
        assert (c.per_event_ns, c.error_ns, c.inside_ns) == (70.0, 9.0, 17.0)
        assert c.microbenchmark_ns == 34.0  # the lower bound stays on record
        assert "between small torch ops" in c.note and "34 ns" in c.note
        assert "between small torch ops" in cost_line(kind, c, "runs")
    assert costs["annotation"].per_event_ns == 50.0  # no in-situ figure: the tight loop


def test_the_tight_loop_stands_without_a_higher_in_situ_figure():
    for extra in ({}, {"in_situ_ns": 20.0, "in_situ_error_ns": 30.0},
                  {"in_situ_ns": math.nan}):
        c = model_costs(_mb(**extra), math.nan, math.nan, {"backend_call": 1})["backend_call"]
        assert (c.per_event_ns, c.error_ns) == (34.0, 1.0), extra
        assert "tight-loop" in c.note
        assert "tight-loop microbenchmark" in cost_line("backend_call", c, "runs")


def test_an_env_step_costs_its_in_situ_figure_in_every_mode():
    """The env wrappers' cost (no calibration configuration separates it) is the in-situ
    figure where higher, in the model and in the chunk/run calibrations alike."""
    from rlscope.calibration.build import _microbenchmark_costs
    from rlscope.calibration.estimate import RunSample

    mb = {"env_call": {"per_event_ns": 40.0, "error_ns": 1.0, "inside_ns": 30.0,
                       "in_situ_ns": 90.0, "in_situ_error_ns": 8.0}}
    model = model_costs(mb, math.nan, math.nan, {"env_call": 7})["env_call"]
    chunks = _microbenchmark_costs(mb, [RunSample("full", 0, 1.0, {"env_call": 7})])
    for c in (model, chunks["env_call"]):
        assert (c.per_event_ns, c.inside_ns, c.microbenchmark_ns) == (90.0, 30.0, 40.0)
        assert "CartPole" in c.note and "CartPole" in cost_line("env_call", c, "chunks")
    assert chunks["env_call"].events == 7


def test_a_hook_cheaper_than_the_benchmark_resolves_is_priced_at_nothing():
    """An annotation measured at -2 ns (recording minus idle, on a quiet day) is kept in
    the model at 0, saying so; a kind the benchmark did not measure is left out. Its code
    between the two stamps (the empty interval, 4 ns) still leaves the interval: moved
    around it, the run's total unchanged."""
    mb = _mb()
    mb["annotation"] = {"per_event_ns": -2.1, "error_ns": 1.5, "inside_ns": 4.0}
    costs = model_costs(mb, math.nan, math.nan, {"annotation": 3, "backend_call": 1,
                                                 "cuda_api": 2})
    c = costs["annotation"]
    assert (c.per_event_ns, c.inside_ns, c.outside_ns) == (0.0, 4.0, -4.0)
    assert c.microbenchmark_ns == -2.1
    assert "below what it resolves" in c.note
    assert "cuda_api" not in costs and costs["backend_call"].per_event_ns == 34.0


def test_a_python_stack_sample_is_priced_in_every_mode():
    """The sampler's stall has no calibration configuration either: the microbenchmark's
    figure, in the model and in the chunk/run calibrations (which take no samples)."""
    from rlscope.calibration.build import _microbenchmark_costs
    from rlscope.calibration.estimate import RunSample

    mb = {"py_sample": {"per_event_ns": 150_000.0, "error_ns": 9_000.0, "inside_ns": 0.0}}
    model = model_costs(mb, math.nan, math.nan, {"py_sample": 40})["py_sample"]
    chunks = _microbenchmark_costs(mb, [RunSample("full", 0, 1.0, {})])["py_sample"]
    for c in (model, chunks):
        assert (c.per_event_ns, c.inside_ns) == (150_000.0, 0.0)
    assert "stack sample" in cost_line("py_sample", model, "model")
