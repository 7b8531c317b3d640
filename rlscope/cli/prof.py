"""``rls-prof -o DIR -- COMMAND...``: run a command with every Python process in it profiled."""

from __future__ import annotations

import dataclasses
import signal
import sys
from pathlib import Path
from typing import Any

import click

from rlscope.cli.common import StatusLine, run
from rlscope.errors import RLScopeError, UserError
from rlscope.intercept import LIBRARIES as INTERCEPT_LIBRARIES
from rlscope.intercept import parse as parse_intercept
from rlscope.launch.child_env import DEFAULT_SAMPLE_PYTHON_HZ, Recording
from rlscope.launch.profile import (
    ProfiledRun,
    check_command,
    claim_output,
    profile,
)
from rlscope.recorder import RECORDERS
from rlscope.trace.argv import shell_line

CALIBRATION_FAILED = 1  # exit status: the command succeeded, its --calibrate did not


@click.command(context_settings={"help_option_names": ["-h", "--help"]}, no_args_is_help=True)
@click.option("-o", "--output", "output", required=True, type=click.Path(path_type=Path),
              help="Trace directory to create.")
@click.option("--recorder", type=click.Choice(RECORDERS), default="native", show_default=True,
              help="Event recorder: the native extension or the pure-Python fallback.")
@click.option("--flush-interval", type=click.FloatRange(0.01, 60.0), default=0.5,
              show_default=True, help="Seconds between periodic writes of the trace.")
@click.option("--force", is_flag=True,
              help="Replace what a previous run left in the output directory (traces, "
                   "run.json, calibration, plots, timeline); never a running one's.")
@click.option("--no-cuda", is_flag=True,
              help="Do not trace CUDA API calls and GPU work (leaves CUPTI to other tools).")
@click.option("--intercept", "intercept", default="auto", show_default=True,
              metavar="LIBS",
              help="Libraries whose native calls (Backend / Simulator time) and loops "
                   "(gym, sb3, rllib operations) are instrumented: auto (all, as each is "
                   "imported) or a comma list of " + ", ".join(INTERCEPT_LIBRARIES) + ".")
@click.option("--no-intercept", is_flag=True,
              help="Record annotations only: no backend/simulator call wrappers.")
@click.option("--cost-model/--no-cost-model", "cost_model", default=True, show_default=True,
              help="After a run of 10 s or more, time rlscope's hooks on this machine "
                   "(a few seconds) into OUTPUT/costs.json: the report then says what "
                   "rlscope's book-keeping took (docs/overhead-correction.md).")
@click.option("--calibrate", is_flag=True,
              help="After the run, calibrate rlscope's own overhead: run COMMAND "
                   "uninstrumented and with each kind of book-keeping on, and write "
                   "OUTPUT/calibration.json (docs/overhead-correction.md).")
@click.option("--calibrate-by", "calibrate_by", type=click.Choice(["chunks", "runs"]),
              default="chunks", show_default=True,
              help="chunks: time the same chunk of work (between progress reports) in every "
                   "configuration, in forked copies of one process; runs: whole runs.")
@click.option("--chunks", "max_chunks", type=click.IntRange(4, 10000), default=None,
              help="Chunks measured with --calibrate-by chunks. Default: up to 40, as many "
                   "as fit in --calibrate-seconds.")
@click.option("--calibrate-seconds", "calibrate_s", type=click.FloatRange(1, 86400),
              default=None, metavar="SECONDS",
              help="Wall time --calibrate-by chunks may take (at least 4 chunks are "
                   "measured), or the check of a multi-process run's cost model (runs "
                   "ended early at a progress report, an optimizer step or a jitted "
                   "call, where the "
                   "run is longer). Default without --chunks: about the profiled run's own "
                   "length, at most 300.")
@click.option("--chunk-seconds", "chunk_s", type=click.FloatRange(0.01, 60), default=0.25,
              show_default=True, help="Shortest chunk, in seconds of the workload.")
@click.option("--repetitions", type=click.IntRange(1, 100), default=3, show_default=True,
              help="Rounds of whole runs with --calibrate-by runs (half calibrate, half "
                   "validate).")
@click.option("--calibration", "calibration_file", default=None,
              type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="Reuse the calibration.json of an earlier --calibrate run of the same "
                   "workload on this machine.")
@click.option("--sample-hz", "sample_hz", type=click.FloatRange(0.1, 1000), default=10.0,
              show_default=True,
              help="Utilisation samples per second: CPU and memory of each process of the "
                   "run, each core's CPU, each GPU's NVML utilisation, memory and SM clock "
                   "(taken in rls-prof, outside the profiled processes).")
