"""One way to open a run (rlscope.analysis.pipeline.run): a report on a run with vector envs
reads each trace file once, and what a new user meets first (no matplotlib, an empty
timeline) is one line, never a traceback or a clobbered file."""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest

import rlscope.analysis.pipeline.stream as stream
import rlscope.trace.reader as reader
from rlscope.analysis import load_lockstep
from rlscope.analysis.pipeline.run import ANALYSIS, EVENTS, SAMPLES, RunOptions, open_run
from rlscope.cli import analyze
from rlscope.trace import format as fmt
from tests.conftest import run_tool

pytest.importorskip("gymnasium")
WORKLOAD = str(Path(__file__).parent / "workloads" / "vecenv_straggler.py")


@pytest.fixture(scope="module")
def vec_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("vec")
    out = d / "trace"
    r = run_tool("rls-prof", "-o", str(out), "-q", "--", sys.executable, WORKLOAD, "async",
                 str(d / "truth"), "40", "2", "1", timeout=600)
    assert r.returncode == 0, r.stderr
    return out


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Passes over each trace file: every reader goes through iter_chunks."""
    reads: dict[str, int] = {}

    def counting(real):  # type: ignore[no-untyped-def]
        def iter_chunks(path, *args, **kwargs):  # type: ignore[no-untyped-def]
            reads[Path(path).name] = reads.get(Path(path).name, 0) + 1
            return real(path, *args, **kwargs)
        return iter_chunks

    monkeypatch.setattr(stream, "iter_chunks", counting(stream.iter_chunks))
    monkeypatch.setattr(reader, "iter_chunks", counting(reader.iter_chunks))
    return reads


def _report(*args: str) -> str:
    buf = io.StringIO()
    with redirect_stdout(buf), pytest.raises(SystemExit) as e:
        analyze.main(["report", *args])
    assert e.value.code == 0
    return buf.getvalue()


def test_report_reads_each_trace_file_once(vec_run: Path, monkeypatch: pytest.MonkeyPatch):
    files = sorted(p.name for p in vec_run.glob("*" + fmt.FILE_SUFFIX))
    assert len(files) >= 3  # the main process and its two env workers
    reads = _count_reads(monkeypatch)
    report = json.loads(_report(str(vec_run), "--format", "json"))
    # Once, Python stack samples (on by default) included: they are joined to the events
    # the sweep is fed (rlscope.analysis.pipeline.run).
    assert list(vec_run.glob("*" + fmt.STACKS_SUFFIX))
    assert sorted(reads) == files and set(reads.values()) == {1}, reads
    assert report["python_hotspots"]
    # The lock-step section came from that one pass, and agrees with the lock-step API.
    (v,) = report["lockstep"]["vector_envs"]
    (want,) = load_lockstep(vec_run, correct=False).vector_envs
    assert v["vector_steps"] == want.vector_steps == 40 and v["num_envs"] == 2
    assert v["lockstep_loss_s"] == pytest.approx(want.lockstep_loss_s)
    assert {"operations", "processes", "diagnosis"} <= set(report)

    reads.clear()
    text = _report(str(vec_run))  # the text report too: one pass per file
    assert set(reads.values()) == {1} and "Vector envs" in text


def _without_matplotlib(tmp_path: Path) -> dict[str, str]:
    """An environment in which ``import matplotlib`` fails, as after a plain install."""
    import os

    block = tmp_path / "no_mpl"
    block.mkdir(exist_ok=True)
    (block / "matplotlib.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'matplotlib'\")\n")
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(block), *filter(None, [os.environ.get("PYTHONPATH")])]))


@pytest.mark.parametrize("opts", [RunOptions(correct=False, batch_events=500),
                                  RunOptions(correct=False, jobs=2)])
def test_samples_joined_alike_on_every_path(vec_run: Path, opts: RunOptions):
    """The stack samples joined in the streamed sweep's pass (kept events, or a file over
    the batch read again) and in the fanned-out path as on the whole trace."""

    def per_op(o: RunOptions, want: tuple[str, ...]) -> list[tuple[str, int]]:
        s = open_run(vec_run, o, want).python_samples
        assert s is not None and len(s)
        ops, n = np.unique(s.operation, return_counts=True)
        return sorted((s.operations[i] if i >= 0 else "", int(k))
                      for i, k in zip(ops, n, strict=True))

    whole = per_op(RunOptions(correct=False), (EVENTS, SAMPLES))
    assert per_op(RunOptions(correct=False), (ANALYSIS, SAMPLES)) == whole
    assert per_op(opts, (ANALYSIS, SAMPLES)) == whole


def test_no_matplotlib_is_one_line(vec_run: Path, tmp_path: Path):
    env = _without_matplotlib(tmp_path)
    r = run_tool("rls-analyze", "plot", str(vec_run), "-o", str(tmp_path / "p"), env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "rlscope[plot]" in r.stderr, r.stderr

    r = run_tool("rls-analyze", "lockstep", str(vec_run), "-o", str(tmp_path / "p"),
                 env=env)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "Vector envs" in r.stdout and "skipped" in r.stderr and "rlscope[plot]" in r.stderr

    fig = tmp_path / "cmp.png"
    r = run_tool("rls-analyze", "compare", str(vec_run), str(vec_run), "--name", "a",
                 "--name", "b", "--plot", str(fig), env=env)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "skipped" in r.stderr and not fig.exists() and r.stdout.strip()


def test_empty_timeline_refused_and_the_old_one_kept(vec_run: Path, tmp_path: Path):
    out = tmp_path / "t.pftrace"
    r = run_tool("rls-analyze", "timeline", str(vec_run), "-o", str(out))
    assert r.returncode == 0, r.stderr
    before = out.read_bytes()
    r = run_tool("rls-analyze", "timeline", str(vec_run), "-o", str(out), "--tracks", "gpu")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "empty" in r.stderr, r.stderr
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.pftrace"]  # no leftovers
