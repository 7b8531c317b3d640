"""In-process microbenchmarks of the hooks: a sanity check for the run-based estimates
and the source of the inside/outside split (which whole-run times cannot observe).

    python -m rlscope.calibration.microbench TMPDIR [RECORDER] [pools|no-pools]  # JSON

For each kind: ``per_event_ns`` = loop time with the hook recording - loop time with the
hook idle, per event, in the thread's CPU time. The two are measured in ``ROUNDS`` pairs,
each pair back to back (idle, then a fresh recording): on a shared machine the same loop
runs at 2x different speeds minutes apart (SMT siblings, frequency), so only adjacent
loops are compared; within a pair each loop is its fastest of ``REPEATS`` (other work only
adds time). The cost is the pairs' median, ``error_ns`` half their interquartile range.
``inside_ns`` = the median recorded duration of an empty interval (what lands inside the
interval the hook times). A tight loop keeps the hook's code and data in cache, so
``per_event_ns`` is a lower bound of the cost inside a real workload; the inside part (the
code between the two clock reads) varies less.

Where PyTorch (gymnasium) is installed, a wrapped call (an env's recorded step) is also
timed *in situ*: a loop of small torch
ops (a 1x4 matmul, tanh and add, ~2 µs each) called directly and through rlscope's call
wrappers, in short alternating blocks while recording; ``in_situ_ns`` = the median
difference per recorded call (counted in the trace), ``in_situ_error_ns`` its standard
error. Between real backend ops the wrapper's code and data may be evicted: a wrapped
call cost 2x the tight loop's at one hour and no more than it the next, on the same
machine (docs/overhead-correction.md). The cost model takes the higher of the two.
A module's forward is timed the same way (``in_situ_marker``: a small policy's forward,
plain and through the backend's wrappers and the module-call marker): what it costs
beyond its backend calls at that price is the ``phase_marker`` kind's price.

A pool's tasks are timed in situ only (Linux): a one-worker ``multiprocessing`` pool
(fork) maps a function over two items, in blocks with the submitting process recording
(its tasks wrapped, the worker recording them) and not, in turns. ``pool_task`` is the
worker's CPU added per task (its ``/proc`` schedstat), less one annotation pair (the
task's operation, priced as an annotation), paid outside the task's operation
(``inside_ns`` 0); ``pool_call`` the CPU added per map call to the caller's thread and
to the pool's task thread (which pickles the call's tasks and sends them: 5-12 µs here,
about as much as the caller's), the task thread's part as ``inside_ns``: paid inside the
caller's wait for the results, which it delays.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

N = 20_000
ROUNDS = 5
REPEATS = 3
IN_SITU_PAIRS = 400  # pairs of blocks of the in-situ loop (three torch ops an iteration,
IN_SITU_BLOCK = 100  # ~6 µs here): ~0.5 s in all
# Pairs of blocks of a small policy's forwards (~20 µs each here): ~0.4 s in all. Short
# blocks, many pairs: 600 x 15 read 193-358 ns (standard errors 23-43), 300 x 30 96-324
# (63-91), 150 x 60 178-395 (82-129), three runs each; runs differ by more than their
# errors (where a process's objects lie in memory).
MARK_PAIRS = 600
MARK_BLOCK = 15


def _loop_ns(body: Callable[[int], None]) -> float:
    """The fastest of ``REPEATS`` runs of ``body(N)``, per iteration, in the thread's CPU
    time: on a busy machine wall time adds other processes' turns (seen 2.7 µs for an
    idle annotation at a load of 16 on 2 cores, 0.35 µs idle)."""
    best = math.inf
    for _ in range(REPEATS):
        t0 = time.thread_time_ns()
        body(N)
        best = min(best, time.thread_time_ns() - t0)
    return best / N


def _cost(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    """(median of recorded - idle over the rounds, half their interquartile range)."""
    d = np.array([rec - idle for idle, rec in pairs], np.float64)
    if not len(d) or not np.isfinite(d).all():
        return math.nan, math.nan
    q1, med, q3 = np.percentile(d, [25, 50, 75])
    return float(med), float(q3 - q1) / 2


def _annotation_loop(op: object) -> Callable[[int], None]:
    def body(n: int) -> None:
        for _ in range(n):
            with op:  # type: ignore[attr-defined]
                pass
    return body


def _call_loop(f: Callable[[int], int]) -> Callable[[int], None]:
    def body(n: int) -> None:
        for i in range(n):
            f(i)
    return body


def _noop() -> None:
    return None


def _step_loop(step: Callable[[], None]) -> Callable[[int], None]:
    def body(n: int) -> None:
        for _ in range(n):
            step()
    return body


def _durations(trace_dirs: list[Path], begin: int, end: int) -> np.ndarray:
    from rlscope.trace.reader import read_trace

    out = []
    for d in trace_dirs:
        ev = read_trace(d).processes[0].events
        b = ev.time_ns[ev.kind == begin]
        e = ev.time_ns[ev.kind == end]
        n = min(len(b), len(e))
        out.append((e[:n] - b[:n]).astype(np.float64))
    return np.concatenate(out) if out else np.zeros(0)


def _torch_loops() -> tuple[Callable[[int], None], Callable[[int], None]] | None:
    """Small torch ops back to back (a learned model stepped), called directly and
    through rlscope's call wrappers; None without torch or the native wrapper."""
    try:
        import torch

        from rlscope.intercept.patch import BACKEND, Patcher
    except Exception:  # not installed, or broken: no in-situ figure
        return None
    mm, tanh, add = torch.matmul, torch.tanh, torch.add
    p = Patcher()
    wmm, wtanh, wadd = (p.wrapper_for(f, BACKEND, f"calibration.{n}")
                        for f, n in ((mm, "matmul"), (tanh, "tanh"), (add, "add")))
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(1, 4, generator=g)
    w = torch.randn(4, 4, generator=g) * 0.5

    def raw(n: int) -> None:
        x = x0
        for _ in range(n):
            x = add(tanh(mm(x, w)), 0.01)

    def wrapped(n: int) -> None:
        x = x0
        for _ in range(n):
            x = wadd(wtanh(wmm(x, w)), 0.01)
    return raw, wrapped


