"""Run a command with every Python process it starts profiled (what ``rls-prof`` does):
check the command and the output directory, write run.json before and after, start the
command with the profiled environment and forward signals to it."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from rlscope.errors import UsageError
from rlscope.launch import descendants, env, environment
from rlscope.launch.environment import Recording
from rlscope.launch.metadata import finish_run_metadata, start_run_metadata, write_run_metadata
from rlscope.trace import format as fmt


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
        return self.env.get(env.CUDA) == "1"


def check_command(command: list[str]) -> None:
    if not command:
        raise UsageError("no command to run; pass it after --")
    exe = command[0]
    if os.sep in exe:
        if not os.access(exe, os.X_OK) or os.path.isdir(exe):
            raise UsageError(f"{exe} is not an executable file")
    elif shutil.which(exe) is None:
        raise UsageError(f"command not found: {exe}")


def prepare_output(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"output {out} exists and is not a directory; choose another -o")
    existing = [*out.glob("*" + fmt.FILE_SUFFIX), *out.glob(fmt.RUN_FILE),
                *out.glob("*" + fmt.SAMPLES_SUFFIX)] \
        if out.is_dir() else []
    if existing:
        if not force:
            raise UsageError(f"{out} already holds a trace; choose another -o or pass "
                             "--force to replace it")
        for f in existing:
            f.unlink()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create output directory {out}: {e.strerror}") from None


def profile(command: list[str], rec: Recording, force: bool = False,
            sample_hz: float | None = None) -> ProfiledRun:
    """Run ``command`` profiled into ``rec.output_dir``; returns when it and every
    process it started have exited, or a deadline after it exited has passed
    (:mod:`rlscope.launch.descendants`; run.json's ``descendants`` says which).

    SIGINT is left to the command (a terminal sends it to the whole process group);
    SIGTERM and SIGHUP are forwarded to it. ``sample_hz``: run the utilisation sampler
    (:mod:`rlscope.launch.sampler`) at that rate while the command runs.
    """
    check_command(command)
    out = Path(rec.output_dir)
    prepare_output(out, force)
    meta = start_run_metadata(list(command), rec.recorder)
    write_run_metadata(out, meta)
    child_env = environment.profiled(rec)
    interrupted: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        interrupted.append(signum)
        if signum != signal.SIGINT:  # the terminal already sent SIGINT to the child
            proc.send_signal(signum)

    before = set(descendants.children(os.getpid()))  # not the command's (in-process use)
    cpu0 = _children_cpu_s()
    reaper = descendants.set_subreaper(True)
    try:
        proc = subprocess.Popen(list(command), env=child_env)
    except OSError as e:
        if reaper:
            descendants.set_subreaper(False)
        raise UsageError(f"cannot run {command[0]}: {e.strerror}") from None
    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    found = descendants.Descendants()
    sampler = _start_sampler(rec.output_dir, sample_hz, before)
    try:
        returncode = proc.wait()
        if reaper:  # orphans of the command are ours now: wait for them too
            n = len(interrupted)
            found = descendants.reap(_wait_s(), before, stop=lambda: len(interrupted) > n)
    finally:
        summary = sampler.stop() if sampler is not None else None
        if reaper:
            descendants.set_subreaper(False)
        for s, h in old.items():
            signal.signal(s, h)
    finish_run_metadata(meta, returncode, interrupted)
    if summary is not None:
        meta["sampler"] = summary.as_json()
    meta["descendants"] = found.as_json()
    # CPU time of the whole process tree: the command, and every descendant reaped by
    # its parent or, orphaned, by rls-prof.
    meta["cpu_s"] = _children_cpu_s() - cpu0
    write_run_metadata(out, meta)
    files = sorted(out.glob("*" + fmt.FILE_SUFFIX))
    cuda = [f for f in files if f.name.startswith("cuda.")]
    return ProfiledRun(returncode, child_env, meta, [f for f in files if f not in cuda], cuda,
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


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _wait_s() -> float:
    try:
        return max(0.0, float(os.environ.get(env.DESCENDANTS_WAIT, descendants.DEFAULT_WAIT_S)))
    except ValueError:
        return descendants.DEFAULT_WAIT_S
