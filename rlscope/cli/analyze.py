"""``rls-analyze``: read a trace directory and report on it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from rlscope.analysis.summary import process_span, summarize
from rlscope.cli.common import run
from rlscope.reporters import table
from rlscope.reporters.dump import dump_lines
from rlscope.trace import Trace, read_trace


def _load(directory: Path) -> Trace:
    trace = read_trace(directory)
    for w in trace.warnings:
        click.echo(f"rls-analyze: warning: {w}", err=True)
    return trace


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
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(table.FORMATS), default="text",
              show_default=True, help="Output format.")
def report(directory: Path, fmt: str) -> None:
    """Time per process, phase and operation: wall, exclusive (self), calls, percent."""
    trace = _load(directory)
    df = summarize(trace)
    processes: list[dict[str, Any]] = []
    for p in trace.processes:
        if p.header.source != "python":
            continue
        span = process_span(p)
        processes.append({"pid": p.pid, "ppid": p.header.ppid,
                          "process": p.header.process_name, "seconds": span.seconds,
                          "recorder": p.header.recorder, "complete": p.complete,
                          "events": len(p.events), "metadata": p.metadata})
    click.echo(table.render(df, fmt, processes, trace.run))


def main(argv: list[str] | None = None) -> None:
    sys.exit(run(analyze, "rls-analyze", argv))


if __name__ == "__main__":
    main()
