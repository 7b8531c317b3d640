"""Training iterations of an actor/learner run (rlscope.analysis.actors) and their verdict
(rlscope.analysis.diagnosis.actors), on a synthetic RLlib-like driver and two env runners
with known times."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlscope.analysis.actors import analyze, role_summary
from rlscope.analysis.diagnosis import actor_verdicts
from rlscope.analysis.intervals import Intervals
from rlscope.analysis.lockstep.reader import ProcessEvents
from rlscope.reporters import iterations as report
from rlscope.trace import format as fmt
from rlscope.trace.data import EnvEvents

STRINGS = ["", "sampling", "training", "sync_weights", "backprop", "EnvRunnerGroup"]
KEY = {"ray_job": "01000000", "name": "EnvRunnerGroup"}
MS = 1_000_000


def iv(pairs: list[tuple[float, float, int]]) -> Intervals:
    """Intervals from (begin ms, end ms, string id)."""
    a = np.array(pairs, np.float64).reshape(-1, 3)
    return Intervals((a[:, 0] * MS).astype(np.int64), (a[:, 1] * MS).astype(np.int64),
                     np.zeros(len(a), np.int64), a[:, 2].astype(np.int64))


def env(pairs: list[tuple[float, float, int]]) -> EnvEvents:
    """ENV_STEP begin/end pairs named EnvRunnerGroup: (begin ms, end ms, env index)."""
    t, k, idx = [], [], []
    for b, e, i in pairs:
        t += [int(b * MS), int(e * MS)]
        k += [fmt.ENV_STEP_BEGIN, fmt.ENV_STEP_END]
        idx += [i, -1]
    n = len(t)
    return EnvEvents(np.array(t, np.int64), np.zeros(n, np.uint32), np.array(k, np.uint8),
                     np.full(n, 5, np.uint32), np.array(idx, np.int64))


def proc(pid: int, metadata: dict, ops=(), phases=(), envs=(), progress=()) -> ProcessEvents:
    return ProcessEvents(pid, f"p{pid}", STRINGS, metadata, env(list(envs)), iv(list(ops)),
                         Intervals.empty(), iv(list(phases)),
                         (np.array(progress, np.float64) * MS).astype(np.int64))


def period(learner_ms: float) -> float:
    """An iteration's length in job(): 1 s, longer with a long update."""
    return max(1000.0, 800.0 + learner_ms)


def job(iterations: int = 3, learner_ms: float = 200.0):
    """Each iteration at base = period k + 100 ms: sampling [0, 600] (one round [10, 590]),
    training [600, 600 + learner], weight sync after it for 50, progress at period - 100.
    Runner 0 samples [20, 580], runner 1 [20, 400]."""
    d_ops, d_ph, rounds, prog, r0, r1, s0, s1 = [], [], [], [], [], [], [], []
    for k in range(iterations):
        b = period(learner_ms) * k + 100
        d_ph += [(b, b + 600, 1), (b + 600, b + 600 + learner_ms, 2)]
        d_ops += [(b + 600, b + 600 + learner_ms, 4),
                  (b + 600 + learner_ms, b + 650 + learner_ms, 3)]
        rounds.append((b + 10, b + 590, fmt.VECTOR_ENV_INDEX))
        prog.append(b + period(learner_ms) - 100)
        r0.append((b + 20, b + 580, 0))
        r1.append((b + 20, b + 400, 1))
        s0.append((b + 600 + learner_ms, b + 640 + learner_ms, 3))
        s1.append((b + 600 + learner_ms, b + 640 + learner_ms, 3))
    driver = proc(1, {fmt.META_RAY: {"kind": "driver"}, "algorithm": "PPO",
                      fmt.META_VECENVS: [{"name": "EnvRunnerGroup", "key": KEY,
                                          "num_envs": 2, "workers": True}]},
                  d_ops, d_ph, rounds, prog)
    runners = [proc(2 + i, {fmt.META_RAY: {"kind": "actor",
                                           "actor_class": "SingleAgentEnvRunner"},
                            fmt.META_VECENV: KEY, fmt.META_ENV_INDEX: i}, syn, (), smp)
               for i, (smp, syn) in enumerate(((r0, s0), (r1, s1)))]
    other = proc(9, {fmt.META_RAY: {"kind": "actor"}}, [(50, 60, 3)])  # not in the group
    return [driver, *runners, other]


