"""``rls-analyze``: read a trace directory and report on it."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from rlscope.analysis import hotspots
from rlscope.analysis.diagnosis import (
    actor_verdicts,
    diagnose,
    diagnose_run,
    gpu_findings,
    refine,
    run_cores,
    run_wall,
)
from rlscope.analysis.diagnosis.critical import critical_path
from rlscope.analysis.frames import Analysis
from rlscope.analysis.pipeline.run import (
    ANALYSIS,
    EVENTS,
    LOCKSTEP,
    SAMPLES,
    STACKS,
    Run,
    RunOptions,
    open_run,
)
from rlscope.analysis.processes.utilisation import outside_cpu_s
from rlscope.analysis.timeline import select as sel
from rlscope.analysis.timeline.slices import CALL_KINDS, COUNTERS, PYTHON, TRACK_KINDS
from rlscope.cli import common
from rlscope.errors import RLScopeError
from rlscope.reporters import calls as calls_report
from rlscope.reporters import chrome_trace as tl
from rlscope.reporters import compare as cmp
from rlscope.reporters import critical as critical_report
from rlscope.reporters import diagnosis, perfetto, plots, processes, table, utilisation
from rlscope.reporters import flame as flame_report
from rlscope.reporters import hotspots as hotspots_report
from rlscope.reporters import iterations as iterations_report
from rlscope.reporters import lockstep as lockstep_report
from rlscope.reporters import tasks as tasks_report
from rlscope.reporters import trends as trends_report
from rlscope.reporters.dump import dump_lines
from rlscope.reporters.section import Report, Section
from rlscope.trace.format import TIMELINE_FILES

_PROGRESS_MIN_EVENTS = 2_000_000  # show a progress bar above this many events


def _run_options(parallel: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--infer, --no-correct (and --jobs/--ray): how to open a run, handed to the command
    as one explicit ``opts: RunOptions`` argument."""
    def deco(f: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(f)
        def command(*args: Any, infer: str, no_correct: bool, jobs: int | None = 1,
                    ray: str | None = None, **kwargs: Any) -> Any:
            opts = RunOptions(correct=not no_correct, infer=infer, jobs=jobs, ray=ray)
            return f(*args, opts=opts, **kwargs)

        if parallel:
            command = click.option(
                "--ray", "ray", default=None, is_flag=False, flag_value="",
                metavar="[ADDRESS]",
                help="Analyse one process per Ray task, on the cluster at ADDRESS (or as "
                     "ray.init() finds or starts one). The trace must be at the same path "
                     "on every node.")(command)
            command = click.option(
                "--jobs", "-j", "jobs", type=click.IntRange(min=1), default=None,
                help="Local processes analysing one trace file each [default: one per CPU "
                     "for large runs; 1: serial]. Same results.")(command)
        command = click.option(
            "--infer", type=click.Choice(["auto", "off", "only"]), default="auto",
            show_default=True,
            help="inference/backprop inferred from the loop's calls where none is recorded "
                 "(auto), never (off), or instead of the recorded ones (only: to check "
                 "them against your annotations).")(command)
        return click.option(
            "--no-correct", "no_correct", is_flag=True,
            help="Show raw numbers: do not remove rlscope's own overhead "
                 "(calibration.json).")(command)
    return deco


def _open(directory: Path, opts: RunOptions, want: tuple[str, ...] = (ANALYSIS,)) -> Run:
    """Open a run (rlscope.analysis.pipeline.run), with a progress bar on stderr for long
    analyses on a terminal, and its warnings printed."""
    bar: Any = None
    parallel = opts.ray is not None or opts.jobs != 1
    label = "analysing {:,} bytes of traces" if parallel else "analysing {:,} events"

    def on_total(n: int) -> None:
        nonlocal bar
        if n >= _PROGRESS_MIN_EVENTS and sys.stderr.isatty():
            bar = click.progressbar(length=n, label=label.format(n), file=sys.stderr)
            bar.__enter__()

    def step(n: int) -> None:
        if bar is not None:
            bar.update(n)

    try:
        run = open_run(directory, opts, want, step, on_total)
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
    for w in run.warnings:
        click.echo(f"rls-analyze: warning: {w}", err=True)
    if run.lockstep is not None:
        for w in run.lockstep.warnings:
            click.echo(f"rls-analyze: warning: {w}", err=True)
    if run.analysis is not None:
        procs = run.analysis.processes()
        if not len(procs) or not (procs["covered_s"] > 0).any():
            raise RLScopeError(empty_message(directory, dict(zip(
                procs.get("file", []), procs.get("torn_bytes", []), strict=True))))
    return run


def _analysis(directory: Path, opts: RunOptions) -> Analysis:
    run = _open(directory, opts)
    assert run.analysis is not None
    return run.analysis


def empty_message(directory: Path, torn: dict[str, int]) -> str:
    """A directory without recorded time, saying so honestly: events that were recorded
    but lost in a torn last chunk (a process killed while writing it) are not "none"."""
    lost = {f: n for f, n in torn.items() if n > 0}
    if not lost:
        return (f"{directory} holds no recorded time: every process stopped before "
                "recording any event; record a run that does some work")
    first = next(iter(lost))
    which = first if len(lost) == 1 else f"{first} and {len(lost) - 1} more"
    return (f"{directory} holds no recorded time: the events recorded "
            f"({sum(lost.values()):,} bytes) were in a last chunk torn when the process was "
            f"killed while writing it ({which}), and are lost; record the run again and let "
            "it exit (or flush more often: rls-prof --flush-interval)")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def analyze() -> None:
    """Analyse a trace directory recorded by rls-prof."""


@analyze.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--limit", type=click.IntRange(min=0), default=None,
              help="Print at most this many events per process.")
