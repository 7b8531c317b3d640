"""Per-event cost estimation from synthetic runs with known injected costs."""

from __future__ import annotations

import math
import random

import pytest

from rlscope.calibration.estimate import (
    UNINSTRUMENTED,
    RunSample,
    estimate_costs,
    split_rounds,
    validate,
)

TRUE = {"process": 50e6, "annotation": 600.0, "backend_call": 1500.0,
        "simulator_call": 900.0}
COUNTS = {  # events per run in each configuration
    "base": {"process": 1},
    "annotations": {"process": 1, "annotation": 40_000},
    "annotations+backend": {"process": 1, "annotation": 40_000, "backend_call": 300_000},
    "annotations+simulator": {"process": 1, "annotation": 40_000, "simulator_call": 20_000},
    "full": {"process": 1, "annotation": 40_000, "backend_call": 300_000,
             "simulator_call": 20_000},
}


def runs(rounds: int, noise: float, seed: int = 0, work_s: float = 10.0,
         drift_amp: float = 0.05) -> list[RunSample]:
    rng = random.Random(seed)
    out = []
    for r in range(rounds):
        drift = 1 + drift_amp * math.sin(r)  # a round that runs slower as a whole
        out.append(RunSample(UNINSTRUMENTED, r, work_s * drift * (1 + rng.gauss(0, noise))))
        for cfg, n in COUNTS.items():
            over = sum(TRUE[k] * c for k, c in n.items()) / 1e9
            out.append(RunSample(cfg, r, (work_s + over) * drift * (1 + rng.gauss(0, noise)),
                                 dict(n)))
    return out


def test_noise_free_runs_recover_the_costs_exactly():
    est = estimate_costs(runs(3, 0.0, drift_amp=0.0))
    for k, v in TRUE.items():
        assert est[k].per_event_ns == pytest.approx(v, rel=1e-6)
        assert est[k].error_ns == pytest.approx(0, abs=1e-3)


def test_slow_rounds_cancel_out():
    # Costs are relative to the median round's speed: drift scales them, no more.
    est = estimate_costs(runs(5, 0.0, drift_amp=0.05))
    for k, v in TRUE.items():
        assert est[k].per_event_ns == pytest.approx(v, rel=0.06)


def test_noisy_runs_recover_costs_within_their_error_bars():
    est = estimate_costs(runs(9, 0.002, seed=3))
    for k in ("annotation", "backend_call", "simulator_call"):
        e = est[k]
        assert abs(e.per_event_ns - TRUE[k]) < 4 * e.error_ns + 0.05 * TRUE[k], (k, e)


def test_held_out_rounds_validate_the_full_configuration():
    samples = runs(6, 0.001, seed=1)
    cal, val = split_rounds(list(range(6)))
    assert cal == [0, 2, 4] and val == [1, 3, 5]
    est = estimate_costs(samples, cal)
    v = validate(samples, {k: e.per_event_ns for k, e in est.items()}, val, "full", True)
    assert v.rounds == val
    assert v.max_abs_pct < 1.0
    raw = validate(samples, {}, val, "full", True)
    assert raw.median_pct > 5  # uncorrected, the full run is visibly slower


def test_kinds_that_never_vary_independently_are_flagged():
    samples = [RunSample(UNINSTRUMENTED, 0, 10.0),
               RunSample("full", 0, 10.1, {"cuda_api": 1000, "gpu_activity": 1000})]
    est = estimate_costs(samples)
    assert est["cuda_api"].confounded_with == ["gpu_activity"]


def test_one_round_has_no_error_bar():
    est = estimate_costs(runs(1, 0.0))
    assert math.isnan(est["annotation"].error_ns)
    assert split_rounds([0]) == ([0], [0])


