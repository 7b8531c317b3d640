"""Lock-step analysis of vector envs on hand-built timelines (rlscope.analysis.lockstep),
and the vector-env recording on real recordings in this process (both recorders)."""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path

import numpy as np
import pytest

import rlscope
from rlscope.analysis import intervals
from rlscope.analysis import lockstep as ls
from rlscope.analysis.lockstep import barrier, reader
from rlscope.reporters import lockstep as render
from rlscope.trace import format as fmt
from rlscope.trace.data import EnvEvents
from rlscope.trace.reader import read_trace

MS = 1_000_000
STEP_B, STEP_E = fmt.ENV_STEP_BEGIN, fmt.ENV_STEP_END
RESET_B, RESET_E = fmt.ENV_RESET_BEGIN, fmt.ENV_RESET_END


def proc(pid: int, env: list[tuple[int, int, str, int]], metadata: dict | None = None,
         calls: list[tuple[int, int, str]] = (), thread: int = 0) -> ls.ProcessEvents:
    """env rows: (time_ns, kind, name, index); calls: (time_ns, kind, name) for
    operations and wait calls."""
    strings = [""]

    def sid(s: str) -> int:
        if s not in strings:
            strings.append(s)
        return strings.index(s)

    e = EnvEvents(np.array([r[0] for r in env], np.int64),
                  np.full(len(env), thread, np.uint32),
                  np.array([r[1] for r in env], np.uint8),
                  np.array([sid(r[2]) for r in env], np.uint32),
                  np.array([r[3] for r in env], np.int64))
    t = np.array([c[0] for c in calls], np.int64)
    k = np.array([c[1] for c in calls], np.uint8)
    n = np.array([sid(c[2]) for c in calls], np.uint32)
    return reader._process(pid, f"p{pid}", strings, metadata or {}, e, t,
                       np.full(len(calls), thread, np.uint32), k, n)


def vector_run(busy: list[list[float]], gap_ms: float = 1.0, send_ms: float = 0.2,
               cls: str = "SubprocVecEnv", resets_in_step: dict | None = None,
               extra_calls: list[tuple[int, int, str]] = ()) -> list[ls.ProcessEvents]:
    """A main process stepping a worker vector env; busy[v][i]: ms env i works in step v.
    Each vector step: send, the envs start right after, the wait ends gap_ms after the
    slowest."""
    name = f"{cls}#1"
    n = len(busy[0])
    main_env, calls = [], []
    workers: list[list] = [[] for _ in range(n)]
    t = 10 * MS
    for v, row in enumerate(busy):
        main_env.append((t, STEP_B, name, -1))
        w0 = t + int(send_ms * MS)
        calls.append((w0, fmt.WAIT_CALL_BEGIN, f"{cls}.step_wait"))
        for i, b in enumerate(row):
            s = w0 + 1000
            workers[i] += [(s, STEP_B, "E", i), (s + int(b * MS), STEP_E, "E", -1)]
            extra = (resets_in_step or {}).get((v, i))
            if extra:
                e0 = s + int(b * MS)
                workers[i] += [(e0, RESET_B, "E", i), (e0 + int(extra * MS), RESET_E, "E", -1)]
        slowest = max(b + (resets_in_step or {}).get((v, i), 0) for i, b in enumerate(row))
        end = w0 + 1000 + int(slowest * MS) + int(gap_ms * MS)
        calls.append((end - 100, fmt.WAIT_CALL_END, f"{cls}.step_wait"))
        main_env.append((end, STEP_E, name, -1))
        t = end + 5 * MS  # inference etc. between steps
    meta = {fmt.META_VECENVS: [{"name": name, "class": cls, "num_envs": n, "workers": True}]}
    out = [proc(1, main_env, meta, sorted(calls + list(extra_calls)))]
    for i in range(n):
        out.append(proc(10 + i, workers[i], {fmt.META_VECENV: {"pid": 1, "name": name},
                                             fmt.META_ENV_INDEX: i}))
    return out


