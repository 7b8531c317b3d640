"""A training-like loop whose operations time themselves (perf_counter around each), so
an uninstrumented run gives the true time per operation (issue 22's per-operation ground
truth). Annotated with rlscope.operation, a no-op unless rls-prof records.

    python scripts/bench/workloads/selftimed.py KIND STEPS OUT.json [LOG_DIR]

KIND:
- ``cartpole``: a fast env step (gymnasium CartPole, ~2-5 µs) and a tiny MLP policy's
  inference each step; a backprop on the last 64 steps every 32 steps;
- ``mujoco``: the same loop on MuJoCo's HalfCheetah-v5 (a ~50 µs step, continuous
  actions);
- ``dqn``: many small backend calls: inference is 12 small torch ops on a 1x4 input, a
  step of CartPole, a 64-sample backprop every 4 steps;
- ``pool``: a multiprocessing Pool(2) (fork) simulates in its workers (each task a few
  hundred CartPole steps, annotated as simulation there); the main process waits for
  them in ``pool.map`` (its ``simulation``) and does inference on the results.
  Per-operation truth is the main process's.
- ``pool_short``: the same with short tasks (20 steps of a CartPole each worker keeps,
  ~0.1 ms), so that what the pool integration costs per task and per call (the cost
  model's pool kinds) is a visible part of the main process's wait.
- ``pool_torch``: the same with tasks of many small backend calls in the workers (a
  learned model stepped 1,500 times: ~4,500 recorded calls per task), so that the
  workers' book-keeping is a visible part of the main process's wait.
- ``sb3``: stable-baselines3 PPO on a ``SubprocVecEnv`` of 4 CartPoles (STEPS: total
  timesteps), its own methods timed: ``VecEnv.step`` (simulation), the policy's
  ``forward``/``predict_values`` (inference), ``PPO.train`` (backprop). Per-operation
  truth is the main process's.

Each operation's clock reads sit *inside* its rlscope scope, and every copy of the
process does them: a profiled run's operation covers exactly the self-timed span plus
one clock read (the reads' cost is measured at start and added back, see ``read_ns``).
Every 32 steps (every step for ``pool``) the loop calls ``rlscope.report_progress``, so
``rls-prof --calibrate`` can calibrate it by chunks.

OUT.json: {operation: seconds} summed over the run (the main process's own timings).

``SELFTIMED_BLOCKS=N`` (every kind, under rls-prof): recording is
switched off and on in every process of the run, block by block (on, off, off, on, ...;
a block is N loop steps, N pool iterations, or N PPO iterations: rollouts and their
training; ``SELFTIMED_SAMPLE_HZ``: the recorded blocks' Python stacks sampled too), with
each switch outside the timed operations (the workers switch first, a pool's both at
once). A recorded block is a new session of each process, whose first events pay for
setting it up (~50 µs a process here): blocks of ~0.1 s or more keep that below 0.1%.
The first session (start-up, the workers' spawn) ends before the first block.
OUT.json then also holds ``"blocks"``: per block whether it recorded, its self-timed
seconds per operation and their counts (``"n"``), ``"pid"`` and ``"read_ns"``. A
recorded block is the session of each process whose metadata says
``selftimed_block``: its neighbour that did not record did the same work, in the same
processes, moments apart (whole runs of identical processes differ by ±10% here:
scripts/bench/correction_per_op.py --blocks).
LOG_DIR (optional): at every progress report, before reporting it, the process appends
a line to ``LOG_DIR/<pid>.jsonl``: per operation the nanoseconds and count since the
previous line and the spans longer than 200 µs among them as [start, end]
(perf_counter_ns, CLOCK_MONOTONIC); it starts afresh at fork, so a chunk copy's file
covers its chunk alone, and the spans let the benchmark cut out the time a copy was
stopped while the others ran.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym
import numpy as np
import torch

import rlscope
from rlscope import annotate

torch.set_num_threads(1)
LONG_NS = 200_000  # shorter than any pause of a chunk copy (the others' turns: >= 1 ms)
PROGRESS_EVERY = 32


def _read_cost_ns() -> float:
    """What one perf_counter_ns read adds to a span (median of back-to-back reads)."""
    clock = time.perf_counter_ns
    d = []
    for _ in range(2001):
        a = clock()
        d.append(clock() - a)
    return float(np.median(d))


class Timer:
    def __init__(self, log_dir: str | None = None) -> None:
        self.log_dir = log_dir
        self.read_ns = _read_cost_ns()
        self.ops: dict[str, _Op] = {}
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        for o in self.ops.values():
            o.sum_ns, o.n, o.long = 0, 0, []

    def op(self, name: str) -> _Op:
        o = self.ops.get(name)
        if o is None:
            o = self.ops[name] = _Op(name)
        return o

    @property
    def total(self) -> dict[str, float]:
        return {k: o.total_ns / 1e9 for k, o in self.ops.items()}

    def progress(self, i: int, n: int) -> None:
        if self.log_dir:
            data = {"read_ns": self.read_ns,
                    "ops": {k: {"sum_ns": o.sum_ns, "n": o.n, "long": o.long}
                            for k, o in self.ops.items()}}
            with open(os.path.join(self.log_dir, f"{os.getpid()}.jsonl"), "a") as f:
                f.write(json.dumps(data) + "\n")
            self._reset()  # the next line has what follows (the totals stay in OUT.json)
        rlscope.report_progress(i, n)


class _Op:
    __slots__ = ("long", "n", "name", "scope", "sum_ns", "t0", "total_n", "total_ns")

    def __init__(self, name: str) -> None:
        self.name = name
        self.sum_ns, self.n, self.long = 0, 0, []
        self.total_ns = self.total_n = 0  # the whole run's, for OUT.json

    def __enter__(self) -> None:
        self.scope = rlscope.operation(self.name)
        self.scope.__enter__()
        self.t0 = time.perf_counter_ns()

    def __exit__(self, *exc: object) -> None:
        t1 = time.perf_counter_ns()
        self.scope.__exit__(*exc)
        dt = t1 - self.t0
        self.sum_ns += dt
        self.total_ns += dt
        self.n += 1
        self.total_n += 1
        if dt > LONG_NS:
            self.long.append([self.t0, t1])


BLOCKS = int(os.environ.get("SELFTIMED_BLOCKS") or 0)  # iterations per block (0: none)
# With blocks: the Python stack sampler's rate in the recorded blocks of every process
# (as rls-prof runs it; 0: none). rls-prof's own sampler must be off: it would sample
# every block, recorded or not.
SAMPLE_HZ = float(os.environ.get("SELFTIMED_SAMPLE_HZ") or 0)


class Blocks:
    """Recording switched off and on by blocks in this process and, through ``follow``
    (called with the directory to record into, or None), in the workers."""

    def __init__(self, t: Timer, follow: Callable[[str | None], None]) -> None:
        self.t, self.follow = t, follow
        self.dir = annotate.output_dir() if BLOCKS else None
        self.rows: list[dict] = []
        self.k = -1
        self.on = False
        self.mark: dict[str, int] = {}
        self.mark_n: dict[str, int] = {}
        if self.dir is not None:
            _record_into(None)  # the start-up's session: blocks begin recorded or not
            follow(None)

    def next(self) -> None:
        """Ends the current block (if any) and begins the next."""
        self.close()
        self.k += 1
        self.on = self.dir is not None and (self.k % 2 == 0) == ((self.k // 2) % 2 == 0)
        self.follow(self.dir if self.on else None)
        if self.on:
            _record_into(self.dir)
            rlscope.set_metadata(selftimed_block=self.k)
        self.mark = {k: o.total_ns for k, o in self.t.ops.items()}
        self.mark_n = {k: o.total_n for k, o in self.t.ops.items()}

    def close(self) -> None:
        if self.k < 0 or (self.rows and self.rows[-1]["block"] == self.k):
            return
        ops = {k: (o.total_ns - self.mark.get(k, 0)) / 1e9 for k, o in self.t.ops.items()}
        n = {k: o.total_n - self.mark_n.get(k, 0) for k, o in self.t.ops.items()}
        self.rows.append({"block": self.k, "on": self.on, "ops": ops, "n": n})
        if self.on:
            _record_into(None)


def _record_into(directory: str | None) -> None:
    """This process records into ``directory`` from now on (None: not at all), its
    Python stacks sampled meanwhile at SAMPLE_HZ."""
    from rlscope.inprocess import pysampler

    pysampler.stop()
    if rlscope.is_active():
        rlscope.stop()
    if directory:
        rlscope.start(directory)
        if SAMPLE_HZ:
            pysampler.start(directory, SAMPLE_HZ)


_barrier: list[Any] = []


def _init_worker(barrier: Any) -> None:
    _barrier.append(barrier)


def _switch(directory: str | None) -> None:
    """A pool task: this worker records into ``directory``; then waits for the other."""
    _record_into(directory)
    _barrier[0].wait(120)


def _sim_task(seed: int, steps: int = 300) -> float:
    env = gym.make("CartPole-v1")
    env.reset(seed=seed)
    total = 0.0
    with rlscope.operation("simulation"):
        for _ in range(steps):
            _obs, r, term, trunc, _ = env.step(env.action_space.sample())
            total += float(r)
            if term or trunc:
                env.reset()
    return total


_kept: dict[str, Any] = {}  # a worker's CartPole for the short tasks


def _short_task(seed: int, steps: int = 20) -> float:
    env = _kept.get("env")
    if env is None:
        env = _kept["env"] = gym.make("CartPole-v1")
        env.reset(seed=seed)
    total = 0.0
    with rlscope.operation("simulation"):
        for _ in range(steps):
            _obs, r, term, trunc, _ = env.step(seed % 2)
            total += float(r)
            if term or trunc:
                env.reset()
    return total


def _model_task(seed: int, steps: int = 1500) -> float:
    """A learned model stepped in a worker: many small backend calls (a few µs each)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 4, generator=g)
    w = torch.randn(4, 4, generator=g) * 0.5
    with rlscope.operation("simulation"):
        for _ in range(steps):
            x = torch.tanh(x @ w) + 0.01
    return float(x.sum())