def dump(directory: Path, limit: int | None) -> None:
    """Print every record of the trace as text."""
    run = _open(directory, RunOptions(correct=False, infer="off"), (EVENTS,))
    assert run.trace is not None
    out = sys.stdout
    for p in run.trace.processes:
        for line in dump_lines(p, limit):
            out.write(line + "\n")


@analyze.command()
@_run_options(parallel=False)
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--operation", default=None, metavar="NAME",
              help="Only this operation: its path (\"train > inference\") or its name "
                   "(every path ending in it) [default: every sampled operation].")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Output directory [default: DIRECTORY/flame].")
@click.option("--format", "formats", type=click.Choice(["speedscope", "svg"]), multiple=True,
              default=("speedscope", "svg"), show_default=True,
              help="speedscope: a JSON file for https://www.speedscope.app; svg: a flame "
                   "graph to open in a browser (repeatable).")
def flame(directory: Path, operation: str | None, output: Path | None,
          formats: tuple[str, ...], opts: RunOptions) -> None:
    """Flame graphs of the Python stack samples taken inside each operation (rls-prof
    samples every process's Python stacks unless --sample-python off): one file per
    operation and format."""
    samples = _python_samples(directory, opts)
    if samples is None or not len(samples):
        raise RLScopeError(f"{directory} has no Python stack samples: record it with rls-prof "
                           "(sampling is on unless --sample-python off)")
    ops = [i for i, name in enumerate(samples.operations)
           if operation is None or name == operation
           or name.rsplit(" > ", 1)[-1] == operation]
    ops = [i for i in ops if (samples.operation == i).any()]
    if not ops:
        sampled = sorted({samples.operations[i] for i in samples.operation.tolist() if i >= 0})
        what = f"no operation {operation!r} was" if operation else "no operation was"
        raise RLScopeError(f"{what} sampled in {directory}; sampled operations: "
                           f"{', '.join(sampled) or 'none'}")
    out = output or directory / "flame"
    _make_dir(out)
    for i in ops:
        name = samples.operations[i]
        stacks = hotspots.flame_stacks(samples, i)
        stem = out / flame_report.file_stem(name)
        if "speedscope" in formats:
            path = stem.with_name(stem.name + ".speedscope.json")
            path.write_text(json.dumps(flame_report.speedscope(samples, name, stacks)))
            click.echo(str(path))
        if "svg" in formats:
            path = stem.with_name(stem.name + ".svg")
            path.write_text(flame_report.svg(samples, name, stacks))
            click.echo(str(path))


def _python_samples(directory: Path, opts: RunOptions) -> hotspots.Samples | None:
    """The run's Python stack samples joined to its operations (None: none taken), on the
    events as recorded (the samples' clock)."""
    return _open(directory, RunOptions(correct=False, infer=opts.infer),
                 (EVENTS, SAMPLES)).python_samples


@analyze.command()
@_run_options()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(table.FORMATS), default="text",
              show_default=True, help="Output format.")
@click.option("--table", "which", type=click.Choice(processes.TABLES), default=None,
              help="With --format csv or markdown: the table to print [default: "
                   "operations]; text and JSON carry every table.")