def test_barrier_loss_straggler_and_overhead():
    busy = [[2, 3, 10], [2, 2, 2], [4, 2, 3]]
    r = ls.analyze(vector_run(busy))
    assert r.warnings == []
    (v,) = r.vector_envs
    assert (v.vector_steps, v.complete_steps, v.num_envs, v.workers) == (3, 3, 3, True)
    B = np.array(busy) / 1e3
    assert v.lockstep_loss_s == pytest.approx((B.max(1) - B.mean(1)).sum())
    assert v.idle_env_s == pytest.approx((B.max(1)[:, None] - B).sum())
    assert v.envs["barrier_wait_s"].tolist() == pytest.approx(
        (B.max(1)[:, None] - B).sum(0).tolist())
    assert v.straggler == 2 and v.straggler_share > 0.8
    assert v.envs["slowest_steps"].tolist() == [2, 0, 1]  # ties go to the first env
    # Vector step = send + wait; overhead = everything but the slowest env.
    assert v.send_s == pytest.approx(3 * 0.2e-3)
    assert v.step_s == pytest.approx(v.send_s + v.wait_s)
    assert v.overhead_s == pytest.approx(v.step_s - B.max(1).sum())
    assert v.step_s == pytest.approx(v.env_mean_s + v.lockstep_loss_s + v.overhead_s)
    assert v.envs["steps"].tolist() == [3, 3, 3]
    assert v.envs.loc[2, "step_max_ms"] == pytest.approx(10)
    assert v.envs.loc[0, "step_p50_ms"] == pytest.approx(2)


def test_reset_inside_a_step_command_counts_toward_it():
    busy = [[2, 2], [2, 2]]
    r = ls.analyze(vector_run(busy, resets_in_step={(1, 0): 5.0}))
    (v,) = r.vector_envs
    assert v.per_step["slowest_env"].tolist() == [0, 0]
    assert v.per_step["slowest_s"].tolist()[1] == pytest.approx(7e-3)
    assert v.envs["resets"].tolist() == [1, 0]
    assert v.envs["steps"].tolist() == [2, 2]  # the distribution is of steps only


def test_missing_env_events_leave_the_step_out_and_warn():
    procs = vector_run([[2, 3], [2, 9], [4, 2]])
    w = procs[2]  # env 1: drop its second step's events
    keep = np.ones(len(w.env), bool)
    keep[[2, 3]] = False
    w.env = EnvEvents(*(getattr(w.env, f)[keep] for f in
                        ("time_ns", "thread", "kind", "name", "index")))
    r = ls.analyze(procs)
    (v,) = r.vector_envs
    assert (v.vector_steps, v.complete_steps) == (3, 2)
    assert any("1 of 3 vector steps" in m for m in r.warnings)
    assert v.lockstep_loss_s == pytest.approx(((3 - 2.5) + (4 - 3)) / 1e3)


def test_a_begin_without_end_is_skipped():
    procs = vector_run([[2, 3], [3, 2]])
    w = procs[1]
    # A killed step (begin, no end) in the middle pairs with nothing.
    t = int(w.env.time_ns[1]) + 1
    w.env = EnvEvents.concat([EnvEvents(w.env.time_ns[:2], w.env.thread[:2], w.env.kind[:2],
                                        w.env.name[:2], w.env.index[:2]),
                              EnvEvents(np.array([t]), np.zeros(1, np.uint32),
                                        np.array([STEP_B], np.uint8), w.env.name[:1],
                                        np.array([0])),
                              EnvEvents(w.env.time_ns[2:], w.env.thread[2:], w.env.kind[2:],
                                        w.env.name[2:], w.env.index[2:])])
    (v,) = ls.analyze(procs).vector_envs
    assert v.complete_steps == 2 and v.envs.loc[0, "steps"] == 2


def test_workers_of_another_vector_env_are_not_joined():
    procs = vector_run([[2, 3], [3, 2]])
    stray = vector_run([[50, 50], [50, 50]])[1]
    stray.pid = 99
    stray.metadata = {fmt.META_VECENV: {"pid": 1, "name": "SubprocVecEnv#2"}}
    (v,) = ls.analyze([*procs, stray]).vector_envs
    assert v.envs["busy_s"].max() < 0.01


