"""``rls-analyze``: read a trace directory and report on it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from rlscope.analysis import Analysis, load
from rlscope.cli.common import run
from rlscope.errors import RLScopeError
from rlscope.reporters import processes, table
from rlscope.reporters.dump import dump_lines
from rlscope.trace.data import Trace
from rlscope.trace.format import TIMELINE_FILES
from rlscope.trace.reader import read_trace

_PROGRESS_MIN_EVENTS = 2_000_000  # show a progress bar above this many events


def _load(directory: Path, correct: bool = False, infer: bool = False) -> Trace:
    trace = read_trace(directory)
    for w in trace.warnings:
        click.echo(f"rls-analyze: warning: {w}", err=True)
    if correct and not click.get_current_context().meta.get("rlscope.no_correct"):
        from rlscope.analysis.overhead.correction import apply_correction

        trace = apply_correction(trace)  # with DIR/calibration.json, if there is one
    if infer:
        from rlscope.analysis import inferred

        trace.processes = [inferred.apply(p, _infer_mode()) for p in trace.processes]
    return trace


def _infer_option(f):
    """--infer: operations inferred from the training loop's calls (attribution.md)."""
    def store(ctx: click.Context, _param: click.Parameter, value: str) -> None:
        ctx.meta["rlscope.infer"] = value

    return click.option("--infer", type=click.Choice(["auto", "off", "only"]), default="auto",
                        show_default=True, expose_value=False, callback=store,
                        help="inference/backprop inferred from the loop's calls where none "
                             "is recorded (auto), never (off), or instead of the recorded "
                             "ones (only: to check them against your annotations).")(f)


def _infer_mode() -> str:
    return str(click.get_current_context().meta.get("rlscope.infer", "auto"))


