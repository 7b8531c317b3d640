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
from rlscope.launch import env, environment
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
    existing = [*out.glob("*" + fmt.FILE_SUFFIX), *out.glob(fmt.RUN_FILE)] \
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


def profile(command: list[str], rec: Recording, force: bool = False) -> ProfiledRun:
    """Run ``command`` profiled into ``rec.output_dir``; returns when it has exited.

    SIGINT is left to the command (a terminal sends it to the whole process group);
    SIGTERM and SIGHUP are forwarded to it.
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

    try:
        proc = subprocess.Popen(list(command), env=child_env)
    except OSError as e:
        raise UsageError(f"cannot run {command[0]}: {e.strerror}") from None
    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        returncode = proc.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    finish_run_metadata(meta, returncode, interrupted)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)  # rls-prof waited for no one else
    meta["cpu_s"] = ru.ru_utime + ru.ru_stime  # CPU time of the whole process tree
    write_run_metadata(out, meta)
    files = sorted(out.glob("*" + fmt.FILE_SUFFIX))
    cuda = [f for f in files if f.name.startswith("cuda.")]
    return ProfiledRun(returncode, child_env, meta, [f for f in files if f not in cuda], cuda)