def test_no_straggler_when_the_loss_is_spread():
    """Each env the slowest in turn: the loss is spread evenly and no env is named (one
    is only when it causes at least halfway between an even share and all the loss)."""
    busy = [[3, 2, 2, 2], [2, 3, 2, 2], [2, 2, 3, 2], [2, 2, 2, 3], [4, 2, 2, 2]]
    (v,) = ls.analyze(vector_run(busy)).vector_envs
    assert v.straggler is None and v.straggler_share == pytest.approx(0.5)
    assert ls.straggler_min_share(4) == 0.625 and ls.straggler_min_share(2) == 0.75
    text = "\n".join(render.vector_env_lines(v))
    assert "(5 vector steps now take" in text  # the projections' header is untouched
    assert "No straggler: the largest share of the lock-step loss, env 0's, is 50% " \
           "(an even spread gives 25% each; a straggler causes at least 62%)" in text
    # The same envs with one that is slow in every step: named.
    busy = [[2, 2, 2, 5]] * 5
    (v,) = ls.analyze(vector_run(busy)).vector_envs
    assert v.straggler == 3 and v.straggler_share == 1.0


def sequential_run(steps: list[list[float]], order: list[list[int]] | None = None
                   ) -> ls.VectorEnv:
    """A DummyVecEnv stepping its envs one after another (in ``order``, per vector step;
    default 0..n-1), env i busy steps[v][i] ms in vector step v."""
    name = "DummyVecEnv#1"
    rows, t = [], 0
    for v, busy in enumerate(steps):
        rows.append((t, STEP_B, name, -1))
        t += 100
        for i in (order[v] if order else range(len(busy))):
            rows += [(t, STEP_B, "Env", i), (t + int(busy[i] * MS), STEP_E, "Env", -1)]
            t += int(busy[i] * MS) + 100
        rows.append((t, STEP_E, name, -1))
        t += MS
    meta = {fmt.META_VECENVS: [{"name": name, "class": "DummyVecEnv",
                                "num_envs": len(steps[0]), "workers": False}]}
    (v,) = ls.analyze([proc(1, rows, meta)]).vector_envs
    return v


def test_the_env_stepped_first_is_named_with_the_straggler():
    """Sequential envs: the one stepped first after the policy runs with cold caches,
    whichever it is. A straggler that is also
    the first-stepped env carries a caveat; one stepped later does not."""
    v = sequential_run([[3, 1, 1]] * 10)
    assert v.first_env == 0 and v.straggler == 0
    text = "\n".join(render.vector_env_lines(v))
    assert "env 0 is stepped first in (nearly) every vector step" in text
    v = sequential_run([[1, 1, 3]] * 10)
    assert v.first_env == 0 and v.straggler == 2
    assert "stepped first" not in "\n".join(render.vector_env_lines(v))
    # No fixed first env (the order varies): none named.
    v = sequential_run([[3, 1, 1]] * 10, order=[[0, 1, 2], [1, 2, 0]] * 5)
    assert v.first_env is None and "stepped first" not in "\n".join(
        render.vector_env_lines(v))


def test_sequential_vector_env_has_no_barrier():
    v = sequential_run([[1, 4], [1, 2]])
    assert not v.workers and v.lockstep_loss_s == 0 and v.idle_env_s == 0
    assert v.env_sum_s == pytest.approx(8e-3)
    assert v.overhead_s == pytest.approx(v.step_s - v.env_sum_s)
    assert v.straggler == 1
    assert v.envs["pid"].tolist() == [1, 1]
    p = v.projections.set_index("scenario")
    assert p.loc["one worker process per env, lock-step", "step_s"] == pytest.approx(6e-3)
    assert np.isnan(v.send_s)


