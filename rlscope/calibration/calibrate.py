"""``rls-prof --calibrate``: run the calibration configurations after the profiled run,
estimate per-event costs and write ``DIR/calibration.json``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from rlscope import envvars
from rlscope.analysis.overhead.kinds import POOL_CALL, POOL_TASK
from rlscope.analysis.overhead.model import (
    FILE_NAME,
    Calibration,
    read_calibration,
    write_calibration,
)
from rlscope.calibration.build import build_calibration
from rlscope.calibration.chunked import MIN_CHUNKS, run_chunks
from rlscope.calibration.configs import Config, configurations
from rlscope.calibration.microbench import CEILING_NS, IN_SITU_ONLY, PRICES, negligible
from rlscope.calibration.model_check import calibrate_by_model, took_py_samples
from rlscope.calibration.runner import SUBDIR, TICK_S, RunRecord, Status, run_configurations
from rlscope.calibration.suitability import root_progress_reports, why_not_chunks
from rlscope.errors import UserError
from rlscope.inprocess.chunk_copies import CANNOT_FORK, DEFAULT_CHUNK_S, DEFAULT_MAX_CHUNKS
from rlscope.inprocess.limits import parse_limit
from rlscope.intercept import parse as parse_intercept
from rlscope.launch.child_env import Recording

Echo = Callable[[str], None]


MICROBENCH_TIMEOUT_S = 300.0
# The chunk calibration's time budget by default: about the profiled run's own length
# less the hook benchmarks that follow it (~2 s), at most MAX_BUDGET_S (seconds).
MICROBENCH_S = 3.0
MAX_BUDGET_S = 300.0


def default_budget_s(profiled_s: float) -> float:
    """Wall seconds a chunk calibration may take after a run of ``profiled_s``: about as
    long as the run (less the hook benchmarks that follow), at most ``MAX_BUDGET_S``.
    The driver measures ``MIN_CHUNKS`` chunks even past it."""
    return min(max(profiled_s - MICROBENCH_S, 0.0), MAX_BUDGET_S)


def microbenchmark(recorder: str, status: Status | None = None, pools: bool = True,
                   samples: bool = True, counts: Mapping[str, int] | None = None,
                   cpu_s: float = 0.0) -> dict[str, dict[str, float]] | None:
    """The hook microbenchmarks, in a fresh interpreter (not the launcher's state);
    ``status`` is refreshed while they run; ``pools``: the pool kinds too (~0.7 s: only
    for a run with pool tasks); ``samples``: the Python stack sample's stall too (0.6 s:
    only for a run that took them); ``counts``: the run's events by kind, whose kinds
    with none skip their in-situ measurements (None: every one is made), and with
    ``cpu_s`` (the run's CPU seconds) those too few to matter (microbench.negligible:
    their kinds priced by the tight loops, or at nothing with the ceiling as error)."""
    kinds = "all" if counts is None else ",".join(sorted(k for k, n in counts.items() if n))
    skip = negligible(dict(counts), cpu_s) if counts is not None else {}
    text = "calibrating: timing rlscope's hooks in a tight loop"
    with tempfile.TemporaryDirectory(prefix="rlscope-mb-") as tmp:
        clean = {k: v for k, v in os.environ.items() if not k.startswith(envvars.PREFIX)}
        try:
            proc = subprocess.Popen([sys.executable, "-m", "rlscope.calibration.microbench",
                                     tmp, recorder, "pools" if pools else "no-pools",
                                     "samples" if samples else "no-samples",
                                     kinds or "none", ",".join(sorted(skip))],
                                    stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True, env=clean)
        except OSError:
            return None
        deadline = time.monotonic() + MICROBENCH_TIMEOUT_S
        with proc:
            while True:
                if status is not None:
                    status(text)
                try:
                    out, _ = proc.communicate(timeout=TICK_S)  # retried: nothing is lost
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() > deadline:
                        proc.kill()
                        return None
        try:
            mb = json.loads(out) if proc.returncode == 0 else None
        except ValueError:
            return None
    if mb is not None:
        not_timed(mb, skip)
    return mb


def not_timed(mb: dict[str, dict[str, float]], skip: Mapping[str, float]) -> None:
    """Mark in ``mb`` the kinds whose in-situ measurement was skipped (``skip``: part ->
    the largest share of the run their events could cost): priced by their tight loop,
    or, with none, at nothing with an error bar of the ceiling (build.priced)."""
    for part, share in skip.items():
        for kind in PRICES[part]:
            if kind in IN_SITU_ONLY:
                mb[kind] = {"per_event_ns": 0.0, "error_ns": CEILING_NS[part],
                            "inside_ns": 0.0}
            if kind in mb:
                mb[kind]["not_timed_share"] = share


def chunks_unsuitable(out: Path, rec: Recording, cuda: bool) -> str | None:
    """Why paired chunks cannot calibrate the profiled run in ``out`` (a clause), or None."""
    if cuda:
        return "the CUDA collector is recording (CUDA does not survive fork)"
    if rec.recorder != "native":
        return "the Python recorder has no call mask"
    why = why_not_chunks(out)
    if why is not None:
        return why
    # A chunk runs from one progress report to a later one: fewer reports than that in
    # the profiled run, and a chunk run would only find so at the end of a whole run.
    n = root_progress_reports(out)
    if n is not None and n < MIN_CHUNKS + 1:
        return (f"its main process reported progress {n} time{'s' if n != 1 else ''}, "
                f"and chunks of work run between progress reports (at least "
                f"{MIN_CHUNKS + 1} needed: rlscope.report_progress in the training loop)")
    return None


def calibrate(command: list[str], out: Path, rec: Recording, cuda: bool,
              repetitions: int = 3, echo: Echo | None = None, mode: str = "chunks",
              chunk_s: float = DEFAULT_CHUNK_S, max_chunks: int = DEFAULT_MAX_CHUNKS,
              detail: Echo | None = None, status: Status | None = None,
              why_not: str | None = None, budget_s: float | None = None,
              check_s: float | None = None) -> Calibration:
    """Calibrate ``command`` as profiled with ``rec`` (``cuda``: the CUDA collector
    recorded) and write ``out/calibration.json``. ``mode`` "chunks" (paired chunks in
    one process) or "runs" (whole runs in every configuration). Where chunks cannot be
    used (``why_not``, from :func:`chunks_unsuitable`; or found in the process at its
    first progress report, or too few chunks), it is said once on ``echo`` and the
    costs come from the microbenchmarks, checked by whole runs without rlscope within a
    budget of about the run's length (model_check; whole runs in every configuration
    with CUDA, whose costs only they measure). ``detail``: technical lines (each whole
    run's times); ``status``: what it is doing now, called often (rls-prof's status
    line). ``budget_s``: wall seconds the chunk measurement may take (it ends early,
    after at least ``MIN_CHUNKS`` chunks); None: only ``max_chunks`` bounds it.
    ``check_s``: wall seconds the cost model's check may take (None: about the run's
    length, at most model_check.MAX_BUDGET_S)."""
    try:
        max_progress = parse_limit(os.environ.get(envvars.MAX_PROGRESS))
    except ValueError as e:
        raise UserError(str(e)) from None
    recorder = rec.recorder
    shutil.rmtree(out / SUBDIR, ignore_errors=True)
    configs = configurations(parse_intercept(rec.intercept), cuda)
    say = echo or (lambda _s: None)
    if mode == "chunks":
        told = why_not is not None  # rls-prof said it already (not with CUDA)
        if why_not is None:
            records, why = run_chunks(command, configs, out, rec, chunk_s, max_chunks,
                                      budget_s, echo=say, status=status)
            n = len({r.sample.round for r in records})
            if n >= MIN_CHUNKS:
                return _finish(command, out, records, configs, n, recorder, "chunks",
                               status)
            why_not = (why[len(CANNOT_FORK):] if why.startswith(CANNOT_FORK) else
                       f"only {n} chunk(s) could be measured ({why}); report progress "
                       "more often (rlscope.report_progress) for chunks")
        if not cuda:
            if not told:
                say(f"not by chunks: {why_not}; instead, rlscope's hooks are timed in a "
                    "tight loop and the command runs again without rlscope to check")
            return _by_model(command, out, rec, max_progress, status, detail, say, check_s)
        say(f"calibrating with whole runs: {why_not}")
    records = run_configurations(command, configs, repetitions, out, rec, max_progress,
                                 echo=detail, status=status)
    return _finish(command, out, records, configs, repetitions, recorder, "runs", status)


def _by_model(command: list[str], out: Path, rec: Recording, max_progress: int | None,
              status: Status | None, detail: Echo | None, echo: Echo | None = None,
              check_s: float | None = None) -> Calibration:
    import json

    try:
        run = json.loads((out / "run.json").read_text())
    except (OSError, ValueError):
        run = {}
    cpu = float(run.get("cpu_s") or 0.0)
    cal = calibrate_by_model(command, out, rec, run,
                             lambda pools, counts: microbenchmark(
                                 rec.recorder, status, pools, took_py_samples(out), counts,
                                 cpu),
                             max_progress, status, detail, echo, check_s)
    write_calibration(cal, out / FILE_NAME)
    return cal


def _finish(command: list[str], out: Path, records: list[RunRecord], configs: list[Config],
            rounds: int, recorder: str, mode: str, status: Status | None = None
            ) -> Calibration:
    pools = any(r.sample.counts.get(k) for r in records for k in (POOL_TASK, POOL_CALL))
    counts: dict[str, int] = {}
    for r in records:
        for k, n in r.sample.counts.items():
            counts[k] = counts.get(k, 0) + n
    mb = microbenchmark(recorder, status, pools, took_py_samples(out), counts)
    if status is not None:
        status("calibrating: estimating the costs")
    used = sorted({r.sample.config for r in records})
    cal = build_calibration(command, [r.sample for r in records],
                            [c for c in configs if c.name in used], rounds, mb,
                            [os.path.relpath(r.directory, out) for r in records],
                            metric="thread-cpu" if mode == "chunks" else "cpu", mode=mode)
    write_calibration(cal, out / FILE_NAME)
    return cal


def load_calibration_file(source: Path) -> bytes:
    """``--calibration FILE``, validated and read before the run (``--force`` may clear
    the directory it is in)."""
    read_calibration(source)
    try:
        return source.read_bytes()
    except OSError as e:
        raise UserError(f"cannot read calibration file {source}: {e.strerror}") from None


def install_calibration(data: bytes, out: Path) -> None:
    """Store a calibration read by :func:`load_calibration_file` in the trace directory."""
    tmp = out / (FILE_NAME + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, out / FILE_NAME)