def chunks(n: int, noise: float, seed: int = 0, speed_amp: float = 0.3) -> list[RunSample]:
    """Chunks of different work (0.05-0.5 s, event counts proportional), each measured in
    every configuration; the machine's speed differs from chunk to chunk."""
    rng = random.Random(seed)
    out = []
    for c in range(n):
        work = rng.uniform(0.05, 0.5)
        speed = rng.uniform(1 - speed_amp, 1 + speed_amp)  # a slow chunk: all copies alike
        out.append(RunSample(UNINSTRUMENTED, c, work * speed * (1 + rng.gauss(0, noise))))
        for cfg in ("annotations", "annotations+backend", "full"):
            n_ev = {k: int(v * work) for k, v in COUNTS[cfg].items() if k != "process"}
            over = sum(TRUE[k] * v for k, v in n_ev.items()) / 1e9
            out.append(RunSample(cfg, c, (work + over) * speed * (1 + rng.gauss(0, noise)),
                                 n_ev))
    return out


def test_paired_chunks_recover_costs_of_different_work():
    exact = estimate_costs(chunks(12, 0.0, speed_amp=0.0), paired=True)
    for k in ("annotation", "backend_call", "simulator_call"):
        assert exact[k].per_event_ns == pytest.approx(TRUE[k], rel=1e-6)
    # A chunk's speed scales its excess: the estimate is the speed-weighted mean cost.
    est = estimate_costs(chunks(12, 0.0), paired=True)
    for k in ("annotation", "backend_call", "simulator_call"):
        assert est[k].per_event_ns == pytest.approx(TRUE[k], rel=0.3)
    noisy = estimate_costs(chunks(40, 0.003, seed=5), paired=True)
    for k in ("annotation", "backend_call", "simulator_call"):
        e = noisy[k]
        assert math.isfinite(e.error_ns) and e.error_ns > 0
        assert abs(e.per_event_ns - TRUE[k]) < 4 * e.error_ns + 0.3 * TRUE[k]


def test_paired_chunks_validate_on_summed_time():
    samples = chunks(10, 0.0, seed=2)
    v = validate(samples, TRUE, list(range(1, 10, 2)), "full", True)
    raw = validate(samples, {}, list(range(1, 10, 2)), "full", True)
    assert abs(v.total_error_pct) < abs(raw.total_error_pct)
    assert raw.total_error_pct > 0


def test_a_disturbed_chunk_is_left_out_of_the_check():
    from rlscope.calibration.estimate import outlier_rounds

    samples = chunks(10, 0.0, seed=4, speed_amp=0.0)
    for s in samples:  # chunk 3: the uninstrumented copy ran 20% fast
        if s.round == 3 and s.config == UNINSTRUMENTED:
            s.seconds *= 0.8
    held = list(range(1, 10, 2))
    v = validate(samples, TRUE, held, "full", True, drop_outliers=True)
    assert v.dropped == [3] and 3 not in v.rounds
    assert v.total_error_pct == pytest.approx(0.0, abs=1e-6)
    assert validate(samples, TRUE, held, "full", True).total_error_pct > 1.0
    # Ordinary spread is not an outlier; never more than a quarter of the rounds.
    assert outlier_rounds({i: 0.02 + 0.001 * i for i in range(8)}) == []
    assert len(outlier_rounds({i: (0.5 if i < 4 else 0.02) for i in range(8)})) <= 2


def test_cost_far_above_its_hooks_is_spread_over_time():
    from rlscope.calibration.build import _kind_cost

    mb = {"per_event_ns": 300.0, "inside_ns": 70.0}
    c = _kind_cost("annotation", 5000.0, 500.0, [], mb, 100, "chunks")
    assert c.diffuse_ns == 5000 - 2 * 300 and c.inside_ns == 70
    assert c.outside_ns == 2 * 300 - 70 and "spread over time" in c.note
    near = _kind_cost("backend_call", 250.0, 20.0, [], {"per_event_ns": 150.0,
                                                          "inside_ns": 40.0}, 10, "chunks")
    assert near.diffuse_ns == 0 and near.outside_ns == 210
    # Never below the microbenchmark (a lower bound); noisy estimates above it are kept.
    low = _kind_cost("annotation", 120.0, 800.0, [], mb, 100, "chunks")
    assert low.source == "microbenchmark" and low.per_event_ns == 300 and not low.diffuse_ns
    noisy = _kind_cost("annotation", 900.0, 800.0, [], mb, 100, "chunks")  # < 2 sigma
    assert noisy.per_event_ns == 900 and "within the noise" in noisy.note