def report(directory: Path, fmt: str, which: str | None, opts: RunOptions) -> None:
    """The process tree and run summary, then time per process, phase and operation:
    calls, wall, self, and the split into Python, Backend, Simulator, CUDA API and GPU,
    and CPU only / GPU only / CPU+GPU; then the vector envs' lock-step section."""
    if which is not None and fmt not in ("csv", "markdown"):
        raise click.UsageError("--table selects one table for --format csv or markdown")
    tables_only = fmt in ("csv", "markdown")
    run = _open(directory, opts,
                (ANALYSIS,) if tables_only else (ANALYSIS, LOCKSTEP, SAMPLES))
    a = run.analysis
    assert a is not None
    if tables_only:
        click.echo(table.render_frame(processes.table_frame(a, which or "operations"), fmt))
        return
    sections = [table.section(a)]
    if run.lockstep is not None and (run.lockstep.vector_envs or run.lockstep.batches):
        sections.append(lockstep_report.section(run.lockstep))
    if run.iterations is not None:  # an actor/learner job's training iterations
        sections.append(iterations_report.section(run.iterations))
    pool_tasks = a.tasks()
    if len(pool_tasks):  # Pool / executor tasks: their table and straggler verdict
        sections.append(tasks_report.section(pool_tasks))
    sections.append(critical_report.section(critical_path(
        a.process_tree(), a.operations(), run.lockstep, pool_tasks,
        a.utilisation() if a.samples is not None else None)))
    sections.append(calls_report.section(calls_report.tops(a)))
    trend = trends_report.data_of(a)
    if trends_report.main_processes(trend):  # a process reports progress
        sections.append(trends_report.section(trend))
    samples = run.python_samples
    if samples is not None and len(samples):  # rls-prof --sample-python (on by default)
        sections.append(hotspots_report.section(samples))
    sections.append(_diagnosis_section(a, run))
    out = Report(sections)
    click.echo(out.to_json() if fmt == "json" else out.to_text())


def _diagnosis_section(a: Analysis, run: Run) -> Section:
    """The report's closing diagnosis: what limits the run, then each operation."""

    ops, procs = a.operations(), a.processes()
    util = a.utilisation() if a.samples is not None else None
    cores, cores_from = run_cores(a.run, a.samples)
    tree = a.process_tree()
    actors = (actor_verdicts(run.iterations, cores, ops, util, run_wall(tree), a.samples)
              if run.iterations is not None else [])
    run_verdicts = diagnose_run(tree, procs, ops, util, run.lockstep, cores,
                                cores_from, a.tasks(), actors, outside_cpu_s(a.samples))
    verdicts = refine(diagnose(ops, procs), run_verdicts, run.lockstep)
    findings = gpu_findings(util) if util is not None else []
    return diagnosis.section(verdicts, findings, run_verdicts)


@analyze.command()
@_run_options()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Output directory [default: DIRECTORY/plots].")
@click.option("--format", "formats", type=click.Choice(["png", "svg"]), multiple=True,
              default=("png", "svg"), show_default=True, help="Image formats (repeatable).")
def plot(directory: Path, output: Path | None, formats: tuple[str, ...],
         opts: RunOptions) -> None:
    """Stacked bars per operation (CPU/GPU regions x Python/Backend/Simulator/CUDA API),
    transitions per operation call, and (when rls-prof sampled the run) CPU and GPU
    utilisation over time, sampled vs measured, as PNG and SVG."""

    plt = plots.pyplot()  # before the analysis: without matplotlib, say so at once
    run = _open(directory, opts, (ANALYSIS, LOCKSTEP))
    a = run.analysis
    assert a is not None
    out = output or directory / "plots"
    _make_dir(out)
    figs = list(plots.figures(a))
    if run.lockstep is not None and run.lockstep.vector_envs:
        figs.append(("lockstep", lockstep_report.figure(run.lockstep)))
    util = utilisation.figure(a)
    if util is not None:
        figs.append(("utilisation", util))
    figs += trends_report.figures(trends_report.data_of(a))
    for stem, fig in figs:
        for fmt in formats:
            path = out / f"{stem}.{fmt}"
            _save(fig, path)
            click.echo(str(path))
        plt.close(fig)
    skipped = sorted(set(a.processes()["pid"]) - set(plots.plotted_processes(a)["pid"]))
    if skipped:
        click.echo(f"rls-analyze: no figures for {len(skipped)} process(es) with nothing to "
                   f"show (idle helpers: no operation, call or GPU work): "
                   f"{' '.join(map(str, skipped))}", err=True)


