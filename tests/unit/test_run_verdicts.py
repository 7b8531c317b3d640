"""The run-level diagnosis on synthetic tables and lock-step results: each verdict, its
threshold, its order, the one start-up entry, and the per-operation verdicts it folds."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from rlscope.analysis import diagnosis as D
from rlscope.reporters import diagnosis as render


def _tree(rows):
    """(pid, role, start_s, end_s, busy_s[, idle_helper])"""
    return pd.DataFrame([{"pid": r[0], "role": r[1], "start_s": r[2], "end_s": r[3],
                          "wall_s": r[3] - r[2], "busy_s": r[4],
                          "idle_helper": r[5] if len(r) > 5 else False} for r in rows])


def _procs(rows):
    """(pid, startup_s, imports_s)"""
    return pd.DataFrame([{"pid": p, "startup_s": s, "imports_s": i} for p, s, i in rows])


def _ops(rows=()):
    """(pid, operation, waiting_s)"""
    return pd.DataFrame([{"pid": p, "operation": o, "waiting_s": w} for p, o, w in rows],
                        columns=["pid", "operation", "waiting_s"])


def _util(rows):
    """(pid, rlscope_cpu_s, sampled_cpu_s)"""
    return pd.DataFrame([{"pid": p, "rlscope_cpu_s": r, "sampled_cpu_s": s,
                          "cpu_samples": 10} for p, r, s in rows])


def _vec(cls="SubprocVecEnv", workers=True, n=4, step=10.8, env_mean=0.63, env_sum=2.5,
         slowest=0.9, loss=0.27, sampling=12.0, straggler=None, k_saved=(), busy=None):
    proj = pd.DataFrame([{"design": "k envs per worker", "scenario": f"{k} envs per worker",
                          "saved_s": s} for k, s in k_saved],
                        columns=["design", "scenario", "saved_s"])
    return SimpleNamespace(pid=1, process="train.py", name=f"{cls}#1", cls=cls, num_envs=n,
                           workers=workers, complete_steps=1000, step_s=step,
                           env_mean_s=env_mean, env_sum_s=env_sum, slowest_s=slowest,
                           lockstep_loss_s=loss, overhead_s=step - slowest,
                           sampling_s=sampling, loss_share=loss / sampling,
                           straggler=straggler, straggler_share=0.9, projections=proj,
                           busy=busy)


def _lockstep(*v):
    return SimpleNamespace(vector_envs=list(v))


MAIN_AND_4 = [(1, "main", 0.0, 20.0, 12.0)] + [
    (10 + i, "vector-env worker", 1.0, 19.5, 3.0) for i in range(4)]


def test_ipc_bound_subproc_on_two_cores_first_with_dummyvecenv_and_its_bound():
    run = D.diagnose_run(_tree(MAIN_AND_4), _procs([]), _ops(), None, _lockstep(_vec()), 2,
                         "sampler")
    kinds = [r.kind for r in run]
    assert kinds[0] == "ipc" and "oversubscription" in kinds
    ipc = run[0]
    assert "IPC/scheduling" in ipc.verdict and "oversubscribed" in ipc.verdict
    assert "DummyVecEnv instead of SubprocVecEnv" in ipc.remedy
    assert "rule:" in ipc.remedy
    assert ipc.bound_s == pytest.approx(10.8 - 2.5)  # step - all envs one after another
    assert ipc.bound_share == pytest.approx(8.3 / 20.0)
    assert "lock-step table: IPC/scheduling 9.9 s of 10.8 s vector-step time" in \
        ipc.evidence[0]
    assert ipc.subject == "SubprocVecEnv#1"


def test_gymnasium_async_gets_syncvectorenv():
    run = D.diagnose_run(_tree(MAIN_AND_4), _procs([]), _ops(), None,
                         _lockstep(_vec(cls="AsyncVectorEnv")), 8, "run.json")
    assert [r.kind for r in run] == ["ipc"]  # 5 processes, 8 cores: not oversubscribed
    assert "SyncVectorEnv instead of AsyncVectorEnv" in run[0].remedy
    assert "oversubscribed" not in run[0].verdict


def test_ipc_threshold_and_heavy_envs_keep_workers():
    # IPC 40% of the step: under IPC_SHARE, no verdict.
    v = _vec(step=10.0, slowest=6.0, env_mean=5.5, env_sum=22.0, loss=0.5)
    assert not [r for r in D.diagnose_run(_tree(MAIN_AND_4), _procs([]), _ops(), None,
                                          _lockstep(v), 8) if r.kind == "ipc"]
    # IPC 60%, but the envs summed outweigh the step: in-process is slower; k per worker.
    v = _vec(step=10.0, slowest=4.0, env_mean=3.5, env_sum=14.0, loss=0.5,
             k_saved=[(2, 1.0), (4, 3.0)])
    (ipc,) = [r for r in D.diagnose_run(_tree(MAIN_AND_4), _procs([]), _ops(), None,
                                        _lockstep(v), 8) if r.kind == "ipc"]
    assert ipc.bound_s == pytest.approx(3.0) and "4 envs per worker" in ipc.remedy
    # Sequential vector envs (DummyVecEnv) never get the IPC verdict.
    v = _vec(cls="DummyVecEnv", workers=False)
    assert D.diagnose_run(_tree(MAIN_AND_4[:1]), _procs([]), _ops(), None, _lockstep(v),
                          2) == []


def test_oversubscription_with_recorded_busy_over_sampled():
    util = _util([(1, 12.0, 5.0)] + [(10 + i, 3.0, 1.5) for i in range(4)])
    run = D.diagnose_run(_tree(MAIN_AND_4), _procs([]), _ops(), util, None, 2, "sampler")
    (o,) = run
    assert o.kind == "oversubscription" and "5 processes doing work at once on 2 cores" \
        in o.verdict
    assert o.bound_s == pytest.approx(7.0)  # the main's recorded busy /proc did not give
    assert any("exceeds what /proc gave 2.2x" in e for e in o.evidence)
    assert "at most 2 processes" in o.remedy
    # Idle helpers and processes that barely work do not count; nor do ones not alive
    # at once.
    tree = _tree([(1, "main", 0, 20, 12), (2, "forkserver", 0, 20, 0.1, True),
                  (3, "worker", 0, 20, 0.5), (4, "worker", 0, 5, 4), (5, "worker", 6, 9, 3)])
    assert D.diagnose_run(tree, _procs([]), _ops(), util, None, 2) == []
    # Without a core count: no verdict (the analysing machine's is not the run's).
    assert D.diagnose_run(_tree(MAIN_AND_4), _procs([]), _ops(), util, None, None) == []


def test_oversubscription_bound_is_the_main_process_run_queue_wait():
    """With the run-queue column, the bound is the main process's wait for a core, in the
    share of the competing CPU time the run's own processes used."""
    util = _util([(1, 12.0, 5.0)] + [(10 + i, 3.0, 1.5) for i in range(4)])
    util["runq_wait_s"] = [6.0, 1.0, 1.0, 1.0, 1.0]
    (o,) = D.diagnose_run(_tree(MAIN_AND_4), _procs([]), _ops(), util, None, 2, "sampler")
    assert o.bound_s == pytest.approx(6.0) and "run-queue wait" in o.bound_of
    assert any("waited 6 s for a core" in e for e in o.evidence)
    # Processes outside the run used as much CPU as the workers (6 s): half of it.
    (o,) = D.diagnose_run(_tree(MAIN_AND_4), _procs([]), _ops(), util, None, 2, "sampler",
                          outside_cpu_s=6.0)
    assert o.bound_s == pytest.approx(3.0)
    assert any("processes outside the run 6 s" in e for e in o.evidence)
    # Unknown (a file from before the column): the recorded-busy excess, as before.
    util["runq_wait_s"] = np.nan
    (o,) = D.diagnose_run(_tree(MAIN_AND_4), _procs([]), _ops(), util, None, 2, "sampler")
    assert o.bound_s == pytest.approx(7.0)