def test_sampling_table_and_projections():
    busy = [[2, 2, 10], [2, 2, 2], [2, 2, 2], [2, 2, 2]]
    steps = barrier._vector_intervals(vector_run(busy)[0], "SubprocVecEnv#1", False)
    # inference before each step, backprop after the second step and after the last.
    calls = [(int(b) - 2 * MS, fmt.OPERATION_BEGIN, "inference") for b in steps.begin]
    calls += [(int(b) - MS, fmt.OPERATION_END, "inference") for b in steps.begin]
    for e in (steps.end[1], steps.end[3]):
        calls += [(int(e) + MS, fmt.OPERATION_BEGIN, "backprop"),
                  (int(e) + 3 * MS, fmt.OPERATION_END, "backprop")]
    procs = vector_run(busy, extra_calls=calls)
    r = ls.analyze(procs)
    (t,) = r.tables
    (v,) = r.vector_envs
    window = steps.end[-1] - steps.begin[0]
    assert t.optimizing_s == pytest.approx(4e-3)
    assert t.sampling_s == pytest.approx((window - 2 * MS) / 1e9)  # one backprop inside
    assert t.inference_s == pytest.approx(3e-3)  # the first one starts before the window
    assert t.step_s == pytest.approx(v.step_s)
    assert t.sampling_s == pytest.approx(t.reset_s + t.inference_s + t.step_s + t.other_s)
    p = v.projections.set_index("scenario")
    B = np.array(busy) / 1e3
    ipc = v.overhead_s
    free = B.shape[1] / (1 / B.sum(0)).sum()
    assert p.loc["asynchronous: no barrier", "step_s"] == pytest.approx(free + ipc)
    rollout = [s for s in p.index if "rollout" in s]
    assert rollout and p.loc[rollout[0], "step_s"] == pytest.approx(
        (B[:2].sum(0).max() + B[2:].sum(0).max()) + ipc)
    G = B.reshape(2, 2, 3).sum(1)
    k2 = (G.max(1).sum() + 2 * ipc / 4) / 4 * 4
    assert p.loc["2 envs per worker (same workers)", "step_s"] == pytest.approx(k2)
    assert (p["sampling_speedup"] >= 1).all()


def test_outermost_operations_merge_nested_ones():
    t = np.array([0, 1, 2, 3, 10, 11, 12], np.int64)
    k = np.array([1, 1, 2, 2, 2, 1, 2], np.uint8)  # a stray end at 10
    iv, pos = reader._pairs(t, np.zeros(7, np.uint32), k, np.ones(7, np.uint32), 1, 2, True)
    assert iv.begin.tolist() == [0, 11] and iv.end.tolist() == [3, 12]
    assert pos.tolist() == [0, 5]


def test_interval_union_and_overlap():
    b, e = intervals.union(np.array([5, 0, 2, 20]), np.array([8, 3, 4, 25]))
    assert b.tolist() == [0, 5, 20] and e.tolist() == [4, 8, 25]
    assert intervals.overlap(b, e, np.array([3, 7]), np.array([6, 22])) == 1 + 1 + 1 + 2


def test_render_formats():
    r = ls.analyze(vector_run([[2, 3, 10], [2, 2, 2]]))
    text = render.render(r, "text")
    assert "Straggler: env 2" in text and "Lock-step loss" in text and "Sampling" in text
    d = json.loads(render.render(r, "json"))
    assert d["vector_envs"][0]["straggler"] == 2
    assert d["vector_envs"][0]["envs"][2]["steps"] == 2
    assert render.render(r, "csv").splitlines()[0].startswith("vector_pid,vector_env,env")
    assert "| env |" in render.render(r, "markdown").replace("vector_pid | vector_env | ", "")
    fig = render.figure(r)
    assert len(fig.axes) == 1


# -- recording (in this process) -------------------------------------------------------

gym = pytest.importorskip("gymnasium")


class Tiny(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), 1.0, False, False, {}


class Outer(gym.Wrapper):
    pass


def make_env() -> gym.Env:
    return Outer(Tiny())


@pytest.fixture
def intercepted():
    from rlscope import intercept

    intercept.enable("gym,sb3")
    try:
        yield
    finally:
        intercept.disable()


def _lockstep_of(out: Path) -> ls.Lockstep:
    rlscope.stop()
    return ls.analyze(ls.from_trace(read_trace(out)))


@pytest.fixture
def every_step(monkeypatch):
    """Sequential vector envs sample their envs' steps: here every one."""
    from rlscope.integrations import vecenv

    monkeypatch.setattr(vecenv, "SAMPLE_NS_PER_ENV", 0)