def _parallel_options(f):
    """--jobs / --ray: one process per task, locally or on Ray (docs/rls-analyze.md)."""
    def store(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        ctx.meta[f"rlscope.{param.name}"] = value

    f = click.option("--ray", "ray", default=None, is_flag=False, flag_value="",
                     metavar="[ADDRESS]", expose_value=False, callback=store,
                     help="Analyse one process per Ray task, on the cluster at ADDRESS (or "
                          "as ray.init() finds or starts one). The trace must be at the "
                          "same path on every node.")(f)
    return click.option("--jobs", "-j", "jobs", type=click.IntRange(min=1), default=None,
                        expose_value=False, callback=store,
                        help="Local processes analysing one trace file each [default: one "
                             "per CPU for large runs; 1: serial]. Same results.")(f)


def _no_correct_option(f):
    """--no-correct: raw numbers, book-keeping overhead left in (overhead-correction.md)."""
    def store(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        ctx.meta["rlscope.no_correct"] = value

    return click.option("--no-correct", is_flag=True, expose_value=False, callback=store,
                        help="Show raw numbers: do not remove rlscope's own overhead "
                             "(calibration.json).")(f)


def _correcting() -> bool:
    """Whether rlscope's own overhead is to be removed (no --no-correct)."""
    return not click.get_current_context().meta.get("rlscope.no_correct")


def _analysis(directory: Path) -> Analysis:
    """Analyse (streaming unless overhead correction needs the whole trace), with a
    progress bar on stderr for long analyses on a terminal."""
    bar: Any = None

    def on_total(n: int) -> None:
        nonlocal bar
        if n >= _PROGRESS_MIN_EVENTS and sys.stderr.isatty():
            bar = click.progressbar(length=n, label=label.format(n),
                                    file=sys.stderr)
            bar.__enter__()

    def step(n: int) -> None:
        if bar is not None:
            bar.update(n)

    meta = click.get_current_context().meta
    correct = _correcting()
    jobs, ray = meta.get("rlscope.jobs"), meta.get("rlscope.ray")
    label = "analysing {:,} events"
    if ray is not None or jobs != 1:
        label = "analysing {:,} bytes of traces"  # in parallel: counted by file
    try:
        a = load(directory, step, correct=correct, on_total=on_total, infer=_infer_mode(),
                 jobs=jobs, ray=ray)
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
    for w in a.warnings:
        click.echo(f"rls-analyze: warning: {w}", err=True)
    procs = a.processes()
    if not len(procs) or not (procs["covered_s"] > 0).any():
        raise RLScopeError(empty_message(directory, dict(zip(procs.get("file", []),
                                                             procs.get("torn_bytes", []),
                                                             strict=True))))
    return a


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
    trace = _load(directory)
    out = sys.stdout
    for p in trace.processes:
        for line in dump_lines(p, limit):
            out.write(line + "\n")


@analyze.command()
@_parallel_options
@_infer_option
@_no_correct_option
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(table.FORMATS), default="text",
              show_default=True, help="Output format.")
@click.option("--table", "which", type=click.Choice(processes.TABLES), default=None,
              help="With --format csv or markdown: the table to print [default: "
                   "operations]; text and JSON carry every table.")
def report(directory: Path, fmt: str, which: str | None) -> None:
    """The process tree and run summary, then time per process, phase and operation:
    calls, wall, self, and the split into Python, Backend, Simulator, CUDA API and GPU,
    and CPU only / GPU only / CPU+GPU; then the vector envs' lock-step section."""
    if which is not None and fmt not in ("csv", "markdown"):
        raise click.UsageError("--table selects one table for --format csv or markdown")
    a = _analysis(directory)
    if which is None or which == "operations":
        click.echo(_with_diagnosis(a, fmt, _with_lockstep(a, directory, fmt,
                                                          table.render(a, fmt))))
    else:
        click.echo(table.render_frame(processes.table_frame(a, which), fmt))


def _with_diagnosis(a: Analysis, fmt: str, out: str) -> str:
    """The report's closing diagnosis: what limits the run (text; a key in JSON)."""
    if fmt not in ("text", "json"):
        return out
    from rlscope.analysis.diagnosis import diagnose, gpu_findings
    from rlscope.reporters import diagnosis as render

    verdicts = diagnose(a.operations(), a.processes())
    findings = gpu_findings(a.utilisation()) if a.samples is not None else []
    if fmt == "json":
        import json

        return json.dumps({**json.loads(out), "diagnosis": render.to_list(verdicts),
                           "gpu_findings": render.gpu_to_list(findings)}, indent=2)
    text = render.lines(verdicts, findings)
    return out + ("\n\n" + "\n".join(text) if text else "")


def _with_lockstep(a: Analysis, directory: Path, fmt: str, out: str) -> str:
    """The report, with the lock-step section when the run has vector envs (text; a key
    in JSON; CSV and Markdown are one table)."""
    from rlscope.analysis import lockstep as ls

    if fmt not in ("text", "json") or not ls.has_vector_envs(a.processes()["metadata"]):
        return out
    from rlscope.reporters import lockstep as render

    result = ls.load(directory, _infer_mode(), _correcting())
    if not result.vector_envs:
        return out
    if fmt == "json":
        import json

        return json.dumps({**json.loads(out), "lockstep": render.to_dict(result)}, indent=2)
    return f"{out}\n\n{render.render(result, fmt)}"


@analyze.command()
@_parallel_options
@_infer_option
@_no_correct_option
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Output directory [default: DIRECTORY/plots].")
@click.option("--format", "formats", type=click.Choice(["png", "svg"]), multiple=True,
              default=("png", "svg"), show_default=True, help="Image formats (repeatable).")
def plot(directory: Path, output: Path | None, formats: tuple[str, ...]) -> None:
    """Stacked bars per operation (CPU/GPU regions x Python/Backend/Simulator/CUDA API),
    transitions per operation call, and (when rls-prof sampled the run) CPU and GPU
    utilisation over time, sampled vs measured, as PNG and SVG."""
    from rlscope.reporters import plots

    a = _analysis(directory)
    out = output or directory / "plots"
    _make_dir(out)
    for stem, fig in [*plots.figures(a), *_lockstep_figure(a, directory),
                      *_utilisation_figure(a)]:
        for fmt in formats:
            path = out / f"{stem}.{fmt}"
            _save(fig, path)
            click.echo(str(path))
        plots.pyplot().close(fig)
    skipped = sorted(set(a.processes()["pid"]) - set(plots.plotted_processes(a)["pid"]))
    if skipped:
        click.echo(f"rls-analyze: no figures for {len(skipped)} process(es) with nothing to "
                   f"show (idle helpers: no operation, call or GPU work): "
                   f"{' '.join(map(str, skipped))}", err=True)


def _utilisation_figure(a: Analysis) -> list[tuple[str, Any]]:
    """Sampled vs measured CPU and GPU over time, when rls-prof sampled the run."""
    from rlscope.reporters import utilisation

    fig = utilisation.figure(a)
    return [("utilisation", fig)] if fig is not None else []


def _lockstep_figure(a: Analysis, directory: Path) -> list[tuple[str, Any]]:
    """Each env's step-time distribution, when the run has vector envs."""
    from rlscope.analysis import lockstep as ls

    if not ls.has_vector_envs(a.processes()["metadata"]):
        return []
    from rlscope.reporters import lockstep as render

    result = ls.load(directory, _infer_mode(), _correcting())
    return [("lockstep", render.figure(result))] if result.vector_envs else []


@analyze.command()
@_infer_option
@_no_correct_option
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(table.FORMATS), default="text",
              show_default=True, help="Output format (CSV: the per-env table).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Directory for the figure [default: DIRECTORY/plots].")
@click.option("--plot/--no-plot", default=True, show_default=True,
              help="Write lockstep.png/.svg: each env's step-time distribution.")