def main() -> None:
    kind, steps, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    torch.manual_seed(0)
    t = Timer(sys.argv[4] if len(sys.argv) > 4 else None)
    if kind == "sb3":
        blocks = _sb3(t, steps)
        _write(out, t.total, blocks, t.read_ns)
        return
    if kind in ("pool", "pool_short", "pool_torch"):
        task = {"pool": _sim_task, "pool_short": _short_task, "pool_torch": _model_task}[kind]
        forwards = 20 if kind == "pool_short" else 200
        policy = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh(),
                                     torch.nn.Linear(32, 2))
        import multiprocessing as mp

        ctx = mp.get_context("fork")
        extra: dict[str, Any] = {}
        if BLOCKS:
            extra = {"initializer": _init_worker, "initargs": (ctx.Barrier(2),)}
        with ctx.Pool(2, **extra) as pool:
            blocks = Blocks(t, lambda d: pool.map(_switch, [d, d], chunksize=1))
            for i in range(steps):
                if BLOCKS and i % BLOCKS == 0:
                    blocks.next()
                with t.op("simulation"):  # the wait for the workers' simulation
                    results = pool.map(task, [2 * i, 2 * i + 1])
                with t.op("inference"), torch.no_grad():
                    for _ in range(forwards):
                        policy(torch.tensor([results[:2] + results[:2]], dtype=torch.float32))
                t.progress(i + 1, steps)
            blocks.close()
        _write(out, t.total, blocks, t.read_ns)
        return
    env = gym.make("HalfCheetah-v5" if kind == "mujoco" else "CartPole-v1")
    n_obs = env.observation_space.shape[0]
    n_out = env.action_space.shape[0] if kind == "mujoco" else 2
    policy = torch.nn.Sequential(torch.nn.Linear(n_obs, 32), torch.nn.Tanh(),
                                 torch.nn.Linear(32, n_out))
    opt = torch.optim.SGD(policy.parameters(), lr=1e-3)
    obs, _ = env.reset(seed=0)
    buf: list[np.ndarray] = []
    w = [torch.randn(4, 4) for _ in range(4)]
    every = 4 if kind == "dqn" else 32
    blocks = Blocks(t, lambda d: None)
    for i in range(steps):
        if BLOCKS and i % BLOCKS == 0:
            blocks.next()
        with t.op("inference"), torch.no_grad():
            x = torch.as_tensor(obs, dtype=torch.float32).unsqueeze(0)
            if kind == "dqn":
                for m in w:  # many small backend calls
                    x = torch.tanh(x @ m) + 0.0
            y = policy(x)
            a = np.clip(y.numpy()[0], -1, 1) if kind == "mujoco" else int(y.argmax())
        with t.op("simulation"):
            obs, _r, term, trunc, _ = env.step(a)
            if term or trunc:
                obs, _ = env.reset()
        buf.append(obs)
        if (i + 1) % every == 0:
            with t.op("backprop"):
                batch = torch.as_tensor(np.array(buf[-64:]), dtype=torch.float32)
                loss = policy(batch).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
        if (i + 1) % PROGRESS_EVERY == 0:
            t.progress(i + 1, steps)
    blocks.close()
    _write(out, t.total, blocks, t.read_ns)