def _cartpole_loops() -> tuple[Callable[[int], None], Callable[[int], None]] | None:
    """Gymnasium CartPole stepped (actions alternating, so it rarely falls), its ``step``
    called directly and recorded as a vector env's envs are; None without gymnasium."""
    try:
        import gymnasium as gym

        from rlscope.integrations.vecenv import recorded_method
        env = gym.make("CartPole-v1")
        env.reset(seed=0)
    except Exception:  # not installed, or broken: no in-situ figure
        return None
    step = env.step
    recorded = recorded_method(step, reset=False, index=0, name="calibration")

    def loop(f: Callable[[int], Any]) -> Callable[[int], None]:
        def body(n: int) -> None:
            a = 0
            for _ in range(n):
                _obs, _r, term, trunc, _info = f(a)
                a = 1 - a
                if term or trunc:
                    env.reset()
        return body
    return loop(step), loop(recorded)


def _alternated(loops: tuple[Callable[[int], None], Callable[[int], None]], d: Path,
                recorder: str, begin: int, end: int, simulation: bool = False,
                pairs: int = IN_SITU_PAIRS, block: int = IN_SITU_BLOCK
                ) -> dict[str, float] | None:
    """Short blocks of ``loops`` (direct, through rlscope) alternating while recording
    into ``d`` (inside an open ``simulation`` operation if asked, as an env's step runs):
    the median difference per recorded ``begin``/``end`` pair, its standard error, the
    pairs recorded per iteration, and per iteration (``in_situ_iteration_ns``, its
    ``..._error_ns``)."""
    import rlscope
    from rlscope import annotate
    from rlscope.integrations.vecenv import SIMULATION

    raw, wrapped = loops
    raw(200)  # warm: first calls allocate and dispatch once
    diffs: list[float] = []
    rlscope.start(d, recorder=recorder)
    try:
        rec = annotate.active_recorder()
        with rec.operation(SIMULATION) if simulation and rec is not None \
                else contextlib.nullcontext():
            wrapped(200)
            for k in range(pairs):
                first, second = (raw, wrapped) if k % 2 == 0 else (wrapped, raw)
                t0 = time.thread_time_ns()
                first(block)
                t1 = time.thread_time_ns()
                second(block)
                t2 = time.thread_time_ns()
                x, y = t1 - t0, t2 - t1
                diffs.append(float(y - x if first is raw else x - y) / block)
    finally:
        rlscope.stop()
    per_iter = len(_durations([d], begin, end)) / (200 + pairs * block)
    if not per_iter > 0:
        return None
    med, se = median_se(diffs)
    return {"in_situ_ns": med / per_iter, "in_situ_error_ns": se / per_iter,
            "in_situ_calls": per_iter, "in_situ_iteration_ns": med,
            "in_situ_iteration_error_ns": se}