def test_unresolved_estimate_uses_the_microbenchmark_and_the_report_says_why():
    from rlscope.analysis.overhead.model import Calibration
    from rlscope.calibration.build import _kind_cost
    from rlscope.reporters.calibration import cost_line, summary_lines

    mb = {"per_event_ns": 100.0, "inside_ns": 40.0}
    wide = _kind_cost("annotation", 900.0, 1000.0, [], mb, 100, "chunks")  # ± > value
    assert wide.per_event_ns == 100 and wide.source == "microbenchmark"
    assert "not resolved" in wide.note and wide.estimate_ns == 900
    assert "not resolved on this workload (the chunks gave 900 ns ± 1000 ns" in \
        cost_line("annotation", wide, "chunks")
    below = _kind_cost("annotation", 60.0, 20.0, [], mb, 100, "chunks")
    assert below.per_event_ns == 100 and "below the tight-loop microbenchmark" in \
        cost_line("annotation", below, "chunks")
    near = _kind_cost("backend_call", 150.0, 20.0, [], mb, 100, "chunks")
    line = cost_line("backend_call", near, "chunks")
    assert line.startswith("  backend_call: 150 ns ± 20 ns per call, measured on the chunks")
    assert "the other 50 ns is the same hook inside this workload" in line
    assert "40 ns inside the interval it times, 110 ns around it" in line
    far = _kind_cost("annotation", 4300.0, 2100.0, [], mb, 100, "chunks")
    line = cost_line("annotation", far, "chunks")
    assert "200 ns paid at each event" in line and "4100 ns spread over the run" in line
    cal = Calibration(command=["x"], costs={"annotation": wide, "backend_call": near},
                      mode="chunks")
    text = "\n".join(summary_lines(cal, verbose=True))
    assert "± is one standard error (jackknife over the calibration chunks)" in text


def test_an_unresolved_call_falls_back_to_the_in_situ_figure():
    """A backend call the chunks cannot resolve is priced as the cost model prices it: at
    its in-situ figure (between real torch ops) where that is above the tight loop's
    lower bound. Seen: MuJoCo's chunks fell back to 18 ns, the tight loop's, while the
    in-situ figure the same calibration measured read 55 ns."""
    from rlscope.calibration.build import _kind_cost
    from rlscope.reporters.calibration import cost_line

    mb = {"per_event_ns": 18.0, "inside_ns": 10.0, "in_situ_ns": 55.0,
          "in_situ_error_ns": 8.0}
    wide = _kind_cost("backend_call", 40.0, 60.0, [], mb, 100, "chunks")
    assert wide.source == "microbenchmark" and wide.per_event_ns == 55
    assert wide.microbenchmark_ns == 18 and wide.inside_ns == 10
    line = cost_line("backend_call", wide, "chunks")
    assert "not resolved on this workload" in line
    assert "a wrapped call timed between small torch ops is used (the tight loop gives " \
        "18 ns)" in line
    below = _kind_cost("backend_call", 10.0, 2.0, [], mb, 100, "chunks")
    assert below.per_event_ns == 55 and "below the tight-loop microbenchmark" in \
        cost_line("backend_call", below, "chunks")
    # An estimate between the two bounds that is resolved is the workload's own.
    mid = _kind_cost("backend_call", 40.0, 5.0, [], mb, 100, "chunks")
    assert mid.source == "chunks (inside part: microbenchmark)" and mid.per_event_ns == 40