@click.option("--no-sample", is_flag=True, help="Do not sample utilisation.")
@click.option("--trace-budget", "trace_budget", default="1GB", show_default=True,
              metavar="SIZE|none",
              help="Size budget of the run directory (e.g. 500MB, 2GB): every event in "
                   "detail windows (the start of the run, periodic ones, and on demand: "
                   "touch OUTPUT/rlscope.window), aggregates for the rest, so call counts "
                   "and times stay whole; none keeps every event.")
@click.option("--sample-python", "sample_python", default=None, metavar="off|HZ",
              help="Python stack samples a second in each profiled process, joined to "
                   "the operation open at each (rls-analyze report's hotspots, rls-analyze "
                   "flame), or off [default: "
                   f"{DEFAULT_SAMPLE_PYTHON_HZ:g}].")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
@click.option("-v", "--verbose", is_flag=True,
              help="With --calibrate, also print the technical detail: each calibration "
                   "run's times and how each cost was estimated.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def prof(output: Path, recorder: str, flush_interval: float, force: bool, no_cuda: bool,
         intercept: str, no_intercept: bool, cost_model: bool, calibrate: bool,
         calibrate_by: str,
         max_chunks: int | None, calibrate_s: float | None, chunk_s: float, repetitions: int,
         trace_budget: str,
         calibration_file: Path | None, sample_hz: float, no_sample: bool,
         sample_python: str | None, quiet: bool, verbose: bool,
         command: tuple[str, ...]) -> int:
    """Run COMMAND with every Python process it starts profiled into OUTPUT.

    \b
    Example:
      rls-prof -o runs/ppo -- python train.py --steps 20000
    """
    intercept = _intercept_spec(intercept, no_intercept)
    if calibrate and calibration_file is not None:
        raise UserError("--calibrate makes a new calibration; --calibration reuses one: "
                         "pass only one of them")
    out = output.resolve()
    reuse = None
    if calibration_file is not None:
        from rlscope.calibration.calibrate import load_calibration_file

        reuse = load_calibration_file(calibration_file)
    rec = Recording(str(out), recorder, flush_interval, intercept, cuda=not no_cuda,
                    sample_python_hz=_python_rate(sample_python))
    rec = dataclasses.replace(rec, trace_budget_bytes=parse_size(trace_budget))
    check_command(list(command))
    # Held until calibration is over too: it writes into the directory.
    with claim_output(out, list(command), force,
                      lambda line: click.echo("rls-prof: " + line, err=True)) as lock:
        result = profile(list(command), rec, lock=lock,
                         sample_hz=None if no_sample else sample_hz)
        if not quiet:
            _report(command[0], out, result, no_cuda)
        wanted = result.status == 0 and (calibrate or reuse is not None)
        if calibrate and result.status != 0:
            _not_calibrated(command[0], out, result)
        if cost_model and not wanted and result.status == 0:
            _cost_model(list(command), out, rec, result, quiet)
        if wanted and not _calibrate(list(command), out, rec, result, calibration_file,
                                     reuse, calibrate_by, repetitions, chunk_s, max_chunks,
                                     quiet, verbose, calibrate_s):
            return CALIBRATION_FAILED
    return result.status


def _not_calibrated(exe: str, out: Path, result: ProfiledRun) -> None:
    """--calibrate after a command that failed: one line (a calibration runs the command
    again, so it would fail the same way or measure other work)."""
    rc = result.returncode
    how = (f"exited with status {rc}" if rc >= 0
           else f"was killed by signal {signal.Signals(-rc).name}")
    click.echo(f"rls-prof: not calibrated: {exe} {how}, and a calibration runs it again "
               f"(the trace in {out} is kept, uncorrected); calibrate a run that completes, "
               "then pass its calibration.json to later runs with --calibration FILE",
               err=True)


def _python_rate(value: str | None) -> float:
    if value is None:
        return DEFAULT_SAMPLE_PYTHON_HZ
    v = value.strip().lower()
    if v in ("off", "0"):
        return 0.0
    try:
        hz = float(v)
    except ValueError:
        hz = float("nan")
    if not 1 <= hz <= 1000:
        raise click.BadParameter(f"{value!r}: a rate in Hz from 1 to 1000, or off",
                                 param_hint="--sample-python")
    return hz


_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9,
          "gb": 10**9, "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30,
          "tib": 2**40}


def parse_size(value: str) -> int | None:
    """--trace-budget: bytes (``20MB``, ``1.5GB``, ``512MiB``), or None for ``none``."""
    v = value.strip().lower().replace(" ", "")
    if v in ("none", "off", "0"):
        return None
    num = v.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = v[len(num):]
    try:
        n = float(num) * _UNITS[unit]
    except (KeyError, ValueError):
        n = float("nan")
    if not n >= 1e6:  # nan too
        raise click.BadParameter(f"{value!r}: a size of at least 1MB (e.g. 500MB, 2GB), "
                                 "or none", param_hint="--trace-budget")
    return int(n)