def test_iterations_cut_the_driver_and_each_role():
    it = analyze(job())
    assert it is not None and it.algorithm == "PPO" and it.driver_pid == 1
    assert [p for p, _ in it.runners] == [2, 3] and it.learners == []
    t = it.table.set_index("iteration")
    assert list(t.index) == [1, 2, 3]
    assert t.loc[1, "wall_s"] == pytest.approx(0.9)  # from the first sampling phase
    r = t.loc[2]
    assert r["wall_s"] == pytest.approx(1.0)
    assert r["sampling_s"] == pytest.approx(0.6) and r["rounds_s"] == pytest.approx(0.58)
    assert r["learner_s"] == pytest.approx(0.2) and r["sync_s"] == pytest.approx(0.05)
    assert r["driver_s"] == pytest.approx(0.15)
    assert r["sample_max_s"] == pytest.approx(0.56)
    assert r["sample_mean_s"] == pytest.approx((0.56 + 0.38) / 2)
    assert r["critical"] == "sampling" and r["critical_share"] == pytest.approx(0.6)
    roles = it.roles[it.roles["iteration"] == 2].set_index("pid")
    assert roles.loc[1, "role"] == "driver" and roles.loc[1, "update_s"] == pytest.approx(0.2)
    assert roles.loc[1, "waiting_s"] == pytest.approx(0.58)
    assert roles.loc[3, "sampling_s"] == pytest.approx(0.38)
    assert roles.loc[3, "sync_s"] == pytest.approx(0.04)
    assert roles.loc[3, "waiting_s"] == pytest.approx(1.0 - 0.38 - 0.04)
    s = role_summary(it).set_index("pid")  # iterations 2-3
    assert s.loc[2, "sampling_s"] == pytest.approx(1.12)


def test_no_iterations_without_progress_or_ray_driver():
    procs = job()
    procs[0].progress_ns = np.zeros(0, np.int64)
    assert analyze(procs) is None
    procs = job()  # the same phases in a process that is not a Ray driver
    procs[0].metadata.pop(fmt.META_RAY)
    assert analyze(procs) is None


def test_sampling_verdict_bound_from_the_trace():
    it = analyze(job())
    [v] = actor_verdicts(it, cores=None, run_wall=4.0)
    assert v.kind == "actors-sampling"
    assert "2 -> 4 env runners" in v.verdict and "60%" in v.verdict
    # Steady iterations 2-3: wall 2.0 s, the slowest runner's sample() 1.12 s; 4 runners
    # halve it: 0.56 s saved, gain 2 / 1.44.
    assert f"{2 / 1.44:.2f}x" in v.verdict
    assert v.bound_s == pytest.approx(0.56 / 2.0 * 2.9)  # every iteration's wall: 2.9 s
    assert v.bound_share == pytest.approx(v.bound_s / 4.0)
    # Two cores, runners busy all their sample() time: more runners cannot help.
    [v2] = actor_verdicts(it, cores=2, run_wall=4.0)
    assert v2.bound_s == 0 and "cannot help on 2 cores" in v2.remedy
    from rlscope.analysis.diagnosis.actors import _speedup

    assert _speedup(1, 2, 0.0, 0.5) == 1.0  # no free core: no speed-up, no error
    assert _speedup(1, 2, 0.59, 0.4) == pytest.approx(0.59 / 0.4)


