"""``rls-prof --calibrate``: run the calibration configurations after the profiled run,
estimate per-event costs and write ``DIR/calibration.json``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from rlscope.calibration.build import build_calibration
from rlscope.calibration.chunked import MIN_CHUNKS, run_chunks
from rlscope.calibration.chunks import DEFAULT_CHUNK_S, DEFAULT_MAX_CHUNKS
from rlscope.calibration.configs import Config, configurations
from rlscope.calibration.file import FILE_NAME, Calibration, read_calibration, write_calibration
from rlscope.calibration.limits import ENV_MAX_PROGRESS, parse_limit
from rlscope.calibration.runner import SUBDIR, EnvFor, RunRecord, run_configurations
from rlscope.errors import UsageError


def microbenchmark(recorder: str) -> dict[str, dict[str, float]] | None:
    """The hook microbenchmarks, in a fresh interpreter (not the launcher's state)."""
    with tempfile.TemporaryDirectory(prefix="rlscope-mb-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RLSCOPE_")}
        try:
            r = subprocess.run([sys.executable, "-m", "rlscope.calibration.microbench",
                                tmp, recorder], capture_output=True, text=True, env=env,
                               timeout=300)
            return json.loads(r.stdout) if r.returncode == 0 else None
        except (OSError, ValueError, subprocess.TimeoutExpired):
            return None


def calibrate(command: list[str], out: Path, intercept: list[str], cuda: bool,
              repetitions: int, recorder: str, env_for: EnvFor, bootstrap_dir: str,
              echo: Callable[[str], None] | None = None, mode: str = "chunks",
              chunk_s: float = DEFAULT_CHUNK_S, max_chunks: int = DEFAULT_MAX_CHUNKS
              ) -> Calibration:
    """``mode`` "chunks" (paired chunks in one process; falls back to whole runs when the
    workload reports too little progress) or "runs"."""
    try:
        max_progress = parse_limit(os.environ.get(ENV_MAX_PROGRESS))
    except ValueError as e:
        raise UsageError(str(e)) from None
    shutil.rmtree(out / SUBDIR, ignore_errors=True)
    configs = configurations(intercept, cuda)
    say = echo or (lambda _s: None)
    if mode == "chunks":
        why_not = ("the CUDA collector is recording (CUDA does not survive fork)" if cuda
                   else "the Python recorder has no call mask" if recorder != "native"
                   else None)
        if why_not is None:
            records, why = run_chunks(command, configs, out, env_for, recorder, chunk_s,
                                      max_chunks, echo=say)
            n = len({r.sample.round for r in records})
            if n >= MIN_CHUNKS:
                return _finish(command, out, records, configs, n, recorder, "chunks")
            why_not = (f"only {n} chunk(s) could be measured ({why}); report progress "
                       "more often (rlscope.report_progress) for chunks")
        say(f"calibrating with whole runs: {why_not}")
    records = run_configurations(command, configs, repetitions, out, env_for, bootstrap_dir,
                                 max_progress, echo=echo)
    return _finish(command, out, records, configs, repetitions, recorder, "runs")


def _finish(command: list[str], out: Path, records: list[RunRecord], configs: list[Config],
            rounds: int, recorder: str, mode: str) -> Calibration:
    mb = microbenchmark(recorder)
    used = sorted({r.sample.config for r in records})
    cal = build_calibration(command, [r.sample for r in records],
                            [c for c in configs if c.name in used], rounds, mb,
                            [os.path.relpath(r.directory, out) for r in records],
                            metric="thread-cpu" if mode == "chunks" else "cpu", mode=mode)
    write_calibration(cal, out / FILE_NAME)
    return cal


def install_calibration(source: Path, out: Path) -> Calibration:
    """``--calibration FILE``: validate it and store it in the trace directory."""
    cal = read_calibration(source)
    if source.resolve() != (out / FILE_NAME).resolve():
        shutil.copyfile(source, out / FILE_NAME)
    return cal


def summary_lines(cal: Calibration) -> list[str]:
    lines = []
    for k, c in cal.costs.items():
        err = "" if c.error_ns != c.error_ns else f" ± {c.error_ns:.0f}"
        unit = f"{c.per_event_ns / 1e6:.1f} ms" if k == "process" else \
            f"{c.per_event_ns:.0f}{err} ns"
        mb = cal.microbenchmark.get(k, {}).get("per_event_ns")
        check = f"; tight-loop microbenchmark {mb:.0f} ns" if mb and c.source != \
            "microbenchmark" else ""
        lines.append(f"  {k}: {unit} per event ({c.source}{check})")
    v = cal.validation
    if cal.mode == "chunks" and v.get("validation_rounds"):
        lines.append(f"  held-out check: on {len(v['validation_rounds'])} chunks the corrected "
                     f"time is {v['total_error_pct']:+.1f}% off the uninstrumented time "
                     f"(raw {v['raw_total_error_pct']:+.1f}%)")
    elif v.get("validation_rounds"):
        lines.append(f"  held-out check: corrected full runs within "
                     f"{v['max_abs_error_pct']:.1f}% of uninstrumented "
                     f"(median {v['median_error_pct']:+.1f}%)")
    lines += [f"  warning: {w}" for w in cal.warnings]
    return lines


def from_cli(command: list[str], out: Path, calibration_file: Path | None,
             intercept: list[str], cuda: bool, repetitions: int, recorder: str,
             env_for: EnvFor, bootstrap_dir: str, quiet: bool, mode: str = "chunks",
             chunk_s: float = DEFAULT_CHUNK_S, max_chunks: int = DEFAULT_MAX_CHUNKS) -> None:
    """What rls-prof does after a successful run with --calibrate or --calibration."""
    import click

    def echo(line: str) -> None:
        if not quiet:
            click.echo("rls-prof: " + line, err=True)

    if calibration_file is not None:
        install_calibration(calibration_file, out)
        echo(f"calibration {calibration_file} stored in {out / FILE_NAME}; rls-analyze "
             "corrects with it")
        return
    how = (f"up to {max_chunks} chunks of ~{chunk_s:g} s, each run in every configuration"
           if mode == "chunks" else f"{repetitions} rounds of runs")
    echo(f"calibrating: {how}, into {out / SUBDIR} (see docs/overhead-correction.md)")
    cal = calibrate(command, out, intercept, cuda, repetitions, recorder, env_for,
                    bootstrap_dir, echo=lambda s: echo("  " + s), mode=mode,
                    chunk_s=chunk_s, max_chunks=max_chunks)
    echo(f"calibration written to {out / FILE_NAME}:")
    for line in summary_lines(cal):
        echo(line)