def _report(exe: str, out: Path, result: ProfiledRun, no_cuda: bool) -> None:
    rc = result.returncode
    how = (f"exited with status {rc}" if rc >= 0
           else f"killed by signal {signal.Signals(-rc).name}")
    n = len(result.files)
    if not n:
        click.echo(f"rls-prof: {exe} {how}; no Python process recorded a trace in {out} (is "
                   "rlscope installed in the interpreter it runs?)", err=True)
    else:
        click.echo(f"rls-prof: {exe} {how}; trace of {n} process{'es' if n != 1 else ''} "
                   f"in {out}\nrls-prof: analyse with: rls-analyze report {out}", err=True)
    click.echo("rls-prof: " + _gpu_summary(no_cuda, result), err=True)
    if result.sampler is not None:
        click.echo("rls-prof: " + _sampler_summary(result.sampler), err=True)
    left = result.meta.get("descendants", {}).get("still_running", [])
    if left:
        waited = result.meta["descendants"]["waited_s"]
        click.echo(f"rls-prof: {len(left)} process{'es' if len(left) != 1 else ''} the "
                   f"command started still running {waited:.0f} s after it exited, not "
                   "waited for: " + ", ".join(f"{p['pid']} ({p['command']})" for p in left),
                   err=True)


def _cost_model(command: list[str], out: Path, rec: Recording, result: ProfiledRun,
                quiet: bool) -> None:
    """rlscope's cost model of this machine, after a run long enough to be worth it."""
    from rlscope.calibration import cost_model

    if not float(result.meta.get("duration_s") or 0.0) >= cost_model.MIN_RUN_S:
        return
    status = StatusLine("rls-prof: ")
    try:
        cal, took = cost_model.measure(command, out, rec,
                                       status=None if quiet else status.update)
    finally:
        status.done()
    if cal is not None and not quiet:
        click.echo(f"rls-prof: rlscope's cost model of this machine in "
                   f"{out / 'costs.json'} ({took:.0f} s; {cost_model.summary(cal)}); "
                   "rls-analyze reports rlscope's overhead from it, and corrects once "
                   "rls-prof --calibrate has checked it", err=True)


def _calibrate(command: list[str], out: Path, rec: Recording, result: ProfiledRun,
               calibration_file: Path | None, reuse: bytes | None, mode: str,
               repetitions: int, chunk_s: float, max_chunks: int | None, quiet: bool,
               verbose: bool = False, budget_s: float | None = None) -> bool:
    """Whether a calibration was stored; a failed one is one line, the run's trace is
    kept. While it runs, a status line on stderr says where it is (redrawn on a
    terminal, a plain line now and then otherwise)."""
    from rlscope.analysis.overhead.model import FILE_NAME
    from rlscope.calibration.calibrate import (
        calibrate,
        chunks_unsuitable,
        default_budget_s,
        install_calibration,
    )
    from rlscope.calibration.model_check import MAX_BUDGET_S as MAX_CHECK_S
    from rlscope.calibration.runner import SUBDIR
    from rlscope.inprocess.chunk_copies import DEFAULT_MAX_CHUNKS
    from rlscope.reporters.calibration import summary_lines

    status = StatusLine("rls-prof: ")

    def echo(line: str) -> None:
        if not quiet:
            status.echo("rls-prof: " + line)

    def indented(line: str) -> None:
        echo("  " + line)

    if reuse is not None:
        install_calibration(reuse, out)
        echo(f"calibration {calibration_file} stored in {out / FILE_NAME}; rls-analyze "
             "corrects with it")
        return True
    cuda = bool(result.cuda_files)
    why_not = chunks_unsuitable(out, rec, cuda) if mode == "chunks" else None
    check_s = budget_s  # the user's bound of the model's check too
    if max_chunks is None:  # as many as fit in the budget (by default, the run's length)
        max_chunks = DEFAULT_MAX_CHUNKS
        if budget_s is None:
            budget_s = default_budget_s(float(result.meta.get("duration_s") or 0.0))
    budget = "" if budget_s is None else f", for about {budget_s:.0f} s"
    how = (f"the command runs again, and each chunk of its work between progress reports "
           f"(up to {max_chunks}, of ~{chunk_s:g} s{budget}) is run once without rlscope "
           "and once per kind of book-keeping"
           if mode == "chunks" and why_not is None else
           f"the command runs {repetitions} times without rlscope and with each kind of "
           "book-keeping" if mode == "runs" or cuda else
           "rlscope's hooks are timed in a tight loop, and the command runs again without "
           "rlscope (about as long as it ran; a run over "
           f"{MAX_CHECK_S / 60:.0f} min: pairs of runs with and without rlscope ended "
           "early at a progress report, an optimizer step or a jitted call) to check "
           "the correction")
    echo("calibrating: measuring what rlscope's own book-keeping costs on this workload, "
         f"to remove it from the report: {how} (docs/overhead-correction.md)")
    if why_not is not None and not cuda:
        echo(f"  not by chunks: {why_not}")
    if verbose:
        echo(f"  calibration runs in {out / SUBDIR}")
    try:
        cal = calibrate(command, out, rec, cuda=cuda, why_not=why_not,
                        repetitions=repetitions, echo=indented, mode=mode, chunk_s=chunk_s,
                        max_chunks=max_chunks, budget_s=budget_s, check_s=check_s,
                        detail=indented if verbose else None,
                        status=None if quiet else status.update)
    except UserError:
        raise
    except RLScopeError as e:  # the calibration runs, not the profiled one
        status.done()
        click.echo(f"rls-prof: calibration failed: {e}; the run's trace in {out} is kept, "
                   f"uncorrected (rls-analyze report {out})", err=True)
        return False
    finally:
        status.done()
    echo(f"calibration written to {out / FILE_NAME} (took {status.elapsed()}):")
    for line in summary_lines(cal, verbose):
        echo(line)
    return True