def test_oversubscription_counts_processes_that_burn_cpu_outside_operations():
    """Helpers with nothing recorded (idle helpers to the trace: their thread's time is not
    work) that /proc saw using CPU do work."""
    tree = _tree([(1, "main", 0.0, 20.0, 12.0)] + [(10 + i, "child", 1.0, 19.0, 18.0, True)
                                                    for i in range(4)])
    util = _util([(1, 12.0, 5.0)] + [(10 + i, 0.0, 8.0) for i in range(4)])
    (o,) = D.diagnose_run(tree, _procs([]), _ops(), util, None, 2, "sampler")
    assert "5 processes doing work at once on 2 cores" in o.verdict
    assert D.diagnose_run(tree, _procs([]), _ops(), None, None, 2) == []  # not sampled
    # Actors whose recorded busy time is their lifetime (Ray) but that /proc saw idle
    # do no work.
    actors = _tree([(1, "main", 0.0, 20.0, 12.0)] + [(10 + i, "ray actor", 1.0, 19.0, 18.0)
                                                      for i in range(4)])
    util = _util([(1, 12.0, 5.0)] + [(10 + i, 18.0, 0.2) for i in range(4)])
    assert D.diagnose_run(actors, _procs([]), _ops(), util, None, 2, "sampler") == []


def test_oversubscription_with_vector_env_workers_names_fewer_workers_or_dummy():
    v = _vec(step=1.0, slowest=0.9, env_mean=0.85, env_sum=3.4, loss=0.05)  # no IPC verdict
    (o,) = D.diagnose_run(_tree(MAIN_AND_4), _procs([]), _ops(), None, _lockstep(v), 2)
    assert "at most 1 worker(s) beside the main process" in o.remedy
    assert "DummyVecEnv" in o.remedy
    assert o.bound_s == 0 and "sampler was off" in o.bound_of


