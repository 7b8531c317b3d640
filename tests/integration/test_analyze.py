"""rls-analyze report / plot / timeline / compare in a subprocess, on generated traces;
bad input gives one line and exit status 2 for every subcommand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlscope.trace import format as fmt
from rlscope.trace import messages
from tests.conftest import REPO, run_tool
from tests.perfetto_reader import read_perfetto

MAKE_TRACE = REPO / "scripts" / "bench" / "make_trace.py"


def make(out: Path, events: int = 20000, seed: int = 0, threads: int = 1) -> Path:
    subprocess.run([sys.executable, str(MAKE_TRACE), "-o", str(out), "--events", str(events),
                    "--seed", str(seed), "--threads", str(threads)], check=True,
                   capture_output=True)
    return out


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("traces")
    return [make(d / "a", seed=1), make(d / "b", seed=2), make(d / "c", 30000, seed=3,
                                                                threads=2)]


def test_report_all_formats(traces: list[Path]):
    r = run_tool("rls-analyze", "report", str(traces[0]))
    assert r.returncode == 0, r.stderr
    for word in ("inference", "simulation", "backprop", "optimizer", "Backend", "Simulator",
                 "Progress:"):
        assert word in r.stdout, word
    r = run_tool("rls-analyze", "report", "--format", "json", str(traces[2]))
    doc = json.loads(r.stdout)
    assert doc["processes"][0]["threads"] == 2
    r = run_tool("rls-analyze", "report", "--format", "csv", str(traces[0]))
    assert r.stdout.startswith("pid,process,phase,operation")


def test_plot_timeline_compare(traces: list[Path], tmp_path: Path):
    r = run_tool("rls-analyze", "plot", str(traces[0]), "-o", str(tmp_path / "plots"))
    assert r.returncode == 0, r.stderr
    names = {p.name for p in (tmp_path / "plots").iterdir()}
    trends = {n for n in names if n.startswith("trends.")}  # the process reports progress
    assert names - trends == {
        "breakdown.png", "breakdown.svg", "transitions.png", "transitions.svg"}
    assert {n.rsplit(".", 1)[1] for n in trends} == {"png", "svg"}
    r = run_tool("rls-analyze", "timeline", str(traces[2]), "-o", str(tmp_path / "t.json"))
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "t.json").read_text())
    assert sum(e["ph"] == "X" for e in doc["traceEvents"]) > 1000
    r = run_tool("rls-analyze", "compare", f"{traces[0]},{traces[1]}", str(traces[2]),
                 "--plot", str(tmp_path / "cmp.png"))
    assert r.returncode == 0, r.stderr
    assert "Δ c" in r.stdout and (tmp_path / "cmp.png").exists()



def test_timeline_formats_budget_and_selection(traces: list[Path], tmp_path: Path):
    d = traces[2]  # 2 threads, operations, backend and simulator calls, progress
    r = run_tool("rls-analyze", "timeline", str(d))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{d / 'timeline.pftrace'}: ") and r.stderr == ""
    full = read_perfetto(d / "timeline.pftrace")
    names = {t.name for t in full.tracks.values()}
    assert {"thread-0: operations", "thread-0: native calls", "timesteps"} <= names
    # Over the size budget, native calls are left out, with one line saying so.
    r = run_tool("rls-analyze", "timeline", str(d), "-o", str(tmp_path / "small.pftrace"),
                 "--max-size", "0.01")
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("rls-analyze: timeline: native calls left out (")
    assert "--tracks all" in r.stderr and len(r.stderr.splitlines()) == 1
    small = read_perfetto(tmp_path / "small.pftrace")
    assert not any("native calls" in t.name for t in small.tracks.values())
    r = run_tool("rls-analyze", "timeline", str(d), "-o", str(tmp_path / "all.pftrace.gz"),
                 "--max-size", "0.01", "--tracks", "all")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    gz = read_perfetto(tmp_path / "all.pftrace.gz")
    assert {n: len(s) for n, s in gz.by_name().items()} == \
        {n: len(s) for n, s in full.by_name().items()}
    # JSON: by name or by --format.
    r = run_tool("rls-analyze", "timeline", str(d), "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads((d / "trace.json").read_text())
    assert sum(e["ph"] == "X" for e in doc["traceEvents"]) == \
        sum(len(s) for s in full.slices.values())
    # A window and a kind of track.
    r = run_tool("rls-analyze", "timeline", str(d), "-o", str(tmp_path / "w.pftrace"),
                 "--window", "10ms:20ms", "--tracks", "operations")
    assert r.returncode == 0, r.stderr
    w = read_perfetto(tmp_path / "w.pftrace")
    slices = [s for sl in w.slices.values() for s in sl]
    assert slices and {t.name for u, t in w.tracks.items() if u in w.slices} == {
        "thread-0: operations", "thread-1: operations"}
    # Times are ns from the run's first event, as the window's bounds.
    assert all(10_000_000 <= s.start <= s.end <= 20_000_000 for s in slices)
    for args, says in ((["--window", "10:20"], "needs a unit"),
                       (["--process", "nobody"], "matches no process"),
                       (["--tracks", "bogus"], "unknown track"),
                       (["--window", "1e6s:"], "starts after the run's last event")):
        r = run_tool("rls-analyze", "timeline", str(d), "-o", str(tmp_path / "x"), *args)
        assert r.returncode == 2, (args, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], (args, r.stderr)

def _corrupt(d: Path) -> Path:
    d.mkdir()
    (d / f"python.1{fmt.FILE_SUFFIX}").write_bytes(fmt.MAGIC + b"\x05\xff\xff\xff\xff\xff"
                                                    + b"\x00" * 50)
    return d


def _other_version(d: Path, traces: list[Path]) -> Path:
    d.mkdir()
    src = next(traces[0].glob("*" + fmt.FILE_SUFFIX))
    (d / src.name).write_bytes(src.read_bytes())
    rec = messages.Record()
    rec.header.format_version = fmt.FORMAT_VERSION + 1
    rec.header.source = "python"
    body = rec.SerializeToString()
    (d / f"python.2{fmt.FILE_SUFFIX}").write_bytes(fmt.MAGIC + bytes([len(body)]) + body)
    return d


def test_bad_input_is_one_line_for_every_subcommand(traces: list[Path], tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    no_events = tmp_path / "no_events"  # a header and nothing else
    no_events.mkdir()
    rec = messages.Record()
    rec.header.format_version = fmt.FORMAT_VERSION
    rec.header.source = "python"
    body = rec.SerializeToString()
    (no_events / f"python.3{fmt.FILE_SUFFIX}").write_bytes(fmt.MAGIC + bytes([len(body)])
                                                           + body)
    zero = tmp_path / "zero"  # a zero-byte file
    zero.mkdir()
    (zero / f"python.4{fmt.FILE_SUFFIX}").write_bytes(b"")
    bad = [tmp_path / "missing", empty, no_events, zero, _corrupt(tmp_path / "corrupt"),
           _other_version(tmp_path / "mixed", traces)]
    for d in bad:
        for args in (["report", str(d)], ["plot", str(d), "-o", str(tmp_path / "p")],
                     ["timeline", str(d), "-o", str(tmp_path / "t.json")],
                     ["compare", str(traces[0]), str(d)]):
            r = run_tool("rls-analyze", *args)
            assert r.returncode == 2, (args, r.stdout, r.stderr)
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1 and "Traceback" not in r.stderr, (args, r.stderr)