@analyze.command()
@_run_options()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Directory for the figures [default: DIRECTORY/plots].")
@click.option("--plot/--no-plot", default=True, show_default=True,
              help="Write trends.<pid>.png/.svg per process that reported progress.")
def trends(directory: Path, fmt: str, output: Path | None, plot: bool,
           opts: RunOptions) -> None:
    """Each operation's time per progress interval over the whole run, steps/s and the
    metrics reported with progress, and the drifts (an operation's time per step, or
    steps/s, changing between the start and the end of the run)."""
    a = _analysis(directory, opts)
    d = trends_report.data_of(a)
    if d.empty:
        raise RLScopeError(f"{directory} has no trends: its processes are too short (under "
                           "0.2 s) and report no progress; call rlscope.report_progress("
                           "timesteps) in the training loop (docs/rls-analyze.md#trends)")
    section = trends_report.section(d)
    click.echo(Report([section]).to_json() if fmt == "json" else section.text())
    if not plot or not trends_report.main_processes(d):
        return
    plt = _pyplot_or_skip("trends.<pid>.png/.svg")
    if plt is None:
        return
    out = output or directory / "plots"
    _make_dir(out)
    for stem, fig in trends_report.figures(d):
        for suffix in ("png", "svg"):
            _save(fig, out / f"{stem}.{suffix}")
            click.echo(str(out / f"{stem}.{suffix}"), err=True)
        plt.close(fig)


@analyze.command()
@_run_options(parallel=False)
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(table.FORMATS), default="text",
              show_default=True, help="Output format (CSV: the per-env table).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Directory for the figure [default: DIRECTORY/plots].")
@click.option("--plot/--no-plot", default=True, show_default=True,
              help="Write lockstep.png/.svg: each env's step-time distribution.")
def lockstep(directory: Path, fmt: str, output: Path | None, plot: bool,
             opts: RunOptions) -> None:
    """Vector envs in lock-step: per env step times (mean, p50, p99, max), the barrier
    wait of every vector step and the time it loses, the straggler, IPC overhead, Sampling
    vs Optimizing, and projections for asynchronous or batched rollouts and k envs per
    worker (docs/multiprocess.md)."""
    run = _open(directory, opts, (LOCKSTEP,))
    result = run.lockstep
    assert result is not None
    if not result.vector_envs and not result.batches:
        raise RLScopeError(f"{directory} has no vector env steps: record a run that steps an "
                           "SB3 DummyVecEnv/SubprocVecEnv, a gymnasium "
                           "SyncVectorEnv/AsyncVectorEnv or an EnvPool pool in async mode "
                           "under rls-prof")
    click.echo(lockstep_report.render(result, fmt, str(directory)))
    if plot and result.vector_envs:
        plt = _pyplot_or_skip("lockstep.png/.svg")
        if plt is None:
            return
        out = output or directory / "plots"
        _make_dir(out)
        fig = lockstep_report.figure(result)
        for suffix in ("png", "svg"):
            _save(fig, out / f"lockstep.{suffix}")
            click.echo(str(out / f"lockstep.{suffix}"), err=True)
        plt.close(fig)


def _pyplot_or_skip(what: str) -> Any:
    """matplotlib's pyplot, or None after one line saying the figure was skipped."""

    try:
        return plots.pyplot()
    except RLScopeError as e:
        click.echo(f"rls-analyze: {what} skipped: {e}", err=True)
        return None


_TIMELINE_FORMATS = ("perfetto", "json")


@analyze.command()
@_run_options(parallel=False)
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Output file [default: DIRECTORY/timeline.pftrace, or DIRECTORY/"
                   "trace.json with --format json]; a name ending in .gz is gzipped.")
@click.option("--format", "fmt", type=click.Choice(_TIMELINE_FORMATS), default=None,
              help="perfetto: Perfetto's protobuf trace (compact; ui.perfetto.dev); json: "
                   "Chrome trace-event JSON (also chrome://tracing) [default: json for an "
                   "output named .json or .json.gz, else perfetto].")
@click.option("--window", "window", default=None, metavar="START:END",
              help="Only this time window: seconds from the run's first event (30s:45s; "
                   "also ms, us, min) or timesteps (10000steps:20000steps); an empty "
                   "bound is the run's start or end.")
@click.option("--process", "processes", multiple=True, metavar="PID|ROLE|NAME",
              help="Only this process (repeatable): a pid, a role (main, vector-env "
                   "worker, ...) or part of its name.")
