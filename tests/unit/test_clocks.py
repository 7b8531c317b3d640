"""A run over several hosts: host directories read as one run, the hosts' clocks aligned
by their (monotonic, realtime) pairs, with the bound of the alignment's error."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from rlscope.analysis import load
from rlscope.analysis.timeline.select import plan_timeline as timeline_plan
from rlscope.reporters import table
from rlscope.reporters.chrome_trace import write_chrome_trace
from rlscope.trace import format as fmt
from rlscope.trace.clocks import RunClock
from rlscope.trace.data import Header
from rlscope.trace.reader import read_trace, trace_files
from tests.conftest import REPO

REAL = 1_700_000_000_000_000_000  # the realtime instant both hosts' processes start at
BOOT_A, BOOT_B = 1_000_000_000, 7_000_000_000_000  # monotonic there: hosts booted apart


def _mt():
    spec = importlib.util.spec_from_file_location("make_trace",
                                                  REPO / "scripts" / "bench" / "make_trace.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def two_hosts(d: Path, skew_ns: int = 0) -> None:
    """DIR/node-a and DIR/node-b, one process each, whose events happen at the same
    realtime instants (node-b's realtime is ``skew_ns`` ahead, as NTP could leave it)."""
    mt = _mt()
    time, kind, name, _, steps = mt.synth_events(3000, 8, 0)
    for host, boot, pid in (("node-a", BOOT_A, 10), ("node-b", BOOT_B, 20)):
        t = time - time[0] + boot
        (d / host).mkdir(parents=True)
        real_minus_mono = REAL - boot + (skew_ns if host == "node-b" else 0)
        mt.write_process(d / host / f"python.{pid}{fmt.FILE_SUFFIX}", pid, [(t, kind, name)],
                         steps, 1024, host=host, realtime_offset_ns=real_minus_mono)
    (d / "run.json").write_text(json.dumps({"command": ["train.py"], "status": "exited",
                                            "exit_status": 0, "host": {"name": "node-a"}}))


def test_host_directories_are_one_run(tmp_path: Path):
    d = tmp_path / "run"
    two_hosts(d)
    (d / "calibration").mkdir()  # rlscope's own directories are not hosts
    (d / "calibration" / f"python.99{fmt.FILE_SUFFIX}").write_bytes(b"x")
    _, _, files = trace_files(d)
    assert [f.parent.name for f in files] == ["node-a", "node-b"]
    a = load(d)
    assert sorted(a.processes()["pid"]) == [10, 20]
    assert list(a.process_tree()["host"]) == ["node-a", "node-b"]


def test_clocks_aligned_by_pairs(tmp_path: Path):
    d = tmp_path / "run"
    two_hosts(d)
    a = load(d)
    hosts = a.hosts().set_index("host")
    assert hosts.loc["node-a", "reference"] and hosts.loc["node-a", "shift_s"] == 0
    assert hosts.loc["node-b", "shift_s"] == pytest.approx((BOOT_A - BOOT_B) / 1e9)
    bound = hosts.loc["node-b", "error_bound_s"]
    assert 0 < bound <= 200e-9  # the pairs' uncertainties (100 ns each), halved
    tree = a.process_tree().set_index("host")
    # The same realtime instants: on one clock, the same run times.
    assert abs(tree.loc["node-a", "start_s"] - tree.loc["node-b", "start_s"]) <= bound
    assert abs(tree.loc["node-a", "end_s"] - tree.loc["node-b", "end_s"]) <= bound
    out = table.render(a, "text")
    assert "Hosts: 2; times on node-a's clock" in out and "error bound ±0.1 µs" in out
    assert json.loads(table.render(a, "json"))["hosts"][1]["host"] == "node-b"


def test_timeline_on_one_clock(tmp_path: Path):
    import io

    d = tmp_path / "run"
    two_hosts(d)
    buf = io.StringIO()
    write_chrome_trace(timeline_plan(read_trace(d)), buf)
    ev = json.loads(buf.getvalue())["traceEvents"]
    first = {pid: min(e["ts"] for e in ev if e["ph"] == "X" and e["pid"] == pid)
             for pid in (10, 20)}
    assert first[10] == first[20] == 1.0  # the phase opens 1 µs after the start


def test_skewed_realtime_is_outside_what_the_bound_covers(tmp_path: Path):
    """A realtime disagreement between hosts moves the alignment by exactly that much:
    the traces cannot see it, so the report says the bound does not cover it."""
    d = tmp_path / "run"
    two_hosts(d, skew_ns=250_000)
    tree = load(d).process_tree().set_index("host")
    assert tree.loc["node-b", "start_s"] - tree.loc["node-a", "start_s"] == \
        pytest.approx(250e-6, abs=1e-9)


def _h(host: str, mono: int, real: int, u: int, pid: int = 1) -> Header:
    return Header(1, "python", pid, 0, host, "p", (), fmt.ClockPair(mono, real, u), "native",
                  "")


def test_run_clock_offsets_and_bound():
    hs = [_h("a", 100, 1100, 10), _h("a", 200, 1204, 2),  # a's offsets: 1000, 1004 (best)
          _h("b", 50, 5000, 40), _h("b", 70, 5019, 6)]  # b's: 4950, 4949 (best)
    c = RunClock.of({}, hs)
    assert c.reference == "a"  # first to start (realtime)
    a, b = c.hosts["a"], c.hosts["b"]
    assert (a.offset_ns, a.uncertainty_ns, a.shift_ns, a.error_ns) == (1004, 2, 0, 0)
    assert a.spread_ns == 0  # |1000 - 1004| is within that pair's 10/2: no drift seen
    assert b.offset_ns == 4949 and b.shift_ns == 4949 - 1004
    assert b.spread_ns == 0  # |4950 - 4949| = 1 within 40/2
    assert b.error_ns == 3 + 1  # half of each chosen pair's uncertainty
    assert c.start(hs[2]) == 50 + b.shift_ns
    # Drift beyond the readings' error counts into the bound.
    c2 = RunClock.of({}, [_h("a", 0, 1000, 2), _h("a", 10, 1050, 2), _h("b", 5, 2000, 2)])
    assert c2.reference == "a" and c2.hosts["a"].offset_ns == 1000  # tie: the earlier
    assert c2.hosts["a"].spread_ns == 40 - 1 and c2.hosts["b"].error_ns == 1 + 1 + 39
    # rls-prof's host is the reference when it recorded; one host is never shifted.
    c3 = RunClock.of({"host": {"name": "b"}, "start": {"monotonic_ns": 3, "realtime_ns": 9}},
                     hs)
    assert c3.reference == "b" and c3.start_ns == 3 and c3.hosts["b"].shift_ns == 0
    one = RunClock.of({}, hs[:2])
    assert one.shift("a") == 0 and one.error_ns == 0


def test_ordering_uses_the_run_clock(tmp_path: Path):
    d = tmp_path / "run"
    two_hosts(d)
    # node-b's monotonic readings are far larger, yet both started at the same instant:
    # pid order breaks the tie, as on one host.
    assert [p.pid for p in read_trace(d).processes] == [10, 20]
    assert np.array_equal(load(d).processes()["pid"].to_numpy(), [10, 20])


def test_worker_env(monkeypatch: pytest.MonkeyPatch):
    from rlscope import envvars
    from rlscope.launch.child_env import BOOTSTRAP_DIR, worker_env

    base = {envvars.OUTPUT_DIR: "runs/x", envvars.RECORDER: "python", envvars.HOST: "node-a",
            envvars.CHUNK_DIR: "/tmp/c", "HOME": "/root"}
    e = worker_env(base)
    assert e[envvars.OUTPUT_DIR].endswith("/runs/x") and e[envvars.OUTPUT_DIR].startswith("/")
    assert e[envvars.RECORDER] == "python" and e[envvars.HOST_DIRS] == "1"
    assert envvars.HOST not in e and envvars.CHUNK_DIR not in e and "HOME" not in e
    assert e["PYTHONPATH"] == BOOTSTRAP_DIR + ":${PYTHONPATH}"
    with pytest.raises(ValueError, match="run the driver under rls-prof"):
        worker_env({})


def test_host_label_is_a_file_name(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RLSCOPE_HOST", "a/b c")
    assert fmt.host_name() == "a_b_c"
    monkeypatch.setenv("RLSCOPE_HOST", "..")
    assert fmt.host_name() == "host"
    monkeypatch.setenv("RLSCOPE_HOST_DIRS", "1")
    assert fmt.host_directory("/d") == "/d/host"
    monkeypatch.delenv("RLSCOPE_HOST_DIRS")
    assert fmt.host_directory("/d") == "/d"