def test_learner_verdict():
    it = analyze(job(learner_ms=1400.0))  # the update longer than sampling
    [v] = actor_verdicts(it, cores=None)
    assert v.kind == "actors-learner" and "local -> 2 learners" in v.verdict
    t = it.steady()
    wall, lr = float(t["wall_s"].sum()), float(t["learner_s"].sum())
    assert wall == pytest.approx(4.4) and lr == pytest.approx(2.8)
    assert f"{4.4 / (4.4 - 1.4):.2f}x" in v.verdict


def test_no_verdict_when_balanced():
    it = analyze(job())
    it.table["sampling_s"] *= 0.5  # 30/30/5/35%: no part holds CRITICAL_SHARE
    it.table["driver_s"] += 0.2
    it.table["learner_s"] += 0.1
    assert actor_verdicts(it, cores=None) == []


def test_report_section_text_and_json():
    it = analyze(job())
    text = report.render_text(it)
    assert "Training iterations (PPO): 3 iteration(s) of driver 1" in text
    assert "env runners (60%)" in text and "Per role (iterations 2-3" in text
    data = json.loads(json.dumps(report.to_dict(it)))
    assert data["steady"] == [2, 3] and len(data["iterations"]) == 3
    assert {r["role"] for r in data["roles"]} == {"driver", "env runner"}


def test_free_cores_from_the_samples():
    """2 cores busy 1.5 core-s in a 1 s window, the run's processes 0.5 of it: the rest of
    the machine took 1 core, 1 is free (cumulative counters, read between samples)."""
    from rlscope.analysis.diagnosis.actors import free_cores
    from rlscope.trace.samples import Samples

    s = Samples.empty()
    t = np.array([0, 500, 1000, 0, 500, 1000], np.int64) * MS
    s.core_time_ns, s.core_index = t, np.array([0, 0, 0, 1, 1, 1], np.uint32)
    s.core_busy_ns = np.array([0, 500, 1000, 0, 250, 500], np.int64) * MS
    s.proc_time_ns, s.proc_pid = t[:3], np.array([7, 7, 7], np.uint32)
    s.proc_cpu_ns = np.array([0, 250, 500], np.int64) * MS
    assert free_cores(s, 2, (0, 1000 * MS)) == pytest.approx(1.0)
    assert free_cores(s, 2, (250 * MS, 750 * MS)) == pytest.approx(1.0)  # interpolated
    assert free_cores(None, 2, (0, 1000 * MS)) is None


def test_remote_learners():
    """num_learners=2: the driver's training phase waits on two Learner actors, whose
    backprop (Learner.update) is their update time; the verdict scales them 2 -> 4."""
    procs = job(learner_ms=1400.0)
    d = procs[0]
    keep = d.ops.name != 4  # no backprop in the driver
    d.ops = Intervals(d.ops.begin[keep], d.ops.end[keep], d.ops.thread[keep],
                      d.ops.name[keep])
    learners = []
    for pid, frac in ((20, 1.0), (21, 0.5)):
        ops = [(2200 * k + 700, 2200 * k + 700 + 1400 * frac, 4) for k in range(3)]
        learners.append(proc(pid, {fmt.META_RAY: {"kind": "actor",
                                                  "actor_class": "PPOTorchLearner"}}, ops))
    it = analyze(procs + learners)
    assert it is not None and [p for p, _ in it.learners] == [20, 21]
    r = it.table.set_index("iteration").loc[2]
    assert r["learner_s"] == pytest.approx(1.4) and r["update_max_s"] == pytest.approx(1.4)
    roles = it.roles[it.roles["iteration"] == 2].set_index("pid")
    assert roles.loc[1, "update_s"] == 0  # the driver only waits for them
    assert roles.loc[1, "waiting_s"] == pytest.approx(0.58 + 1.4)
    assert roles.loc[21, "update_s"] == pytest.approx(0.7)
    assert roles.loc[21, "waiting_s"] == pytest.approx(r["wall_s"] - 0.7)
    [v] = actor_verdicts(it, cores=None)
    assert v.kind == "actors-learner" and "2 -> 4 learners" in v.verdict