def test_sync_vector_env_records_each_env(recording: Path, intercepted, every_step):
    envs = gym.vector.SyncVectorEnv([make_env] * 3)
    envs.reset(seed=0)
    for _ in range(4):
        envs.step(np.zeros(3, np.int64))
    inner = envs.envs[1]
    assert type(inner) is Outer and "step" not in vars(inner)  # nothing set on the env
    r = _lockstep_of(recording)
    (v,) = r.vector_envs
    assert (v.cls, v.num_envs, v.workers, v.vector_steps, v.complete_steps,
            v.vector_resets) == ("SyncVectorEnv", 3, False, 4, 4, 1)
    assert v.envs["steps"].tolist() == [4, 4, 4] and v.envs["resets"].tolist() == [1, 1, 1]
    assert v.envs["name"].tolist() == ["Outer"] * 3


def test_sync_vector_env_samples_its_envs(recording: Path, intercepted, monkeypatch):
    """With a long sampling interval only the first call (the reset) records its envs;
    the steps are not "incomplete": no warning."""
    from rlscope.integrations import vecenv

    monkeypatch.setattr(vecenv, "SAMPLE_NS_PER_ENV", 10**12)
    envs = gym.vector.SyncVectorEnv([make_env] * 3)
    envs.reset(seed=0)
    for _ in range(5):
        envs.step(np.zeros(3, np.int64))
    assert type(envs.envs[0]) is Outer and "step" not in vars(envs.envs[0])  # restored
    r = _lockstep_of(recording)
    (v,) = r.vector_envs
    assert (v.vector_steps, v.complete_steps, v.vector_resets) == (5, 0, 1)
    assert v.envs["steps"].tolist() == [0, 0, 0] and v.envs["resets"].tolist() == [1, 1, 1]
    assert r.warnings == []


def test_sb3_dummy_vec_env_records_each_env(recording: Path, intercepted, every_step):
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.vec_env import DummyVecEnv

    venv = DummyVecEnv([make_env] * 2)
    venv.reset()
    for _ in range(3):
        venv.step(np.zeros(2, np.int64))
    (v,) = _lockstep_of(recording).vector_envs
    assert (v.cls, v.vector_steps, v.complete_steps) == ("DummyVecEnv", 3, 3)
    assert v.envs["steps"].tolist() == [3, 3]


def test_nothing_changes_without_a_recording(intercepted):
    envs = gym.vector.SyncVectorEnv([make_env] * 2)
    assert "step" not in vars(envs.envs[0]) and "_rlscope_vecenv" not in vars(envs)
    envs.step(np.zeros(2, np.int64))


def test_env_factory_pickles_and_recorded_envs_copy(recording: Path):
    from rlscope.integrations.vecenv import EnvFactory, record_env

    f = EnvFactory(make_env, 1, 2, "AsyncVectorEnv", "AsyncVectorEnv#9", -1, False)
    g = pickle.loads(pickle.dumps(f))
    assert (g.index, g.vec_name, g.fn) == (1, "AsyncVectorEnv#9", make_env)
    env = make_env()
    assert record_env(env, 0)
    env.reset()
    for dup in (copy.deepcopy(env), pickle.loads(pickle.dumps(env))):
        assert type(dup) is Outer
        dup.reset()
        assert dup.step(0)[1] == 1.0
    # A worker (pid differs from the owner's) announces its role.
    env2 = g()
    assert "step" in vars(env2)
    rlscope.stop()
    p = read_trace(recording).processes[0]
    assert p.metadata[fmt.META_ROLE] == fmt.ROLE_VECENV_WORKER
    assert p.metadata[fmt.META_ENV_INDEX] == 1 and p.metadata[fmt.META_NUM_ENVS] == 2
    assert p.metadata[fmt.META_ROLE_DETAIL] == "AsyncVectorEnv"
    assert p.metadata[fmt.META_VECENV] == {"pid": -1, "name": "AsyncVectorEnv#9"}


def test_lockstep_command_without_vector_envs_is_one_line_error(tmp_path: Path):
    from tests.conftest import run_tool

    rlscope.start(tmp_path / "t")
    with rlscope.operation("x"):
        pass
    rlscope.stop()
    r = run_tool("rls-analyze", "lockstep", str(tmp_path / "t"))
    assert r.returncode == 2 and "has no vector env steps" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
