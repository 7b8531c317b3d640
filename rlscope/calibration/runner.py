"""Run a workload in every calibration configuration, interleaved over rounds.

Runs are sequential (never parallel: they would slow each other down), rotated within
each round so that no configuration always runs first, each into its own directory
``DIR/calibration/<round>-<config>/`` with the workload's output in ``output.log``.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rlscope.analysis.overhead.kinds import count_events
from rlscope.calibration.configs import Config, prune
from rlscope.calibration.estimate import RunSample
from rlscope.errors import RLScopeError
from rlscope.launch import child_env, descendants
from rlscope.launch.child_env import Recording
from rlscope.launch.tree_cpu import TreeCpuCounter
from rlscope.trace.reader import read_trace

SUBDIR = "calibration"
INTERRUPT_GRACE_S = 30.0  # Popen.wait alone gives an interrupted run 0.25 s
ORPHANS_WAIT_S = 10.0  # at most this long for the command's orphans after it exited
TICK_S = 0.5  # how often a running calibration run's ``tick`` is called
Status = Callable[[str], None]  # says what calibration is doing now (rls-prof's status line)


@dataclass
class RunRecord:
    sample: RunSample
    directory: str
    returncode: int


def config_recording(rec: Recording, c: Config, directory: Path,
                     max_progress: int | None) -> Recording:
    """The profiled run's settings with configuration ``c``'s switches, into ``directory``."""
    return dataclasses.replace(rec, output_dir=str(directory), intercept=c.intercept_spec,
                               cuda=c.cuda, cuda_activity=c.cuda_activity,
                               annotations=c.annotations, max_progress=max_progress)


def run_once(command: list[str], env: dict[str, str], directory: Path,
              timeout_s: float | None, tick: Callable[[], None] | None = None
              ) -> tuple[float, float, int]:
    """(wall s, CPU s of the process tree, exit status). CPU time (user + system of every
    descendant) is what calibration uses: on a shared machine other processes stretch
    wall time far more than they change the work a run does. As for the profiled run
    (launch.profile), rls-prof is a child subreaper meanwhile and reaps the command's
    orphans (a forkserver and the vector-env workers it started), and the CPU time is the
    whole tree's counted as run.json's ``cpu_s`` is (launch.tree_cpu: processes reaped by
    the kernel included); the wall time is the command's own.
    ``tick`` is called every TICK_S while the run goes on (progress)."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "output.log", "wb") as log:
        before = set(descendants.children(os.getpid()))
        tree = TreeCpuCounter(os.getpid(), before)
        tree.start()
        reaper = descendants.set_subreaper(True)
        reaped: set[int] = set()
        t0 = time.monotonic_ns()
        try:
            proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        except BaseException:
            tree.stop()
            if reaper:
                descendants.set_subreaper(False)
            raise
        try:
            rc = _wait(proc, timeout_s, tick)
            t1 = time.monotonic_ns()
            if reaper:
                reaped = descendants.reap(ORPHANS_WAIT_S, before).pids
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise RLScopeError(f"calibration run in {directory} took longer than "
                               f"{timeout_s:.0f} s; bound the work (RLSCOPE_MAX_PROGRESS, "
                               "docs/overhead-correction.md)") from None
        except KeyboardInterrupt:
            _end_interrupted(proc)
            raise
        finally:
            cpu = tree.stop(reaped)
            if reaper:
                descendants.set_subreaper(False)
    return (t1 - t0) / 1e9, cpu.cpu_s, rc


def _wait(proc: subprocess.Popen, timeout_s: float | None,
          tick: Callable[[], None] | None) -> int:
    """``proc.wait(timeout_s)``, calling ``tick`` every TICK_S meanwhile."""
    if tick is None:
        return proc.wait(timeout=timeout_s)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        step = TICK_S if deadline is None else min(TICK_S, deadline - time.monotonic())
        try:
            return proc.wait(timeout=max(step, 0.0))
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                raise
        tick()


def _end_interrupted(proc: subprocess.Popen) -> None:
    """After Ctrl-C: the terminal interrupted the run too. Wait until it has unwound
    (the chunk driver reaps its copies on the way), so that nothing rls-prof started
    outlives it; kill it after INTERRUPT_GRACE_S or at a second Ctrl-C."""
    try:
        proc.wait(timeout=INTERRUPT_GRACE_S)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        proc.kill()
        proc.wait()


def config_words(name: str) -> str:
    """A configuration, for a status line: "without rlscope", "recording annotations +
    backend"."""
    return ("without rlscope" if name == "uninstrumented"
            else f"recording {name.replace('+', ' + ')}")


def run_configurations(command: list[str], configs: list[Config], rounds: int,
                       out: Path, rec: Recording,
                       max_progress: int | None = None, timeout_s: float | None = None,
                       echo: Callable[[str], None] | None = None,
                       status: Status | None = None) -> list[RunRecord]:
    """Every configuration once per round; configurations that cannot tell anything
    apart are dropped after the first round (see :func:`configs.prune`). ``echo``: a
    line per run (technical detail); ``status``: which run of how many is running."""
    records: list[RunRecord] = []
    root = out / SUBDIR
    for r in range(rounds):
        k = r % len(configs)
        for i, c in enumerate(configs[k:] + configs[:k]):  # rotate the order each round
            d = root / f"{r}-{c.name.replace('+', '_')}"
            if c.record:
                env = child_env.profiled(config_recording(rec, c, d, max_progress))
            else:
                env = child_env.uninstrumented(max_progress)
            tick = None
            if status is not None:
                # runs before this round, then this and the later rounds' (the first round
                # decides which configurations the later ones keep)
                total = len(records) - i + len(configs) * (rounds - r)
                text = (f"calibrating: whole run {len(records) + 1} of {total} "
                        f"(round {r + 1} of {rounds}, {config_words(c.name)})")
                status(text)

                def tick(text: str = text) -> None:
                    status(text)
            wall, cpu, rc = run_once(command, env, d, timeout_s, tick)
            if rc != 0:
                raise RLScopeError(f"calibration run {c.name} (round {r + 1}) exited with "
                                   f"status {rc}; see {d / 'output.log'}")
            counts = count_events(read_trace(d)) if c.record else {}
            records.append(RunRecord(RunSample(c.name, r, cpu, counts, wall), str(d), rc))
            if echo:
                echo(f"round {r + 1}/{rounds} {c.name}: {cpu:.2f} s CPU, {wall:.2f} s wall")
        if r == 0:
            configs = prune(configs, {x.sample.config: x.sample.counts for x in records})
    return records