@click.option("--tracks", "tracks", multiple=True, metavar="LIST",
              help="Kinds of track, comma-separated: phases, operations, backend, "
                   "simulator, wait (calls: all three), env, cuda-api, gpu, counters, "
                   "python (stack samples, a flame chart per thread); "
                   "all; -KIND removes one [default: all, less native calls when they "
                   "would take the file over --max-size].")
@click.option("--max-size", "max_mb", type=click.FloatRange(min=0), default=100.0,
              show_default=True, metavar="MB",
              help="Without --tracks: leave native calls out when the estimated file "
                   "size is over this many MB.")
def timeline(directory: Path, output: Path | None, fmt: str | None, window: str | None,
             processes: tuple[str, ...], tracks: tuple[str, ...], max_mb: float,
             opts: RunOptions) -> None:
    """A timeline to open in ui.perfetto.dev: per process, tracks of phases, operations,
    native calls and env steps per thread, CUDA API calls, GPU streams with flows from
    each launch, counters."""
    import gzip
    import io


    kinds = sel.parse_tracks(tracks) if tracks else frozenset(TRACK_KINDS)
    spec = sel.parse_window(window) if window is not None else None
    if fmt is None:
        fmt = "json" if output is not None and output.name.endswith((".json", ".json.gz")) \
            else "perfetto"
    run = _open(directory, opts, (EVENTS, STACKS) if PYTHON in kinds else (EVENTS,))
    trace = run.trace
    assert trace is not None
    if not any(len(p.events) or len(p.api_calls) or len(p.gpu) for p in trace.processes):
        raise RLScopeError(empty_message(directory, {p.path.name: p.torn_bytes
                                                     for p in trace.processes}))
    plan = sel.plan_timeline(trace, kinds, spec, processes, run.python_stacks or ())
    writer = perfetto if fmt == "perfetto" else tl
    if not tracks:
        counts = plan.counts()
        size = _timeline_bytes(counts, writer.BYTES_PER_SLICE, writer.BYTES_PER_COUNTER_VALUE)
        calls = sum(counts.get(k, 0) for k in CALL_KINDS)
        if size > max_mb * 1e6 and calls:
            plan.kinds = plan.kinds - set(CALL_KINDS)
            click.echo(f"rls-analyze: timeline: native calls left out ({calls:,} slices; "
                       f"about {size / 1e6:,.0f} MB with them, over --max-size "
                       f"{max_mb:g} MB): keep them with --tracks all, or narrow with "
                       "--window / --process", err=True)
    if not any(plan.counts().values()):
        shown = ", ".join(sorted(plan.kinds))
        raise RLScopeError(f"the timeline would be empty: no {shown} in "
                           f"{'the chosen processes' if processes else directory}"
                           f"{' and window' if spec is not None else ''}; pick other "
                           "--tracks/--process/--window (nothing written)")
    out = output or directory / TIMELINE_FILES[fmt]
    _make_dir(out.parent)
    # Written beside the output and renamed over it when complete: a failed export never
    # leaves a truncated file in place of a good one.
    part = out.with_name(f".{out.name}.part")
    try:
        with open(part, "wb") as raw:
            f: Any = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=3, mtime=0) \
                if out.name.endswith(".gz") else raw
            if fmt == "perfetto":
                stats = perfetto.write_perfetto(plan, f)
            else:
                text = io.TextIOWrapper(f, encoding="utf-8", write_through=False)
                stats = tl.write_chrome_trace(plan, text, str(directory))
                text.flush()
                text.detach()
            if f is not raw:
                f.close()
        os.replace(part, out)
        size_mb = out.stat().st_size / 1e6
    except OSError as e:
        raise RLScopeError(f"cannot write {out}: {e.strerror}") from None
    finally:
        part.unlink(missing_ok=True)
    click.echo(f"{out}: {stats.slices:,} slices, {stats.flows:,} flows, "
               f"{stats.counter_values:,} counter values on {stats.tracks:,} tracks "
               f"({size_mb:,.1f} MB); open it in https://ui.perfetto.dev")


def _timeline_bytes(counts: dict[str, int], per_slice: int, per_counter: int) -> float:

    return sum(n * (per_counter if k == COUNTERS else per_slice) for k, n in counts.items())


@analyze.command()
@_run_options()
@click.argument("runs", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(table.FORMATS), default="text",
              show_default=True, help="Output format.")
@click.option("--by", type=click.Choice(["operation", "category"]), default="operation",
              show_default=True, help="Compare per operation or per category.")