def test_one_calibrating_round_is_not_resolved():
    """Two repetitions leave one calibrating round and no error bar: seen on an H100, a
    PPO calibration put an annotation at 200 µs (the microbenchmark: 99 ns) and a GPU
    record at 59 µs. Without a bar nothing tells a cost from noise."""
    from rlscope.calibration.build import _kind_cost
    from rlscope.reporters.calibration import cost_line

    mb = {"per_event_ns": 99.0, "inside_ns": 40.0}
    one = _kind_cost("annotation", 200_500.0, math.nan, [], mb, 2125, "runs")
    assert one.per_event_ns == 99 and one.source == "microbenchmark"
    assert "no error bar from one round" in one.note
    assert "no error bar: one calibrating round" in cost_line("annotation", one, "runs")
    gpu = _kind_cost("gpu_activity", 59_400.0, math.nan, [], None, 62_751, "runs")
    assert gpu.per_event_ns == 59_400 and "not resolved" in gpu.note
    assert "not resolved: no error bar" in cost_line("gpu_activity", gpu, "runs")
    resolved = _kind_cost("gpu_activity", 3000.0, 300.0, [], None, 1000, "runs")
    assert "not resolved" not in cost_line("gpu_activity", resolved, "runs")


def test_env_steps_at_a_known_cost_leave_the_other_kinds_unbiased():
    """Env steps are recorded with the simulation operation in every configuration (a fixed
    ratio): the runs cannot tell their cost from the annotations'. Taken off as known
    (the microbenchmark), the fitted kinds come out true; left in, the annotations absorb
    them."""
    env_cost, steps = 2000.0, 20_000
    samples = runs(3, 0.0, drift_amp=0.0)
    for s in samples:
        if s.counts.get("annotation"):
            s.counts["env_call"] = steps
            s.seconds += env_cost * steps / 1e9
    est = estimate_costs(samples, known={"env_call": env_cost})
    assert "env_call" not in est
    for k, v in TRUE.items():
        assert est[k].per_event_ns == pytest.approx(v, rel=1e-6)
    absorbed = estimate_costs(samples)
    assert absorbed["annotation"].per_event_ns == pytest.approx(
        TRUE["annotation"] + env_cost * steps / 40_000, rel=1e-6)


def test_kinds_whose_counts_move_together_fall_back_to_the_microbenchmark():
    """Chunks where every recording copy had 65 annotations and 64 simulator calls (the
    annotations copy recorded the simulator's calls too): any split of their summed cost
    fits. They are flagged, and the calibration takes the microbenchmarks, not the
    +25 ms / -25 ms such a fit once gave."""
    from rlscope.calibration.build import build_calibration
    from rlscope.calibration.configs import configurations
    from rlscope.reporters.calibration import cost_line

    rng = random.Random(0)
    samples = []
    for c in range(12):
        work = rng.uniform(0.01, 0.05)
        n = int(6500 * work)
        samples.append(RunSample(UNINSTRUMENTED, c, work))
        for cfg in ("annotations", "full"):
            samples.append(RunSample(cfg, c, work + n * 60e-9 + rng.gauss(0, 2e-5),
                                     {"annotation": n + 1, "simulator_call": n}))
    est = estimate_costs(samples, paired=True)
    assert est["annotation"].confounded_with == ["simulator_call"]
    assert est["simulator_call"].confounded_with == ["annotation"]
    mb = {"annotation": {"per_event_ns": 4.0, "inside_ns": 30.0},
          "simulator_call": {"per_event_ns": 30.0, "in_situ_ns": 45.0, "inside_ns": 20.0}}
    cal = build_calibration(["x"], samples, configurations(["mujoco"], False), 12, mb,
                            metric="thread-cpu", mode="chunks")
    for kind, ns in (("annotation", 4.0), ("simulator_call", 45.0)):
        c = cal.costs[kind]
        assert (c.source, c.per_event_ns, c.fallback) == ("microbenchmark", ns, "confounded")
        assert "any split of their cost fits" in cost_line(kind, c, "chunks")