def in_situ_call(tmp: Path, recorder: str = "native") -> dict[str, float] | None:
    """``in_situ_ns`` (per recorded wrapped call between small torch ops),
    ``in_situ_error_ns`` (the standard error of that median) and ``in_situ_calls`` (the
    calls recorded per iteration of the loop: 3), or None where torch or the native
    wrapper is missing. While recording, short blocks of the loop called directly and
    through the wrappers alternate, so a change in the machine's speed (the same loop
    here runs at 4.7 or 6.5 µs an iteration, minutes apart) falls on both sides of most
    pairs."""
    from rlscope.trace import format as fmt

    loops = _torch_loops()
    return None if loops is None else _alternated(
        loops, tmp / "in-situ", recorder, fmt.BACKEND_CALL_BEGIN, fmt.BACKEND_CALL_END)


def in_situ_env_step(tmp: Path, recorder: str = "native") -> dict[str, float] | None:
    """The same for a recorded env step around a real one (gymnasium's CartPole, ~5 µs),
    inside an open ``simulation`` operation as a vector env's envs step (``in_situ_calls``:
    1); None without gymnasium or the native recorder's env call."""
    from rlscope.trace import format as fmt

    loops = _cartpole_loops()
    return None if loops is None else _alternated(
        loops, tmp / "in-situ-env", recorder, fmt.ENV_STEP_BEGIN, fmt.ENV_STEP_END,
        simulation=True)