def test_lockstep_loss_with_a_straggler_above_the_threshold():
    v = _vec(step=10.0, slowest=9.0, env_mean=5.0, env_sum=20.0, loss=4.0, sampling=12.0,
             straggler=2)
    run = D.diagnose_run(_tree(MAIN_AND_4), _procs([]), _ops(), None, _lockstep(v), 8)
    (loss,) = [r for r in run if r.kind == "lockstep-loss"]
    assert "env 2 is the straggler" in loss.verdict and loss.bound_s == pytest.approx(4.0)
    assert "make env 2 as fast" in loss.remedy
    # With each step's env times: fixing env 2 saves its excess over the next slowest
    # env in each step, (3 - 2) + (4 - 2) s, not the whole loss.
    v.busy = np.array([[1.0, 1.0, 3.0, 2.0], [1.0, 2.0, 4.0, 1.0]])
    run = D.diagnose_run(_tree(MAIN_AND_4), _procs([]), _ops(), None, _lockstep(v), 8)
    (loss,) = [r for r in run if r.kind == "lockstep-loss"]
    assert loss.bound_s == pytest.approx(3.0) and "next slowest" in loss.bound_of
    small = _vec(step=10.0, slowest=9.0, env_mean=8.5, env_sum=34.0, loss=1.0,
                 sampling=12.0)  # 8%: under LOSS_SHARE
    assert not [r for r in D.diagnose_run(_tree(MAIN_AND_4), _procs([]), _ops(), None,
                                          _lockstep(small), 8) if r.kind == "lockstep-loss"]


def test_overlapping_start_ups_are_one_entry_after_the_per_step_costs():
    procs = _procs([(1, 12.0, 3.0)] + [(10 + i, 6.0, 5.0) for i in range(4)])
    ops = _ops([(1, "(start-up)", 4.0), (1, "(start-up) > imports", 0.0)])
    run = D.diagnose_run(_tree(MAIN_AND_4), procs, ops, None, _lockstep(_vec()), 2)
    starts = [r for r in run if r.kind == "start-up"]
    assert len(starts) == 1 and run[-1] is starts[0] and not starts[0].recurring
    s = starts[0]
    assert s.bound_s == pytest.approx(12.0)  # [0, 12] and [1, 7]: their union
    assert starts[0].bound_s > run[0].bound_s  # listed last all the same: paid once
    assert any("the main process waited 4 s (33% of its 12 s start-up) on its 4 worker "
               "processes' start-up (their imports 5 s each" in e for e in s.evidence)
    # Under MIN_RUN_SHARE of the run: no entry.
    tiny = _procs([(1, 0.5, 0.1)])
    assert not D.diagnose_run(_tree(MAIN_AND_4), tiny, _ops(), None, None, 8)
    (one,) = D.diagnose_run(_tree(MAIN_AND_4[:1]), _procs([(1, 4.0, 3.0)]), _ops(), None,
                            None, 8)
    assert "before its first operation" in one.verdict and "worker" not in one.remedy


def _verdict(pid, op, bound):
    return D.Verdict(pid, "train.py", op, 1.0, 0.5, bound, {}, ["Python 90%"],
                     "less Python per step: vectorise across envs", 0.9, "the Python time")


def test_refine_folds_start_ups_and_the_vector_step_python_verdict():
    ls = _lockstep(_vec())
    run = D.diagnose_run(_tree(MAIN_AND_4), _procs([]), _ops(), None, ls, 2)
    per_op = [_verdict(1, "(start-up)", "start-up, paid once per process"),
              _verdict(10, "(start-up)", "start-up, paid once per process"),
              _verdict(1, "simulation", "Python"), _verdict(1, "inference", "Python"),
              _verdict(10, "simulation", "Python")]
    out = D.refine(per_op, run, ls)
    assert [(v.pid, v.operation) for v in out] == [(1, "inference"), (10, "simulation")]
    # Not explained by an IPC verdict (in-process envs): kept, without "vectorise".
    ls = _lockstep(_vec(cls="DummyVecEnv", workers=False))
    (sim,) = D.refine([_verdict(1, "simulation", "Python")], [], ls)
    assert "already vectorised (DummyVecEnv#1)" in sim.remedy
    assert "vectorise across" not in sim.remedy


def test_rendered_first_in_text_and_json():
    run = D.diagnose_run(_tree(MAIN_AND_4), _procs([(1, 8.0, 3.0)]), _ops(), None,
                         _lockstep(_vec()), 2)
    per_op = [_verdict(1, "inference", "Python")]
    text = render.lines(per_op, [], run)
    assert text[1].startswith("  1. SubprocVecEnv#1") and "IPC/scheduling" in text[1]
    assert text.index("  Per operation:") > max(i for i, t in enumerate(text)
                                                if t.lstrip().startswith("remedy: step"))
    d = render.section(per_op, [], run).data()
    assert d["run_diagnosis"][0]["kind"] == "ipc"
    assert set(d["run_diagnosis"][0]) >= {"kind", "verdict", "evidence", "remedy",
                                          "bound_s", "bound_share"}


def test_run_cores_from_the_sampler_then_run_json():
    s = SimpleNamespace(core_index=np.array([0, 1, 0, 1], np.uint32))
    assert D.run_cores({"host": {"cpus": 64}}, s) == (2, "sampler, /proc/stat")
    assert D.run_cores({"host": {"cpus": 64}}, None) == (64, "run.json host.cpus")
    assert D.run_cores({}, None) == (None, "")