def _intercept_spec(spec: str, no_intercept: bool) -> str:
    """The RLSCOPE_INTERCEPT value; a one-line usage error for unknown names."""
    if no_intercept:
        return "none"
    try:
        names = parse_intercept(spec)
    except ValueError as e:
        raise UserError(f"--intercept: {e}") from None
    return spec.strip() if spec.strip() in ("auto", "all") else (",".join(names) or "none")


def _gpu_summary(no_cuda: bool, result: ProfiledRun) -> str:
    n_cuda = len(result.cuda_files)
    if n_cuda:
        return f"GPU: CUDA API calls and GPU activity traced in {n_cuda} process" + \
            ("es" if n_cuda != 1 else "")
    if no_cuda:
        return "GPU not traced (--no-cuda)"
    if not result.cuda_injected:
        return ("GPU not traced: this rlscope was built without the CUDA collector (no CUPTI "
                "headers at build time; see docs/cuda.md)")
    return "GPU not traced: no process initialised CUDA (CPU-only workload, or no NVIDIA driver)"


def check_separator(args: list[str]) -> None:
    """Without ``--``, an option after the command's first word would be taken as
    rls-prof's (or refused as unknown): say to put ``--`` before the command."""
    if "--" in args:
        return
    start = _command_start(args)
    if start is None:
        return
    opts = [a for a in args[start + 1:] if a.startswith("-") and len(a) > 1]
    if not opts or any(a in ("-h", "--help") for a in args[:start]):
        return
    mine = {o for p in prof.params for o in (*p.opts, *p.secondary_opts)}
    first = opts[0]
    fixed = shell_line(["rls-prof", *args[:start], "--", *args[start:]], 160)
    also = (f", or move {first} before the command to give it to rls-prof"
            if first.split("=")[0] in mine else "")
    raise click.UsageError(f"{first} comes after the command ({args[start]}): put -- before "
                           f"the command to pass it on: {fixed}{also}")


def _command_start(args: list[str]) -> int | None:
    """Index of the first argument that is not an rls-prof option or an option's value."""
    takes_value = {o for p in prof.params if isinstance(p, click.Option) and not p.is_flag
                   and not p.count for o in (*p.opts, *p.secondary_opts)}
    i = 0
    while i < len(args):
        a = args[i]
        if not a.startswith("-") or a == "-":
            return i
        i += 2 if a in takes_value else 1  # "--opt=value" and "-oDIR" are one argument
    return None


def _plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else many or word + 's'}"


def _sampler_summary(s: Any) -> str:
    """One line: what was sampled, and what the sampler itself cost."""
    what = [_plural(s.processes, "process", "processes"), _plural(s.cores, "core")]
    if s.gpus:
        what.append(_plural(s.gpus, "GPU"))
    line = (f"sampled {', '.join(what[:-1])} and {what[-1]} at {s.hz:g} Hz "
            f"({s.ticks} ticks; the sampler used {s.cpu_s * 1e3:.0f} ms CPU, "
            f"{100 * s.cpu_s / max(s.wall_s, 1e-9):.2f}% of a core)")
    if s.gpu_status:
        line += f"; GPU not sampled: {s.gpu_status}"
    return line


def main(argv: list[str] | None = None) -> None:
    sys.exit(run(prof, "rls-prof", argv, check=check_separator))


if __name__ == "__main__":
    main()
