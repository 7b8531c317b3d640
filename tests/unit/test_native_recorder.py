"""The native recorder (rlscope._native) end to end: record, stop, parse the file.

The file is parsed with a small local helper (magic, varint-length-delimited Record
messages, rlscope.trace.messages' classes) so these tests do not depend on the reader.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

_native = pytest.importorskip("rlscope._native")
messages = pytest.importorskip("rlscope.trace.messages")

OP_B, OP_E, PH_B, PH_E, PROGRESS, P_START, P_END = 1, 2, 3, 4, 5, 6, 7


class NativeTestError(Exception):
    pass


def _decorate(scope, func):
    return ("decorated", scope, func)


@pytest.fixture(autouse=True)
def _configured():
    _native.configure(NativeTestError, _decorate)
    yield
    _native.stop()


# ---------------------------------------------------------------- file parsing


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def read_trace(path):
    data = Path(path).read_bytes()
    assert data[:8] == b"RLSCOPE\n"
    pos, records = 8, []
    while pos < len(data):
        n, pos = _varint(data, pos)
        assert pos + n <= len(data), "torn record"
        records.append(messages.Record.FromString(data[pos : pos + n]))
        pos += n
    assert records[0].WhichOneof("body") == "header"
    assert all(r.WhichOneof("body") == "chunk" for r in records[1:])
    return records[0].header, [r.chunk for r in records[1:]]


class Trace:
    """Decoded events: (time, thread index, kind, name, args) plus definitions."""

    def __init__(self, path):
        self.header, self.chunks = read_trace(path)
        self.strings: dict[int, str] = {}
        self.threads: dict[int, Any] = {}
        self.metadata = []
        self.events = []
        self.dropped = 0
        for seq, c in enumerate(self.chunks):
            assert c.sequence == seq
            assert len(c.kind) <= 65536
            for s in c.strings:
                assert s.id not in self.strings, "string defined twice"
                self.strings[s.id] = s.value
            for t in c.threads:
                assert t.index not in self.threads, "thread defined twice"
                self.threads[t.index] = t
            self.metadata.extend(c.metadata)
            self.dropped += c.dropped_events
            deltas, threads = list(c.time_delta_ns), list(c.thread)
            kinds, names, args = list(c.kind), list(c.name), list(c.args)
            assert len(deltas) == len(threads) == len(names) == len(kinds)
            assert set(threads) <= set(self.threads), "thread used before its definition"
            assert set(names) - {0} <= set(self.strings), "string used before its definition"
            t = c.base_time_ns
            a = 0
            for d, th, k, nm in zip(deltas, threads, kinds, names, strict=True):
                t += d
                ev_args = ()
                if k == PROGRESS:
                    ev_args = (args[a], args[a + 1])
                    a += 2
                self.events.append((t, th, k, self.strings[nm] if nm else "", ev_args))
            assert a == len(args), "unused args"

    def by_thread(self):
        out: dict[str, list] = {}
        for ev in self.events:
            out.setdefault(self.threads[ev[1]].name, []).append(ev)
        return out


def start(path, **kw):
    _native.start(str(path), ["prog", "--flag"], "proc-name", "9.9.9", **kw)


def assert_balanced(events):
    stack = []
    for _, _, kind, name, _ in events:
        if kind in (OP_B, PH_B):
            stack.append((kind, name))
        elif kind in (OP_E, PH_E):
            assert stack and stack[-1] == (kind - 1, name), (stack, kind, name)
            stack.pop()
    assert stack == []


# ---------------------------------------------------------------- tests


def test_module_surface():
    assert _native.FORMAT_VERSION == 1
    op = _native.operation("surface")
    assert _native.operation("surface") is op
    assert _native.phase("surface") is not op
    assert op.name == "surface" and op.kind == "operation"
    assert _native.phase("surface").kind == "phase"
    assert repr(op) == "<rlscope operation 'surface'>"
    with pytest.raises(TypeError):
        _native.operation(3)
    with pytest.raises(NativeTestError):
        _native.operation("")


def test_header(tmp_path):
    p = tmp_path / "t.trace"
    mono0, real0 = time.perf_counter_ns(), time.time_ns()
    start(p)
    mono1, real1 = time.perf_counter_ns(), time.time_ns()
    assert _native.is_active()
    _native.stop()
    assert not _native.is_active()
    tr = Trace(p)
    h = tr.header
    assert h.format_version == 1
    assert h.source == "python"
    assert h.pid == os.getpid() and h.ppid == os.getppid()
    assert h.host == socket.gethostname()
    assert h.process_name == "proc-name"
    assert list(h.argv) == ["prog", "--flag"]
    assert h.recorder == "native" and h.rlscope_version == "9.9.9"
    assert mono0 <= h.clock.monotonic_ns <= mono1
    assert real0 - 1_000_000 <= h.clock.realtime_ns <= real1 + 1_000_000
    assert 0 <= h.clock.uncertainty_ns < 1_000_000
    kinds = [e[2] for e in tr.events]
    assert kinds == [P_START, P_END]
    assert tr.threads[tr.events[0][1]].name == threading.current_thread().name


def test_threads_order_names_and_stats(tmp_path):
    p = tmp_path / "t.trace"
    start(p)
    n_iter = 500
    tids = {}

    def work(k):
        tids[threading.current_thread().name] = threading.get_native_id()
        outer, inner = _native.operation("outer"), _native.operation(f"inner{k}")
        for _ in range(n_iter):
            with outer, inner:
                pass

    threads = [threading.Thread(target=work, args=(k,), name=f"worker-{k}") for k in range(4)]
    for t in threads:
        t.start()
    with _native.phase("main-phase"):
        assert _native.thread_stack() == ["main-phase"]
        for t in threads:
            t.join()
    assert _native.thread_stack() == []
    _native.flush()
    st = _native.stats()
    assert set(st) == {"events", "dropped", "chunks", "bytes_written", "threads"}
    assert st["events"] == 1 + 2 + 4 * 4 * n_iter and st["dropped"] == 0
    _native.stop()
    st = _native.stats()
    assert st["events"] == 1 + 2 + 1 + 4 * 4 * n_iter
    assert st["threads"] == 5
    assert st["bytes_written"] == os.path.getsize(p)
    tr = Trace(p)
    assert st["chunks"] == len(tr.chunks)
    assert tr.dropped == 0
    by = tr.by_thread()
    main = by.pop(threading.current_thread().name)
    assert [e[2:4] for e in main] == [(P_START, ""), (PH_B, "main-phase"), (PH_E, "main-phase"),
                                      (P_END, "")]
    assert sorted(by) == [f"worker-{k}" for k in range(4)]
    for name, evs in by.items():
        k = int(name.split("-")[1])
        assert len(evs) == 4 * n_iter
        assert [e[2:4] for e in evs[:4]] == [(OP_B, "outer"), (OP_B, f"inner{k}"),
                                            (OP_E, f"inner{k}"), (OP_E, "outer")]
        times = [e[0] for e in evs]
        assert times == sorted(times)
        assert_balanced(evs)
    for t in tr.threads.values():
        if t.name.startswith("worker-"):
            assert t.tid == tids[t.name]
        else:
            assert t.tid == threading.get_native_id()


def test_progress_metadata_and_chunk_split(tmp_path):
    p = tmp_path / "t.trace"
    start(p, flush_interval_s=60.0, max_buffer_bytes=64 << 20)
    op = _native.operation("step")
    for _ in range(40_000):  # 80k events: two chunks in one flush
        with op:
            pass
    _native.progress(123, 1000)
    _native.progress(7, -1)
    _native.metadata("config", '{"lr": 0.1}')
    _native.stop()
    tr = Trace(p)
    sizes = [len(c.kind) for c in tr.chunks]
    assert sum(sizes) == 80_000 + 4 and max(sizes) <= 65536  # split exactly in the C++ test
    prog = [e for e in tr.events if e[2] == PROGRESS]
    assert [e[4] for e in prog] == [(123, 1000), (7, -1)]
    (m,) = [m for m in tr.metadata if m.key != "rlscope.event_clock"]
    assert (m.key, m.json_value) == ("config", '{"lr": 0.1}')
    assert tr.header.clock.monotonic_ns < m.time_ns < time.perf_counter_ns()
    assert_balanced(tr.events)


def test_pop_operation_rules(tmp_path):
    p = tmp_path / "t.trace"
    start(p)
    with pytest.raises(NativeTestError, match=r"without a matching push_operation\(\)"):
        _native.pop_operation()
    _native.push_operation("a")
    _native.push_operation("b")
    with pytest.raises(NativeTestError, match=r"pop_operation\('a'\).*'b'.*'a', .*'b'"):
        _native.pop_operation("a")
    with pytest.raises(NativeTestError, match="'zzz'"):
        _native.pop_operation("zzz")
    assert _native.thread_stack() == ["a", "b"]  # unchanged
    _native.pop_operation("b")
    with _native.phase("ph"), pytest.raises(NativeTestError, match="phase 'ph'"):
        _native.pop_operation()
    _native.pop_operation()
    assert _native.thread_stack() == []
    _native.stop()
    tr = Trace(p)
    assert [e[2:4] for e in tr.events] == [
        (P_START, ""), (OP_B, "a"), (OP_B, "b"), (OP_E, "b"), (PH_B, "ph"), (PH_E, "ph"),
        (OP_E, "a"), (P_END, "")]


def test_exit_rules(tmp_path):
    p = tmp_path / "t.trace"
    start(p)
    outer, mid, inner = (_native.operation(n) for n in ("outer", "mid", "inner"))
    # Exiting an outer scope closes the inner ones and raises.
    outer.__enter__()
    mid.__enter__()
    inner.__enter__()
    with pytest.raises(NativeTestError, match=r"'outer'.*'inner'.*'mid'"):
        outer.__exit__(None, None, None)
    assert _native.thread_stack() == []
    # The same with an exception in flight: unwind silently, the exception propagates.
    with pytest.raises(ValueError, match="boom"), outer:
        inner.__enter__()
        raise ValueError("boom")
    assert _native.thread_stack() == []
    # Exit without enter.
    with pytest.raises(NativeTestError, match="exited without a matching enter on this thread"):
        inner.__exit__(None, None, None)
    assert inner.__exit__(ValueError, ValueError("x"), None) is False
    # __exit__ never swallows.
    with pytest.raises(KeyError), outer:
        raise KeyError("k")
    _native.stop()
    tr = Trace(p)
    evs = [e for e in tr.events if e[2] in (OP_B, OP_E)]
    assert [e[2:4] for e in evs] == [
        (OP_B, "outer"), (OP_B, "mid"), (OP_B, "inner"),
        (OP_E, "inner"), (OP_E, "mid"), (OP_E, "outer"),
        (OP_B, "outer"), (OP_B, "inner"), (OP_E, "inner"), (OP_E, "outer"),
        (OP_B, "outer"), (OP_E, "outer")]
    assert evs[3][0] == evs[4][0] == evs[5][0]  # closed at one timestamp
    assert_balanced(tr.events)


def test_max_depth(tmp_path):
    start(tmp_path / "t.trace")
    scopes = [_native.operation(f"d{i}") for i in range(257)]
    for s in scopes[:256]:
        s.__enter__()
    with pytest.raises(NativeTestError, match="256"):
        scopes[256].__enter__()
    assert len(_native.thread_stack()) == 256
    for s in reversed(scopes[:256]):
        s.__exit__(None, None, None)
    assert _native.thread_stack() == []


def test_decorator_delegates():
    op = _native.operation("deco")

    def f():
        pass

    assert op(f) == ("decorated", op, f)


def test_inactive_is_a_noop(tmp_path):
    assert not _native.is_active()
    op = _native.operation("idle")
    with op:
        assert _native.thread_stack() == []
    assert op.__exit__(None, None, None) is False
    _native.push_operation("x")
    _native.pop_operation("y")
    _native.progress(1, 2)
    _native.metadata("k", "1")
    _native.flush()
    _native.stop()


def test_start_errors(tmp_path):
    p = tmp_path / "exists.trace"
    p.write_bytes(b"")
    with pytest.raises(NativeTestError, match=r"cannot create trace file .*File exists"):
        start(p)
    with pytest.raises(NativeTestError, match="No such file or directory"):
        start(tmp_path / "missing-dir" / "t.trace")
    assert not _native.is_active()
    start(tmp_path / "a.trace")
    with pytest.raises(NativeTestError, match="already active"):
        start(tmp_path / "b.trace")
    assert not (tmp_path / "b.trace").exists()


def test_restart_redefines_and_forgets_open_scopes(tmp_path):
    a, b = tmp_path / "a.trace", tmp_path / "b.trace"
    start(a)
    with _native.operation("first"):
        pass
    _native.operation("left-open").__enter__()
    _native.stop()
    start(b)
    assert _native.thread_stack() == []
    with _native.operation("first"):
        pass
    _native.stop()
    tb = Trace(b)
    assert [e[2:4] for e in tb.events] == [(P_START, ""), (OP_B, "first"), (OP_E, "first"),
                                           (P_END, "")]
    assert_balanced(Trace(a).events)


def test_dropped_events_counted_and_stack_kept(tmp_path):
    p = tmp_path / "t.trace"
    # 2 blocks of 4096 records, no periodic flush: most events are dropped.
    start(p, flush_interval_s=60.0, max_buffer_bytes=1)
    op = _native.operation("drop")
    n = 50_000
    outer = _native.operation("outer")
    outer.__enter__()
    for _ in range(n):
        with op:
            pass
    assert _native.thread_stack() == ["outer"]
    outer.__exit__(None, None, None)
    _native.stop()
    st = _native.stats()
    tr = Trace(p)
    assert st["dropped"] > 0 and tr.dropped == st["dropped"]
    assert st["events"] == len(tr.events)
    assert st["events"] + st["dropped"] == 2 * n + 4


def test_ctypes_record(tmp_path):
    p = tmp_path / "t.trace"
    lib = ctypes.CDLL(_native.__file__)
    fn = lib.rlscope_ctypes_record
    fn.argtypes = [ctypes.c_uint, ctypes.c_uint]
    fn.restype = ctypes.c_int
    assert fn(5, 0) == 1  # not active
    start(p)
    assert fn(PROGRESS + 100, 0) == 0
    _native.stop()
    assert (PROGRESS + 100) in [e[2] for e in Trace(p).events]


def test_bytes_per_event(tmp_path):
    p = tmp_path / "t.trace"
    start(p)
    names = ["inference", "simulation", "backprop"]
    ops = [_native.operation(n) for n in names]
    step = _native.operation("step")
    acc = 0
    for i in range(10_000):  # 10k steps x 10 events
        with step:
            for op in ops:
                with op:
                    acc += sum(range(i % 7))
        if i % 100 == 0:
            _native.progress(i, 10_000)
        with _native.phase("tail"):
            pass
    _native.stop()
    st = _native.stats()
    assert st["events"] >= 100_000
    per_event = os.path.getsize(p) / st["events"]
    assert per_event <= 12, per_event


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork(tmp_path):
    parent_p, child_p = tmp_path / "parent.trace", tmp_path / "child.trace"
    start(parent_p)
    outer = _native.operation("outer")
    with outer:
        with _native.operation("before-fork"):
            pass
        pid = os.fork()
        if pid == 0:  # child
            code = 1
            try:
                assert _native.after_fork_child(str(child_p)) is True
                with _native.operation("child-op"):
                    pass
                _native.flush()
                outer.__exit__(None, None, None)
                _native.stop()
                code = 0
            except BaseException as e:  # pragma: no cover - reported via exit code
                print(f"child failed: {e!r}", file=sys.stderr)
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        with _native.operation("parent-after"):
            pass
    _native.stop()

    tp = Trace(parent_p)
    assert [e[3] for e in tp.events if e[2] == OP_B] == ["outer", "before-fork", "parent-after"]
    assert_balanced(tp.events)

    tc = Trace(child_p)
    assert tc.header.pid == pid and tc.header.ppid == os.getpid()
    assert tc.header.clock.monotonic_ns > tp.header.clock.monotonic_ns
    # The parent's open scope is not the child's: its exit in the child is silent.
    assert [e[2:4] for e in tc.events] == [
        (P_START, ""), (OP_B, "child-op"), (OP_E, "child-op"), (P_END, "")]
    assert_balanced(tc.events)
    assert list(tc.threads) and all(t.tid == pid for t in tc.threads.values())


def test_after_fork_child_without_recording(tmp_path):
    assert _native.after_fork_child(str(tmp_path / "x.trace")) is False
    assert not (tmp_path / "x.trace").exists()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_while_other_threads_record(tmp_path):
    """Forks while two threads record and the writer flushes: no deadlock, every file
    parses, each child's file holds only the child's events, balanced."""
    start(tmp_path / "parent.trace", flush_interval_s=0.005)
    done = threading.Event()

    def work(k):
        a, b = _native.operation(f"busy{k}"), _native.operation("inner")
        i = 0
        while not done.is_set():
            with a, b:
                _native.progress(1, 2)
            i += 1
            if i % 200 == 0:  # keep the parent's file small: it is parsed in Python
                time.sleep(0.0005)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    pids = []
    try:
        for i in range(10):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    _native.after_fork_child(str(tmp_path / f"child{i}.trace"))
                    for _ in range(100):
                        with _native.operation("c"):
                            pass
                    _native.stop()
                    code = 0
                finally:
                    os._exit(code)
            pids.append(pid)
    finally:
        done.set()
        for t in threads:
            t.join()
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    _native.stop()
    tr = Trace(tmp_path / "parent.trace")
    for evs in tr.by_thread().values():
        assert_balanced(evs)
    for i, pid in enumerate(pids):
        tc = Trace(tmp_path / f"child{i}.trace")
        assert tc.header.pid == pid
        assert [e[2:4] for e in tc.events[:2]] == [(P_START, ""), (OP_B, "c")]
        assert sum(1 for e in tc.events if e[3] == "c") == 200
        assert tc.events[-1][2] == P_END
        assert_balanced(tc.events)


# Events spaced by spins of 20 us (segments too short for a rate of their own) and 2 ms,
# each flushed: every event must lie between the workload's perf_counter_ns readings
# around it, whichever clock the events were taken on.
_TIMED = """
import json, sys, time
sys.path.insert(0, sys.argv[2])
from test_native_recorder import OP_B, Trace, _native, start, NativeTestError, _decorate
_native.configure(NativeTestError, _decorate)
start(sys.argv[1], flush_interval_s=60.0)
op = _native.operation("timed")
spans = []
for i in range(2000):
    b = time.perf_counter_ns()
    with op:
        pass
    spans.append((b, time.perf_counter_ns()))
    if i % 100 == 99:
        end = time.perf_counter_ns() + (2_000_000 if i % 200 == 199 else 20_000)
        while time.perf_counter_ns() < end:
            pass
        _native.flush()