def lockstep(directory: Path, fmt: str, output: Path | None, plot: bool) -> None:
    """Vector envs in lock-step: per env step times (mean, p50, p99, max), the barrier
    wait of every vector step and the time it loses, the straggler, IPC overhead, Sampling
    vs Optimizing, and projections for asynchronous or batched rollouts and k envs per
    worker (docs/multiprocess.md)."""
    from rlscope.analysis import lockstep as ls
    from rlscope.reporters import lockstep as render
    from rlscope.reporters import plots

    result = ls.load(directory, _infer_mode(), _correcting())
    for w in result.warnings:
        click.echo(f"rls-analyze: warning: {w}", err=True)
    if not result.vector_envs:
        raise RLScopeError(f"{directory} has no vector env steps: record a run that steps an "
                           "SB3 DummyVecEnv/SubprocVecEnv or a gymnasium "
                           "SyncVectorEnv/AsyncVectorEnv under rls-prof")
    click.echo(render.render(result, fmt, str(directory)))
    if plot:
        out = output or directory / "plots"
        _make_dir(out)
        fig = render.figure(result)
        for suffix in ("png", "svg"):
            _save(fig, out / f"lockstep.{suffix}")
            click.echo(str(out / f"lockstep.{suffix}"), err=True)
        plots.pyplot().close(fig)


_TIMELINE_FORMATS = ("perfetto", "json")


@analyze.command()
@_infer_option
@_no_correct_option
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
                   "simulator, wait (calls: all three), env, cuda-api, gpu, counters; "
                   "all; -KIND removes one [default: all, less native calls when they "
                   "would take the file over --max-size].")
@click.option("--max-size", "max_mb", type=click.FloatRange(min=0), default=100.0,
              show_default=True, metavar="MB",
              help="Without --tracks: leave native calls out when the estimated file "
                   "size is over this many MB.")
def timeline(directory: Path, output: Path | None, fmt: str | None, window: str | None,
             processes: tuple[str, ...], tracks: tuple[str, ...], max_mb: float) -> None:
    """A timeline to open in ui.perfetto.dev: per process, tracks of phases, operations,
    native calls and env steps per thread, CUDA API calls, GPU streams with flows from
    each launch, counters."""
    import gzip
    import io

    from rlscope.analysis.timeline import select as sel
    from rlscope.analysis.timeline.slices import CALL_KINDS, TRACK_KINDS
    from rlscope.reporters import perfetto
    from rlscope.reporters import timeline as tl

    kinds = sel.parse_tracks(tracks) if tracks else frozenset(TRACK_KINDS)
    spec = sel.parse_window(window) if window is not None else None
    if fmt is None:
        fmt = "json" if output is not None and output.name.endswith((".json", ".json.gz")) \
            else "perfetto"
    trace = _load(directory, correct=True, infer=True)
    if not any(len(p.events) or len(p.api_calls) or len(p.gpu) for p in trace.processes):
        raise RLScopeError(empty_message(directory, {p.path.name: p.torn_bytes
                                                     for p in trace.processes}))
    plan = sel.plan(trace, kinds, spec, processes)
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
    out = output or directory / TIMELINE_FILES[fmt]
    _make_dir(out.parent)
    try:
        with open(out, "wb") as raw:
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
        size_mb = out.stat().st_size / 1e6
    except OSError as e:
        raise RLScopeError(f"cannot write {out}: {e.strerror}") from None
    click.echo(f"{out}: {stats.slices:,} slices, {stats.flows:,} flows, "
               f"{stats.counter_values:,} counter values on {stats.tracks:,} tracks "
               f"({size_mb:,.1f} MB); open it in https://ui.perfetto.dev")


def _timeline_bytes(counts: dict[str, int], per_slice: int, per_counter: int) -> float:
    from rlscope.analysis.timeline.slices import COUNTERS

    return sum(n * (per_counter if k == COUNTERS else per_slice) for k, n in counts.items())


@analyze.command()
@_parallel_options
@_infer_option
@_no_correct_option
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
def compare(runs: tuple[str, ...], fmt: str, by: str, plot_to: Path | None,
            maps: tuple[str, ...], per_timestep: bool, labels: tuple[str, ...],
            phase: str | None) -> None:
    """Compare runs side by side. Each RUN is a trace directory, or several separated by
    commas: repetitions of one configuration, used to tell deltas from noise."""
    from rlscope.reporters import compare as cmp
    from rlscope.reporters import plots

    groups = [[Path(d) for d in r.split(",") if d] for r in runs]
    if any(not g for g in groups):
        raise click.UsageError("empty run name")
    if labels and len(labels) != len(groups):
        raise click.UsageError(f"--name given {len(labels)} times for {len(groups)} runs")
    try:
        mapping = cmp.parse_map(maps)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    analyses = [[_analysis(d) for d in g] for g in groups]
    names = list(labels) or cmp.unique_labels([cmp.run_label(g) for g in groups])
    if len(set(names)) != len(names):
        raise click.UsageError("two runs have the same name; name them with --name")
    for w in cmp.correction_warnings(analyses, names):
        click.echo(f"rls-analyze: warning: {w}", err=True)
    df = cmp.compare(analyses, names, by, mapping, per_timestep, phase)
    click.echo(cmp.render(df, names, fmt, per_timestep))
    if plot_to is not None:
        _make_dir(plot_to.parent)
        fig = cmp.figure(df, names, by, per_timestep)
        _save(fig, plot_to)
        plots.pyplot().close(fig)
        click.echo(str(plot_to), err=True)


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
    sys.exit(run(analyze, "rls-analyze", argv))


if __name__ == "__main__":
    main()