def _policy_loops() -> tuple[Callable[[int], None], Callable[[int], None]] | None:
    """A small policy's forward (``Sequential(Linear(4, 32), Tanh(), Linear(32, 2))`` on
    a tensor made from a list, no grad: ~20 µs here), as plain PyTorch and with rlscope's
    wrappers where ``--intercept torch`` puts them: the backend functions it calls
    (``torch.tensor``, ``linear``, ``tanh``) and every module's ``__call__`` (the phase
    marker: the outermost recorded, the nested ones passed through). One network whose
    classes and functions are switched at the start of each block (both loops pay the
    switch): two networks would differ by where their objects lie in memory, which
    moved a forward by ±300 ns between processes here. None without torch or the native
    wrapper."""
    try:
        import torch

        from rlscope.intercept.patch import BACKEND, MARK, Patcher
    except Exception:  # not installed, or broken: no in-situ figure
        return None
    p = Patcher()
    plain = (torch.tensor, torch.nn.functional.linear, torch.tanh)
    wrapped = tuple(p.wrapper_for(f, BACKEND, f"calibration.{n}")
                    for f, n in zip(plain, ("tensor", "linear", "tanh"), strict=True))
    marker = p.wrapper_for(torch.nn.Module.__call__, MARK, "calibration.Module")
    fns: list[Any] = list(plain)

    class Linear(torch.nn.Linear):
        def forward(self, x: Any) -> Any:
            return fns[1](x, self.weight, self.bias)

    class Tanh(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return fns[2](x)

    class Sequential(torch.nn.Sequential):
        pass

    classes = (Linear, Tanh, Sequential)
    g = torch.Generator().manual_seed(0)
    net = Sequential(Linear(4, 32), Tanh(), Linear(32, 2))
    with torch.no_grad():
        for q in net.parameters():
            q.copy_(torch.randn(q.shape, generator=g) * 0.3)
    row = [0.1, -0.2, 0.3, -0.4]

    def loop(use: tuple[Any, ...], marked: bool) -> Callable[[int], None]:
        def body(n: int) -> None:
            fns[:] = use
            for cls in classes:
                if marked:
                    cls.__call__ = marker  # type: ignore[method-assign]
                elif "__call__" in vars(cls):
                    del cls.__call__
            tensor = fns[0]
            with torch.no_grad():
                for _ in range(n):
                    net(tensor([row], dtype=torch.float32))
        return body
    return loop(plain, False), loop(wrapped, True)


def in_situ_marker(tmp: Path, recorder: str, call_ns: float
                   ) -> dict[str, dict[str, float]] | None:
    """``phase_marker``: what a module's forward costs beyond its recorded backend calls
    priced at ``call_ns`` each (microbench.in_situ_call). A small policy's forward,
    plain and through rlscope's wrappers, in alternating blocks while recording: the
    marker's own wrapper, the module calls nested in it (each passes through a wrapper,
    and the wrapper enters the module's Python ``__call__`` from C where the interpreter
    would have inlined it) and the backend calls' extra cost in the colder setting of a
    module (~2x the small ops' loop here). Per recorded marker (one a forward); None
    without torch."""
    from rlscope.trace import format as fmt

    loops = _policy_loops()
    if loops is None:
        return None
    d = tmp / "in-situ-marker"
    r = _alternated(loops, d, recorder, fmt.MARK_CALL_BEGIN, fmt.MARK_CALL_END,
                    pairs=MARK_PAIRS, block=MARK_BLOCK)
    if r is None:
        return None
    calls = len(_durations([d], fmt.BACKEND_CALL_BEGIN, fmt.BACKEND_CALL_END)) / \
        (200 + MARK_PAIRS * MARK_BLOCK) / r["in_situ_calls"]
    per = (r["in_situ_iteration_ns"] - calls * call_ns) / r["in_situ_calls"]
    # All of it inside the marker's interval: the nested calls run between its two stamps.
    return {"phase_marker": {"per_event_ns": per,
                             "error_ns": r["in_situ_iteration_error_ns"] / r["in_situ_calls"],
                             "inside_ns": max(per, 0.0), "backend_calls": calls,
                             "markers": r["in_situ_calls"]}}


def _marked_step_loops() -> tuple[Callable[[int], None], Callable[[int], None]] | None:
    """Gymnasium CartPole stepped (actions alternating) with its class's ``step`` plain,
    and marked as the ``simulation`` operation (as the gymnasium integration marks it)
    while that operation is open (``_alternated(..., simulation=True)``): every call
    passed on. The class's attribute is switched at the start of each block (both loops
    pay the switch). None without gymnasium."""
    try:
        import gymnasium as gym

        from rlscope.intercept.patch import recorder_op_wrap
        env = gym.make("CartPole-v1")
        env.reset(seed=0)
    except Exception:  # not installed, or broken: no in-situ figure
        return None
    cls = type(env)
    own = "step" in vars(cls)
    raw = cls.step
    marked = recorder_op_wrap()(raw, "simulation")

    def loop(step: Callable[..., Any]) -> Callable[[int], None]:
        def body(n: int) -> None:
            cls.step = step  # type: ignore[method-assign]
            try:
                a = 0
                for _ in range(n):
                    _obs, _r, term, trunc, _info = env.step(a)
                    a = 1 - a
                    if term or trunc:
                        env.reset()
            finally:
                if own:
                    cls.step = raw  # type: ignore[method-assign]
                else:
                    del cls.step
        return body
    return loop(raw), loop(marked)


def in_situ_passed_call(tmp: Path, recorder: str = "native"
                        ) -> dict[str, dict[str, float]] | None:
    """``passed_call``: what an operation wrapper costs when it passes its call on (the
    operation open already: nothing recorded), around a real env step (gymnasium's
    CartPole, ~5 µs: ``_marked_step_loops``); per call, all of it inside the open
    operation. None without gymnasium."""
    from rlscope.trace import format as fmt

    loops = _marked_step_loops()
    if loops is None:
        return None
    # The one operation pair recorded is the open `simulation` around the loops: the
    # figure per iteration is the one per passed call.
    r = _alternated(loops, tmp / "in-situ-passed", recorder, fmt.OPERATION_BEGIN,
                    fmt.OPERATION_END, simulation=True)
    if r is None:
        return None
    per = r["in_situ_iteration_ns"]
    return {"passed_call": {"per_event_ns": per,
                            "error_ns": r["in_situ_iteration_error_ns"],
                            "inside_ns": max(per, 0.0)}}


POOL_PAIRS = 24  # pairs of blocks of the pool loop (map calls of two items, ~0.3 ms
POOL_BLOCK = 50  # each here): ~0.7 s in all


def _pool_noop(x: Any) -> Any:
    return x


def _schedstat_ns(pid: int, tid: int | None = None) -> int:
    """CPU ns of a process's main thread, or of its thread ``tid``."""
    path = f"/proc/{pid}/schedstat" if tid is None else f"/proc/{pid}/task/{tid}/schedstat"
    with open(path) as f:
        return int(f.read().split()[0])


def _worker_records(directory: str) -> None:
    import rlscope

    rlscope.start(directory)


def median_se(d: list[float]) -> tuple[float, float]:
    """The median of ``d`` and its standard error (a normal deviation taken from the
    interquartile range)."""
    q1, med, q3 = np.percentile(np.array(d), [25, 50, 75])
    return float(med), 1.2533 * float(q3 - q1) / 1.349 / math.sqrt(len(d))


def in_situ_pool(tmp: Path, recorder: str, annotation_ns: float
                 ) -> dict[str, dict[str, float]] | None:
    """``pool_task`` and ``pool_call`` (see the module's docstring), each with
    ``per_event_ns``, ``error_ns`` (standard error of the median) and ``inside_ns``; None
    without ``/proc`` schedstat or fork, or when the pool fails."""
    import multiprocessing as mp

    import rlscope
    from rlscope import intercept

    if not Path(f"/proc/{os.getpid()}/schedstat").exists() \
            or "fork" not in mp.get_all_start_methods():
        return None
    intercept.enable("pool")  # this process ends after the benchmarks: left enabled
    d = tmp / "in-situ-pool"
    try:
        with mp.get_context("fork").Pool(1, _worker_records, (str(d / "worker"),)) as pool:
            pid = pool._pool[0].pid  # type: ignore[attr-defined]
            me, sender = os.getpid(), pool._task_handler.native_id  # type: ignore[attr-defined]
            items = [1, 2]
            for _ in range(POOL_BLOCK):
                pool.map(_pool_noop, items)
            worker: list[float] = []
            caller: list[float] = []
            sends: list[float] = []
            for k in range(POOL_PAIRS):
                per: dict[bool, tuple[float, float, float]] = {}
                for on in (True, False) if k % 2 == 0 else (False, True):
                    if on:
                        rlscope.start(d / "caller", recorder=recorder)
                    try:
                        w0, c0 = _schedstat_ns(pid), time.thread_time_ns()
                        s0 = _schedstat_ns(me, sender)
                        for _ in range(POOL_BLOCK):
                            pool.map(_pool_noop, items)
                        per[on] = ((_schedstat_ns(pid) - w0) / POOL_BLOCK,
                                   (time.thread_time_ns() - c0) / POOL_BLOCK,
                                   (_schedstat_ns(me, sender) - s0) / POOL_BLOCK)
                    finally:
                        if on:
                            rlscope.stop()
                worker.append((per[True][0] - per[False][0]) / len(items))
                caller.append(per[True][1] - per[False][1])
                sends.append(per[True][2] - per[False][2])
            pool.close()  # the worker's recording ends with it, whole
            pool.join()
    except Exception:  # no pool here (a sandbox, a broken fork): no pool figures
        return None
    task, task_se = median_se(worker)
    call, call_se = median_se(caller)
    send, send_se = median_se(sends)
    send = min(max(send, 0.0), max(call + send, 0.0))  # a part of the whole, noise or not
    return {"pool_task": {"per_event_ns": task - annotation_ns, "error_ns": task_se,
                          "inside_ns": 0.0},
            "pool_call": {"per_event_ns": call + send,
                          "error_ns": math.hypot(call_se, send_se), "inside_ns": send}}


PYSAMPLE_S = 0.6  # the Python loop under the stack sampler: ~20-30 samples
PYSAMPLE_TRIES = 3  # measurements at most, while other load lengthened the pauses
PYSAMPLE_HZ = 50.0  # rls-prof's default rate (launch.child_env.DEFAULT_SAMPLE_PYTHON_HZ)
_GAP_NS = 5_000  # a pause of the loop (its iterations take ~0.1 µs)
# A measurement is clean when this process's threads waited on a run queue (runnable,
# not run: other load) for at most this share of the pauses' total: a quiet machine
# reads 0-1 ms in 0.6 s; beside two busy loops on this 2-core VM, ~250 ms, and stalls of
# 2 ms where they are 0.1 ms (the scheduler's delay, not the sample's).
_CLEAN_RQ_SHARE = 0.1


def _runqueue_wait_ns() -> int:
    """How long this process's threads have waited on a run queue, from /proc (0 where
    it cannot be read)."""
    total = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 0
    for t in tasks:
        try:
            with open(f"/proc/self/task/{t}/schedstat") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total


def in_situ_pysample(tmp: Path) -> dict[str, dict[str, float]] | None:
    """``py_sample``: how long a Python stack sample stalls a thread running Python (the
    sampler takes the GIL from it: a forced switch, the sample, a switch back). A loop
    of clock reads runs under a sampler at rls-prof's default rate; the pause of the
    loop around each sample's time is that sample's stall. Measured again (up to
    ``PYSAMPLE_TRIES`` times) while the process's threads waited for a CPU for more than
    a tenth of the stalls (other load: the scheduler's delay, not the sample's), the
    first clean one kept; ``runqueue_share`` says how delayed it was. Its median and
    standard error; when every try was delayed (``loaded`` 1), the lower quartile of all
    their stalls (robust to delays in up to three of four). None when no sample fell in a
    pause (no sampler here)."""
    best: tuple[float, np.ndarray] | None = None
    every: list[np.ndarray] = []
    for i in range(PYSAMPLE_TRIES):
        waited0 = _runqueue_wait_ns()
        stalls = _sampled_pauses(tmp / f"in-situ-pysample-{i}.rlstacks")
        share = (_runqueue_wait_ns() - waited0) / max(float(stalls.sum()), 1.0)
        every.append(stalls)
        if len(stalls) >= 3 and (best is None or share < best[0]):
            best = (share, stalls)
        if best is not None and best[0] <= _CLEAN_RQ_SHARE:
            break
    if best is None:
        return None
    share, stalls = best
    if share <= _CLEAN_RQ_SHARE:
        per, err = median_se(stalls.astype(float).tolist())
    else:  # every try delayed: the lower quartile of them all, where delays are fewer
        pooled = np.concatenate(every).astype(float)
        q1, q2 = np.percentile(pooled, [12.5, 25.0])
        per, err = float(q2), 2 * float(q2 - q1) / math.sqrt(len(pooled))
    return {"py_sample": {"per_event_ns": per, "error_ns": err, "inside_ns": 0.0,
                          "runqueue_share": share,
                          "loaded": float(share > _CLEAN_RQ_SHARE)}}


def _sampled_pauses(path: Path) -> np.ndarray:
    """The pauses (ns) of a loop of clock reads that a stack sample fell in, the loop run
    ``PYSAMPLE_S`` under a sampler writing to ``path``."""
    from rlscope.inprocess.pysampler import PySampler
    from rlscope.trace.pystacks_reader import sample_times

    sampler = PySampler(str(path), PYSAMPLE_HZ)
    begins: list[int] = []
    ends: list[int] = []
    clock = time.perf_counter_ns  # CLOCK_MONOTONIC, as the samples' times
    sampler.start()
    try:
        t = clock()
        stop = t + int(PYSAMPLE_S * 1e9)
        while t < stop:
            u = clock()
            if u - t > _GAP_NS:
                begins.append(t)
                ends.append(u)
            t = u
    finally:
        sampler.stop()
    _pid, times = sample_times(path)
    b, e = np.array(begins, np.int64), np.array(ends, np.int64)
    k = np.searchsorted(b, times, side="right") - 1  # the pause each sample fell in
    ok = k >= 0
    ok[ok] &= times[ok] <= e[k[ok]]
    return (e - b)[k[ok]]


# The in-situ measurements, each for the kinds of events it prices (a run with none of
# them skips it: ~0.4-1.6 s each, torch's import included).
IN_SITU_FOR = {"call": ("backend_call", "simulator_call", "wait_call", "phase_marker"),
               "marker": ("phase_marker",), "env": ("env_call",),
               "passed": ("passed_call",)}


# The most one event of each in-situ measurement's kinds has cost here (docs/performance.md:
# backend calls 35-115 ns, phase markers 217-354, env steps 74-150, passed calls 24-95),
# about doubled. A run whose events of a measurement's kinds could not cost SKIP_SHARE of
# its CPU time at these prices is not timed in situ for them: seconds of calibration (the
# torch loops import torch) for less than the check resolves.
CEILING_NS = {"call": 250.0, "marker": 700.0, "env": 300.0, "passed": 200.0}
SKIP_SHARE = 5e-4
# The kinds each in-situ measurement prices (IN_SITU_FOR also names those it needs), and
# those of them no tight loop prices.
PRICES = {"call": ("backend_call", "simulator_call", "wait_call"),
          "marker": ("phase_marker",), "env": ("env_call",), "passed": ("passed_call",)}
IN_SITU_ONLY = frozenset({"phase_marker", "passed_call"})


def negligible(counts: dict[str, int], cpu_s: float) -> dict[str, float]:
    """The in-situ measurements (IN_SITU_FOR) not worth making for a run of ``cpu_s``
    CPU seconds with ``counts`` events by kind, each with the largest share of the run
    the events of the kinds it prices could cost (at CEILING_NS: below SKIP_SHARE)."""
    out: dict[str, float] = {}
    if not cpu_s > 0:
        return out
    for part, kinds in PRICES.items():
        n = sum(counts.get(k, 0) for k in kinds)
        share = n * CEILING_NS[part] / (cpu_s * 1e9)
        if n and share < SKIP_SHARE:
            out[part] = share
    return out


def run(tmp: Path, recorder: str = "native", pools: bool = True, samples: bool = True,
        kinds: frozenset[str] | None = None, skip: frozenset[str] = frozenset()
        ) -> dict[str, dict[str, float]]:
    """Every benchmark's figures by cost kind; ``kinds``: the kinds the run had events of
    (None: all), whose in-situ measurements are made (the tight loops always are), but
    those in ``skip`` (IN_SITU_FOR's names: :func:`negligible`)."""
    def wanted(part: str) -> bool:
        return part not in skip and (kinds is None or any(k in kinds for k in IN_SITU_FOR[part]))

    import rlscope
    from rlscope import annotate
    from rlscope.integrations.vecenv import SIMULATION, recorded_method
    from rlscope.trace import format as fmt

    wrapped = None
    try:
        from rlscope.intercept.patch import BACKEND, Patcher

        wrapped = Patcher().wrapper_for(abs, BACKEND, "calibration.abs")
    except Exception:  # no native wrapper: interception not available
        wrapped = None
    ann: list[tuple[float, float]] = []
    call: list[tuple[float, float]] = []
    call_idle: list[tuple[float, float]] = []
    step: list[tuple[float, float]] = []
    dirs = []
    for k in range(ROUNDS):
        idle_ann = _loop_ns(_annotation_loop(rlscope.operation("calibration")))
        raw_call = _loop_ns(_call_loop(abs))
        idle_call = _loop_ns(_call_loop(wrapped)) if wrapped is not None else math.nan
        raw_step = _loop_ns(_step_loop(_noop))
        dirs.append(tmp / f"round-{k}")
        rlscope.start(dirs[-1], recorder=recorder)
        try:
            rec_ann = _loop_ns(_annotation_loop(rlscope.operation("calibration")))
            rec_call = _loop_ns(_call_loop(wrapped)) if wrapped is not None else math.nan
            # An env's recorded step (the vector env wrappers do the same work; made
            # while recording, as theirs are: the recorder's own), inside an open
            # simulation operation so that the operation's annotation is not counted.
            env_step = recorded_method(_noop, reset=False, index=0, name="calibration")
            rec = annotate.active_recorder()
            with rec.operation(SIMULATION):  # type: ignore[union-attr]
                rec_step = _loop_ns(_step_loop(env_step))
        finally:
            rlscope.stop()
        ann.append((idle_ann, rec_ann))
        call.append((raw_call, rec_call))
        call_idle.append((raw_call, idle_call))
        step.append((raw_step, rec_step))
    out: dict[str, dict[str, float]] = {}
    per, err = _cost(ann)
    out["annotation"] = {
        "per_event_ns": per, "error_ns": err,
        "inside_ns": float(np.median(_durations(dirs, fmt.OPERATION_BEGIN,
                                                fmt.OPERATION_END))),
        "idle_ns": float(np.median([idle for idle, _ in ann]))}
    if wrapped is not None:
        d = _durations(dirs, fmt.BACKEND_CALL_BEGIN, fmt.BACKEND_CALL_END)
        per, err = _cost(call)
        # (abs() itself, a few ns, runs inside the interval too; left in.)
        out["backend_call"] = {"per_event_ns": per, "error_ns": err,
                               "inside_ns": float(np.median(d)) if len(d) else math.nan,
                               "idle_ns": _cost(call_idle)[0]}
        if wanted("call"):
            out["backend_call"].update(in_situ_call(tmp, recorder) or {})
        situ = out["backend_call"].get("in_situ_ns", math.nan)
        if wanted("marker"):
            out.update(in_situ_marker(tmp, recorder, max(situ, per) if math.isfinite(situ)
                                      else per) or {})
        out["simulator_call"] = dict(out["backend_call"])  # the same C wrapper
        out["wait_call"] = dict(out["backend_call"])
    d = _durations(dirs, fmt.ENV_STEP_BEGIN, fmt.ENV_STEP_END)
    per, err = _cost(step)
    out["env_call"] = {"per_event_ns": per, "error_ns": err,
                       "inside_ns": float(np.median(d)) if len(d) else math.nan}
    if wanted("env"):
        out["env_call"].update(in_situ_env_step(tmp, recorder) or {})
    if wanted("passed"):
        out.update(in_situ_passed_call(tmp, recorder) or {})
    if samples:
        out.update(in_situ_pysample(tmp) or {})
    if pools:  # last: it enables the pool integration in this process
        out.update(in_situ_pool(tmp, recorder, out["annotation"]["per_event_ns"]) or {})
    return out


def main() -> None:
    tmp = Path(sys.argv[1])
    recorder = sys.argv[2] if len(sys.argv) > 2 else "native"
    pools = (sys.argv[3] if len(sys.argv) > 3 else "pools") != "no-pools"
    samples = (sys.argv[4] if len(sys.argv) > 4 else "samples") != "no-samples"
    kinds = sys.argv[5] if len(sys.argv) > 5 else "all"
    skip = frozenset(sys.argv[6].split(",")) if len(sys.argv) > 6 and sys.argv[6] else \
        frozenset()
    print(json.dumps(run(tmp, recorder, pools, samples,
                         None if kinds == "all" else frozenset(kinds.split(",")), skip)))


if __name__ == "__main__":
    main()