_native.stop()
tr = Trace(sys.argv[1])
times = [e[0] for e in tr.events if e[3] == "timed"]
assert len(times) == 2 * len(spans)
late = max(max(b - t0, t0 - t1, t1 - a)
           for (b, a), t0, t1 in zip(spans, times[::2], times[1::2]))
(clock,) = [json.loads(m.json_value) for m in tr.metadata if m.key == "rlscope.event_clock"]
print(json.dumps({"late_ns": late, "ticks": clock["ticks"]}))
"""


def test_clock_variable_misspelt_is_one_line(tmp_path):
    from tests.conftest import run_tool

    env = dict(os.environ, RLSCOPE_CLOCK="monotnic")
    r = run_tool("rls-prof", "-o", str(tmp_path / "run"), "-q", "--", sys.executable, "-c",
                 "pass", env=env)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if "RLSCOPE_CLOCK" in x]
    assert lines == ["rlscope: RLSCOPE_CLOCK='monotnic' is neither 'monotonic' nor 'tsc'; "
                     "events are timed on the TSC where the kernel's clock runs on it"], r.stderr
    assert "Traceback" not in r.stderr
    assert list((tmp_path / "run").glob("*.rlscope"))  # recorded all the same


def _tsc_trusted_here() -> bool:
    try:
        source = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return False
    return (os.uname().machine == "x86_64" and source.read_text().strip() == "tsc"
            and "constant_tsc" in flags and "nonstop_tsc" in flags)


@pytest.mark.parametrize("forced", [None, "monotonic"])
def test_event_times_on_the_workload_clock(tmp_path, forced):
    env = {k: v for k, v in os.environ.items() if k != "RLSCOPE_CLOCK"}
    if forced:
        env["RLSCOPE_CLOCK"] = forced
    out = subprocess.run([sys.executable, "-c", _TIMED, str(tmp_path / "t.trace"),
                          str(Path(__file__).parent)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    print(got)  # pytest -s: how far inside its readings the latest event lay (negative)
    want = "tsc" if forced is None and _tsc_trusted_here() else "monotonic"
    assert got["ticks"] == want
    # A tick mapping off by its rate would be microseconds out after a 2 ms segment;
    # the anchors' own error is tens of ns.
    assert got["late_ns"] <= 1_000, got
