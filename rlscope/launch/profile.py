"""Run a command with every Python process it starts profiled (what ``rls-prof`` does):
check the command, claim the output directory (its lock; what a previous run left),
write run.json before and after, start the command with the profiled environment and
forward signals to it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from rlscope import envvars
from rlscope.errors import UserError
from rlscope.launch import child_env, descendants
from rlscope.launch.child_env import Recording
from rlscope.launch.metadata import finish_run_metadata, start_run_metadata, write_run_metadata
from rlscope.launch.tree_cpu import TreeCpuCounter
from rlscope.trace import format as fmt
from rlscope.trace import rundir


@dataclass
class ProfiledRun:
    """The outcome of :func:`profile`."""

    returncode: int  # Popen's: negative when killed by a signal
    env: dict[str, str]  # the command's environment
    meta: dict[str, Any]  # run.json
    files: list[Path] = field(default_factory=list)  # Python processes' trace files
    cuda_files: list[Path] = field(default_factory=list)  # the CUDA collector's files
    sampler: Any = None  # rlscope.launch.sampler.Summary; None with --no-sample

    @property
    def status(self) -> int:
        """The exit status as a shell reports it (128 + N when killed by signal N)."""
        return self.returncode if self.returncode >= 0 else 128 - self.returncode

    @property
    def cuda_injected(self) -> bool:
        return self.env.get(envvars.CUDA) == "1"


def check_command(command: list[str]) -> None:
    if not command:
        raise UserError("no command to run; pass it after --")
    exe = command[0]
    if os.sep in exe:
        if not os.access(exe, os.X_OK) or os.path.isdir(exe):
            raise UserError(f"{exe} is not an executable file")
    elif shutil.which(exe) is None:
        raise UserError(f"command not found: {exe}")


def claim_output(out: Path, command: list[str], force: bool,
                 on_stale: Callable[[str], None] | None = None) -> rundir.RunLock:
    """Take the output directory for a run: create it, hold its lock (a live run's
    directory is refused, ``--force`` or not) and clear, with ``force``, what a previous
    run left there. The caller releases the lock when the run (and its calibration) is
    over; a process killed without releasing it leaves a lock the next run takes over,
    telling ``on_stale`` so in one line."""
    if out.exists() and not out.is_dir():
        raise UserError(f"output {out} exists and is not a directory; choose another -o")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create output directory {out}: {e.strerror}") from None
    try:
        lock = rundir.RunLock.acquire(out, command)
    except rundir.DirectoryInUse as e:
        raise UserError(in_use_message(out, e.holder, force)) from None
    except OSError as e:
        raise UserError(f"cannot lock output directory {out}: {e.strerror}") from None
    if lock.stale is not None and on_stale is not None:
        on_stale(stale_lock_message(out, lock.stale))
    try:
        prepare_output(out, force)
    except BaseException:
        lock.release()
        raise
    return lock


def in_use_message(out: Path, holder: rundir.Holder | None, force: bool = False) -> str:
    who = f"a running {holder.describe()}" if holder is not None and holder.pid > 0 \
        else "another rls-prof, starting now"
    msg = f"{out} is in use by {who}; wait for it to end or choose another -o"
    if force:
        msg += " (--force never takes a live run's directory)"
    if holder is not None and holder.host and holder.host != fmt.machine_name():
        msg += f"; if that run is over, delete {out / rundir.LOCK_FILE}"
    return msg


def stale_lock_message(out: Path, stale: rundir.Holder) -> str:
    return (f"{out} was locked by {stale.describe()}, which ended without releasing it "
            "(killed?); taking the lock over")


def prepare_output(out: Path, force: bool) -> None:
    """Refuse a directory a previous run left files in, or clear them with ``force``:
    traces, run.json, calibration, plots, timeline (never anything rlscope did not
    write). Nothing is deleted unless everything can be."""
    left = rundir.previous_run(out)
    if not left:
        return
    writers = rundir.live_writers(out)
    if writers:
        pid, name = writers[0]
        more = f" and {len(writers) - 1} more" if len(writers) > 1 else ""
        raise UserError(f"{out} holds traces still being recorded (pid {pid} writes "
                         f"{name}{more}); wait for {'them' if more else 'it'} to end or "
                         "choose another -o")
    if not force:
        raise UserError(f"{out} already holds a previous run ({_listing(out, left)}); choose "
                         "another -o or pass --force to replace it")
    blocked = _undeletable(out, left)
    if blocked:
        raise UserError(f"--force cannot clear {out}: no permission to delete in "
                         f"{blocked}; nothing was deleted or run")
    try:
        rundir.clear_previous_run(out)
    except OSError as e:
        raise UserError(f"--force could not clear {out}: {e.filename}: {e.strerror}; "
                         "nothing was run") from None


def _listing(out: Path, names: list[str]) -> str:
    traces = [n for n in names if n.endswith(fmt.FILE_SUFFIX)]
    samples = [n for n in names if n.endswith(fmt.SAMPLES_SUFFIX)]
    stacks = [n for n in names if n.endswith(fmt.STACKS_SUFFIX)]
    rest = [n + ("/" if n in rundir.RUN_DIRS or (out / n).is_dir() else "") for n in names
            if n not in traces and n not in samples and n not in stacks
            and not n.endswith(".tmp")]
    head = [f"{len(traces)} trace file{'s' if len(traces) != 1 else ''}"] if traces else []
    head += ["utilisation samples"] if samples else []
    head += ["Python stack samples"] if stacks else []
    return ", ".join(head + rest)


def _undeletable(out: Path, names: list[str]) -> str | None:
    """The first directory in which a file of ``names`` could not be deleted, or None."""
    dirs = [out] + [out / n for n in names if n in rundir.RUN_DIRS]
    for top in dirs[1:]:
        dirs += [Path(root) / d for root, subdirs, _ in os.walk(top) for d in subdirs]
    for d in dirs:
        if not os.access(d, os.W_OK | os.X_OK):
            return str(d)
    return None


def profile(command: list[str], rec: Recording, force: bool = False,
            lock: rundir.RunLock | None = None, sample_hz: float | None = None
            ) -> ProfiledRun:
    """Run ``command`` profiled into ``rec.output_dir``; returns when it and every
    process it started have exited, or a deadline after it exited has passed
    (:mod:`rlscope.launch.descendants`; run.json's ``descendants`` says which).

    SIGINT is left to the command (a terminal sends it to the whole process group);
    SIGTERM and SIGHUP are forwarded to it. ``lock``: the directory was claimed already
    (:func:`claim_output`, by a caller that holds it longer); else it is claimed here.
    ``sample_hz``: run the utilisation sampler (:mod:`rlscope.launch.sampler`) at that
    rate while the command runs.
    """
    check_command(command)
    out = Path(rec.output_dir)
    if lock is None:
        with claim_output(out, command, force):
            return _run(command, rec, out, sample_hz)
    return _run(command, rec, out, sample_hz)


def request_window(out: Path) -> None:
    """Ask the run's recording processes for a detail window (bounded traces): touch the
    request file, whose modification time each writer thread watches."""
    p = out / fmt.WINDOW_REQUEST_FILE
    with contextlib.suppress(OSError):
        p.touch()
        os.utime(p)  # a new mtime even when the file exists


def _run(command: list[str], rec: Recording, out: Path, sample_hz: float | None
         ) -> ProfiledRun:
    meta = start_run_metadata(list(command), rec.recorder)
    write_run_metadata(out, meta)
    env = child_env.profiled(rec)
    interrupted: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        if signum == signal.SIGUSR1:  # a detail window now, in every process of the run
            request_window(out)
            return
        interrupted.append(signum)
        if signum != signal.SIGINT:  # the terminal already sent SIGINT to the child
            proc.send_signal(signum)

    before = set(descendants.children(os.getpid()))  # not the command's (in-process use)
    tree = TreeCpuCounter(os.getpid(), before)
    tree.start()
    reaper = descendants.set_subreaper(True)
    t0 = time.monotonic_ns()
    try:
        proc = subprocess.Popen(list(command), env=env)
    except OSError as e:
        tree.stop()
        if reaper:
            descendants.set_subreaper(False)
        raise UserError(f"cannot run {command[0]}: {e.strerror}") from None
    old = {s: signal.signal(s, forward)
           for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1)}
    found = descendants.Descendants()
    sampler = _start_sampler(rec.output_dir, sample_hz, before)
    try:
        returncode = proc.wait()
        # The command's own wall time, as the calibration's runs without rlscope measure
        # theirs (runner.run_once): run.json's duration_s also holds the wait for its
        # orphans and the sampler's stop.
        meta["command_wall_s"] = (time.monotonic_ns() - t0) / 1e9
        if reaper:  # orphans of the command are ours now: wait for them too
            n = len(interrupted)
            found = descendants.reap(_wait_s(), before, stop=lambda: len(interrupted) > n)
    finally:
        summary = sampler.stop() if sampler is not None else None
        # CPU time of the whole process tree: the command, every descendant reaped by its
        # parent or, orphaned, by rls-prof, and those reaped by the kernel (tree_cpu).
        cpu = tree.stop(found.pids)
        if reaper:
            descendants.set_subreaper(False)
        for s, h in old.items():
            signal.signal(s, h)
    finish_run_metadata(meta, returncode, interrupted)
    if summary is not None:
        meta["sampler"] = summary.as_json()
    meta["descendants"] = found.as_json()
    meta["cpu_s"] = cpu.cpu_s
    meta["cpu_unreaped_s"] = cpu.unreaped_s
    write_run_metadata(out, meta)
    files = sorted(out.glob("*" + fmt.FILE_SUFFIX))
    for host in rundir.host_directories(out):  # RLSCOPE_HOST_DIRS=1 (several hosts)
        files += sorted((out / host).glob("*" + fmt.FILE_SUFFIX))
    cuda = [f for f in files if f.name.startswith("cuda.")]
    return ProfiledRun(returncode, env, meta, [f for f in files if f not in cuda], cuda,
                       summary)


def _start_sampler(output_dir: str, hz: float | None, before: set[int]) -> Any:
    """The utilisation sampler, started (None when off or when it cannot open its file:
    sampling never stops a run)."""
    if not hz:
        return None
    from rlscope.launch.sampler import Sampler

    sampler = Sampler(output_dir, hz, before)
    try:
        sampler.start()
    except OSError:
        return None
    return sampler


def _wait_s() -> float:
    try:
        return max(0.0, float(os.environ.get(envvars.DESCENDANTS_WAIT, descendants.DEFAULT_WAIT_S)))
    except ValueError:
        return descendants.DEFAULT_WAIT_S