@click.option("--plot", "plot_to", type=click.Path(path_type=Path), default=None,
              help="Also write grouped bars to this file (.png or .svg).")
@click.option("--map", "maps", multiple=True, metavar="OLD=NEW",
              help="Rename an operation (a path, or one level of it) before comparing, so "
                   "runs with different names line up; repeatable.")
@click.option("--per-timestep", is_flag=True,
              help="Divide each run by the timesteps it reported (runs of different "
                   "length); microseconds per timestep.")
@click.option("--name", "labels", multiple=True, metavar="NAME",
              help="Names of the runs, in order (default: the directory names).")
@click.option("--phase", default=None, metavar="PHASE",
              help="Compare only the time inside this phase (rlscope.phase), e.g. the "
                   "training loop without set-up.")
@click.option("--role", default=None, metavar="ROLE",
              help="Keep only the processes of this role (main, 'vector-env worker', "
                   "'pool worker', ...).")
def compare(runs: tuple[str, ...], fmt: str, by: str, plot_to: Path | None,
            maps: tuple[str, ...], per_timestep: bool, labels: tuple[str, ...],
            phase: str | None, role: str | None, opts: RunOptions) -> None:
    """Compare runs side by side, per process role (main, vector-env workers, pool
    workers, ...; a role's processes summed, idle helpers left out). Each RUN is a trace
    directory, or several separated by commas: repetitions of one configuration, used to
    tell deltas from noise."""

    groups = [[Path(d) for d in r.split(",") if d] for r in runs]
    if any(not g for g in groups):
        raise click.UsageError("empty run name")
    if labels and len(labels) != len(groups):
        raise click.UsageError(f"--name given {len(labels)} times for {len(groups)} runs")
    try:
        mapping = cmp.parse_map(maps)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    analyses = [[_analysis(d, opts) for d in g] for g in groups]
    names = list(labels) or cmp.unique_labels([cmp.run_label(g) for g in groups])
    if len(set(names)) != len(names):
        raise click.UsageError("two runs have the same name; name them with --name")
    for w in cmp.correction_warnings(analyses, names):
        click.echo(f"rls-analyze: warning: {w}", err=True)
    df = cmp.compare(analyses, names, by, mapping, per_timestep, phase, role)
    click.echo(cmp.render(df, names, fmt, per_timestep))
    if plot_to is not None:
        plt = _pyplot_or_skip(f"the figure {plot_to}")
        if plt is None:
            return
        _make_dir(plot_to.parent)
        fig = cmp.figure(df, names, by, per_timestep)
        _save(fig, plot_to)
        plt.close(fig)
        click.echo(str(plot_to), err=True)


@analyze.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--refresh", "refresh_s", type=click.FloatRange(min=0.1), default=1.0,
              show_default=True, metavar="SECONDS", help="Seconds between refreshes.")
@click.option("--tensorboard", "tensorboard", type=click.Path(path_type=Path), default=None,
              metavar="LOGDIR",
              help="Also write per-operation scalars over training steps to this TensorBoard "
                   "log directory (needs tensorboardX: pip install 'rlscope[tensorboard]').")
@click.option("--once", is_flag=True,
              help="Print one refresh as text and exit (also what happens without a "
                   "terminal).")
@click.option("--until-done", is_flag=True,
              help="No screen: follow until every process has ended (with --tensorboard).")
def live(directory: Path, refresh_s: float, tensorboard: Path | None, once: bool,
         until_done: bool) -> None:
    """Follow a run while it records: per operation the last interval and the run so far
    (time by Python/Backend/Simulator/Waiting), steps/s, the process tree with CPU use, the
    last interval's verdict. Keys: tab/n next process, N previous, p next phase, q quit.
    Reads only what the processes append to their files."""
    from rlscope.cli.live import follow

    if until_done and tensorboard is None:
        raise click.UsageError("--until-done writes TensorBoard only: give --tensorboard")
    follow(directory, refresh_s, tensorboard, once, until_done)


def _save(fig: Any, path: Path) -> None:
    try:
        fig.savefig(path, dpi=200 if path.suffix == ".png" else None)
    except OSError as e:
        raise RLScopeError(f"cannot write {path}: {e.strerror}") from None


def _make_dir(d: Path) -> None:
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RLScopeError(f"cannot create {d}: {e.strerror}") from None


def main(argv: list[str] | None = None) -> None:
    sys.exit(common.run(analyze, "rls-analyze", argv))


if __name__ == "__main__":
    main()