def _timed(t: Timer, owner: type, attr: str, op: str) -> None:
    """``owner.attr`` timed as ``op`` (and annotated: rlscope's own marking of the method
    then sees the operation open and adds nothing)."""
    method = getattr(owner, attr)

    def timed(*args: object, **kwargs: object) -> object:
        with t.op(op):
            return method(*args, **kwargs)

    setattr(owner, attr, timed)


class _Switchable(gym.Wrapper):
    """A worker's env that switches its process's recording (SB3's ``env_method``)."""

    def record_into(self, directory: str | None) -> None:
        _record_into(directory)


def _sb3(t: Timer, steps: int) -> Blocks:
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.policies import ActorCriticPolicy
    from stable_baselines3.common.vec_env import SubprocVecEnv, VecEnv

    _timed(t, VecEnv, "step", "simulation")
    _timed(t, ActorCriticPolicy, "forward", "inference")
    _timed(t, ActorCriticPolicy, "predict_values", "inference")
    _timed(t, PPO, "train", "backprop")
    if BLOCKS:
        env = SubprocVecEnv([lambda: _Switchable(gym.make("CartPole-v1")) for _ in range(4)])
    else:
        env = SubprocVecEnv([lambda: gym.make("CartPole-v1") for _ in range(4)])
    blocks = Blocks(t, lambda d: env.env_method("record_into", d))

    class NextBlock(BaseCallback):
        rollouts = 0

        def _on_rollout_start(self) -> None:  # a PPO iteration: its rollout, its training
            if self.rollouts % BLOCKS == 0:
                blocks.next()
            self.rollouts += 1

        def _on_step(self) -> bool:
            return True

    model = PPO("MlpPolicy", env, n_steps=256, batch_size=128, n_epochs=4, seed=0,
                device="cpu", verbose=0)
    model.learn(total_timesteps=steps, callback=NextBlock() if BLOCKS else None)
    blocks.close()
    env.close()
    return blocks


def _write(path: str, totals: dict[str, float], blocks: Blocks | None = None,
           read_ns: float = 0.0) -> None:
    out: dict[str, Any] = dict(totals)
    if blocks is not None and blocks.rows:
        out.update(blocks=blocks.rows, pid=os.getpid(), read_ns=read_ns)
    with open(path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
