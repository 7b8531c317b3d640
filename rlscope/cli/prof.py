"""``rls-prof -o DIR -- COMMAND...``: run a command with every Python process in it profiled."""

from __future__ import annotations

import importlib.util
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import click

from rlscope import _autostart as env
from rlscope.cli.common import run
from rlscope.errors import UsageError
from rlscope.intercept import LIBRARIES as INTERCEPT_LIBRARIES
from rlscope.intercept import parse as parse_intercept
from rlscope.recorder import RECORDERS
from rlscope.run_metadata import finish_run_metadata, start_run_metadata, write_run_metadata
from rlscope.trace import format as fmt

BOOTSTRAP_DIR = str(Path(__file__).resolve().parent.parent / "_bootstrap")
CUDA_LIBRARY = "librlscope_cuda.so"


def cuda_library() -> str | None:
    """The CUDA collector (docs/cuda.md), installed next to rlscope._native; None when
    rlscope was built without the CUPTI headers. RLSCOPE_CUDA_LIBRARY overrides."""
    override = os.environ.get("RLSCOPE_CUDA_LIBRARY")
    if override:
        return override if os.path.exists(override) else None
    dirs = [Path(__file__).resolve().parent.parent]
    try:
        spec = importlib.util.find_spec("rlscope._native")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        dirs.insert(0, Path(spec.origin).parent)  # editable installs keep it in site-packages
    for d in dirs:
        if (d / CUDA_LIBRARY).exists():
            return str(d / CUDA_LIBRARY)
    return None


def child_environment(output_dir: str, recorder: str, flush_interval_s: float,
                      base: dict[str, str] | None = None, cuda: bool = True,
                      intercept: str = "auto") -> dict[str, str]:
    """The environment contract: what a profiled process (and its children) inherit."""
    e = dict(os.environ if base is None else base)
    e[env.ENV_INTERCEPT] = intercept
    lib = cuda_library() if cuda else None
    e["RLSCOPE_CUDA"] = "1" if lib else "0"
    if lib:
        # The preload's constructor only reads the environment; the driver calls its
        # InitializeInjection() at cuInit (docs/cuda.md).
        old_preload = e.get("LD_PRELOAD", "")
        if lib not in old_preload.split():
            e["LD_PRELOAD"] = (lib + " " + old_preload).strip()
        e.setdefault("CUDA_INJECTION64_PATH", lib)
    e[env.ENV_OUTPUT_DIR] = output_dir
    e[env.ENV_RECORDER] = recorder
    e[env.ENV_FLUSH_INTERVAL] = repr(flush_interval_s)
    e[env.ENV_BOOTSTRAP] = BOOTSTRAP_DIR
    old = e.get("PYTHONPATH")
    e["PYTHONPATH"] = BOOTSTRAP_DIR + (os.pathsep + old if old else "")
    return e


def _prepare_output(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"output {out} exists and is not a directory; choose another -o")
    existing = [*out.glob("*" + fmt.FILE_SUFFIX), *out.glob("run.json")] if out.is_dir() else []
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


def _resolve(command: tuple[str, ...]) -> None:
    exe = command[0]
    if os.sep in exe:
        if not os.access(exe, os.X_OK) or os.path.isdir(exe):
            raise UsageError(f"{exe} is not an executable file")
    elif shutil.which(exe) is None:
        raise UsageError(f"command not found: {exe}")


@click.command(context_settings={"help_option_names": ["-h", "--help"]}, no_args_is_help=True)
@click.option("-o", "--output", "output", required=True, type=click.Path(path_type=Path),
              help="Trace directory to create.")
@click.option("--recorder", type=click.Choice(RECORDERS), default="native", show_default=True,
              help="Event recorder: the native extension or the pure-Python fallback.")
@click.option("--flush-interval", type=click.FloatRange(0.01, 60.0), default=0.5,
              show_default=True, help="Seconds between periodic writes of the trace.")
@click.option("--force", is_flag=True, help="Replace a trace already in the output directory.")
@click.option("--no-cuda", is_flag=True,
              help="Do not trace CUDA API calls and GPU work (leaves CUPTI to other tools).")
@click.option("--intercept", "intercept", default="auto", show_default=True,
              metavar="LIBS",
              help="Libraries whose native calls (Backend / Simulator time) and loops "
                   "(gym, sb3 operations) are instrumented: auto (all, as each is "
                   "imported) or a comma list of " + ",".join(INTERCEPT_LIBRARIES) + ".")
@click.option("--no-intercept", is_flag=True,
              help="Record annotations only: no backend/simulator call wrappers.")
@click.option("--calibrate", is_flag=True,
              help="After the run, calibrate rlscope's own overhead: run COMMAND "
                   "uninstrumented and with each kind of book-keeping on, and write "
                   "OUTPUT/calibration.json (docs/overhead-correction.md).")
@click.option("--calibrate-by", "calibrate_by", type=click.Choice(["chunks", "runs"]),
              default="chunks", show_default=True,
              help="chunks: time the same chunk of work (between progress reports) in every "
                   "configuration, in forked copies of one process; runs: whole runs.")
@click.option("--chunks", "max_chunks", type=click.IntRange(4, 10000), default=40,
              show_default=True, help="Chunks measured with --calibrate-by chunks.")
@click.option("--chunk-seconds", "chunk_s", type=click.FloatRange(0.01, 60), default=0.25,
              show_default=True, help="Shortest chunk, in seconds of the workload.")
@click.option("--repetitions", type=click.IntRange(1, 100), default=3, show_default=True,
              help="Rounds of whole runs with --calibrate-by runs (half calibrate, half "
                   "validate).")
@click.option("--calibration", "calibration_file", default=None,
              type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="Reuse the calibration.json of an earlier --calibrate run of the same "
                   "workload on this machine.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def prof(output: Path, recorder: str, flush_interval: float, force: bool, no_cuda: bool,
         intercept: str, no_intercept: bool, calibrate: bool, calibrate_by: str,
         max_chunks: int, chunk_s: float, repetitions: int,
         calibration_file: Path | None, quiet: bool, command: tuple[str, ...]) -> int:
    """Run COMMAND with every Python process it starts profiled into OUTPUT.

    Example: rls-prof -o runs/ppo -- python train.py --steps 20000
    """
    _resolve(command)
    intercept = _intercept_spec(intercept, no_intercept)
    if calibrate and calibration_file is not None:
        raise UsageError("--calibrate makes a new calibration; --calibration reuses one: "
                         "pass only one of them")
    out = output.resolve()
    _prepare_output(out, force)
    meta = start_run_metadata(list(command), recorder)
    write_run_metadata(out, meta)
    child_env = child_environment(str(out), recorder, flush_interval, cuda=not no_cuda,
                                  intercept=intercept)

    interrupted: list[int] = []

    def forward(signum: int, _frame: object) -> None:
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
    status = returncode if returncode >= 0 else 128 - returncode
    finish_run_metadata(meta, returncode, interrupted)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)  # rls-prof waited for no one else
    meta["cpu_s"] = ru.ru_utime + ru.ru_stime  # CPU time of the whole process tree
    write_run_metadata(out, meta)
    files = sorted(out.glob("*" + fmt.FILE_SUFFIX))
    cuda_files = [f for f in files if f.name.startswith("cuda.")]
    files = [f for f in files if f not in cuda_files]
    if not quiet:
        how = (f"exited with status {returncode}" if returncode >= 0
               else f"killed by signal {signal.Signals(-returncode).name}")
        if not files:
            click.echo(f"rls-prof: {command[0]} {how}; no Python process recorded a trace in "
                       f"{out} (is rlscope installed in the interpreter it runs?)", err=True)
        else:
            click.echo(f"rls-prof: {command[0]} {how}; trace of {len(files)} process"
                       f"{'es' if len(files) != 1 else ''} in {out}\n"
                       f"rls-prof: analyse with: rls-analyze report {out}", err=True)
        click.echo("rls-prof: " + _gpu_summary(no_cuda, child_env, len(cuda_files)), err=True)
    if status == 0 and (calibrate or calibration_file is not None):
        from rlscope.calibration.calibrate import from_cli

        from_cli(list(command), out, calibration_file, parse_intercept(intercept),
                 not no_cuda and bool(cuda_files), repetitions, recorder,
                 lambda c, d: child_environment(str(d), recorder, flush_interval,
                                                cuda=c.cuda, intercept=c.intercept_spec),
                 BOOTSTRAP_DIR, quiet, calibrate_by, chunk_s, max_chunks)
    return status


def _intercept_spec(spec: str, no_intercept: bool) -> str:
    """The RLSCOPE_INTERCEPT value; a one-line usage error for unknown names."""
    if no_intercept:
        return "none"
    try:
        names = parse_intercept(spec)
    except ValueError as e:
        raise UsageError(f"--intercept: {e}") from None
    return spec.strip() if spec.strip() in ("auto", "all") else (",".join(names) or "none")


def _gpu_summary(no_cuda: bool, child_env: dict[str, str], n_cuda: int) -> str:
    if n_cuda:
        return f"GPU: CUDA API calls and GPU activity traced in {n_cuda} process" + \
            ("es" if n_cuda != 1 else "")
    if no_cuda:
        return "GPU not traced (--no-cuda)"
    if child_env.get("RLSCOPE_CUDA") != "1":
        return ("GPU not traced: this rlscope was built without the CUDA collector (no CUPTI "
                "headers at build time; see docs/cuda.md)")
    return "GPU not traced: no process initialised CUDA (CPU-only workload, or no NVIDIA driver)"


def main(argv: list[str] | None = None) -> None:
    sys.exit(run(prof, "rls-prof", argv))


if __name__ == "__main__":
    main()
