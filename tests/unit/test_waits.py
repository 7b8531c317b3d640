"""The ``wait`` interception: blocking standard-library calls recorded as WAIT_CALL
events (outermost per thread), installed on import, restored exactly."""

from __future__ import annotations

import os
import queue
import select
import selectors
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rlscope import intercept
from rlscope.intercept.patch import is_wrapper
from rlscope.trace import format as fmt
from rlscope.trace.reader import read_trace


@pytest.fixture
def waits_intercepted():
    intercept.enable("wait")
    try:
        yield
    finally:
        intercept.disable()


def _originals() -> tuple:
    return (time.sleep, os.read, os.waitpid, select.select,
            threading.Condition.__dict__["wait"], threading.Event.__dict__["wait"],
            threading.Thread.__dict__["join"], queue.Queue.__dict__["get"],
            vars(selectors._PollLikeSelector)["select"],  # type: ignore[attr-defined]
            subprocess.Popen.__dict__["wait"], dict(vars(socket.socket)))


def test_parse_includes_wait():
    assert "wait" in intercept.parse("auto")
    assert intercept.parse("waits") == ["wait"]


def test_wrapped_and_restored_exactly():
    before = _originals()
    intercept.enable("wait")
    try:
        assert is_wrapper(time.sleep) and time.sleep.__wrapped__ is before[0]
        assert is_wrapper(os.read) and is_wrapper(select.select)
        assert is_wrapper(threading.Event.__dict__["wait"])
        assert is_wrapper(vars(socket.socket)["recv"])
        assert intercept.counts["wait"] > 20
        # Still behave: results and exceptions pass through.
        r, w = os.pipe()
        os.write(w, b"ab")
        assert os.read(r, 2) == b"ab"
        os.close(r)
        with pytest.raises(OSError):
            os.read(r, 1)
        os.close(w)
        assert threading.Event().wait(0) is False
    finally:
        intercept.disable()
    after = _originals()
    assert all(a is b for a, b in zip(before[:10], after[:10], strict=True))
    assert after[10] == before[10]


def _waits(directory: Path) -> dict[int, list[tuple[str, int]]]:
    """Per thread: (call name, duration ns) of each recorded wait."""
    (p,) = read_trace(directory).processes
    out: dict[int, list[tuple[str, int]]] = {}
    begin: dict[int, int] = {}
    for t, th, k, n in zip(p.events.time_ns.tolist(), p.events.thread.tolist(),
                           p.events.kind.tolist(), p.events.name.tolist(), strict=True):
        if k == fmt.WAIT_CALL_BEGIN:
            assert th not in begin, "waits nest: only the outermost is recorded"
            begin[th] = t
        elif k == fmt.WAIT_CALL_END:
            out.setdefault(th, []).append((p.strings[n], t - begin.pop(th)))
    assert not begin
    return out


def test_blocking_calls_recorded(recording: Path, waits_intercepted):
    import multiprocessing as mp

    r, w = os.pipe()
    threading.Timer(0.02, os.write, (w, b"x")).start()
    time.sleep(0.01)
    t0 = time.perf_counter_ns()
    os.read(r, 1)  # blocks until the timer writes (unless a loaded machine ran it first)
    read_ns = time.perf_counter_ns() - t0
    q: queue.Queue[int] = queue.Queue()
    threading.Timer(0.01, q.put, (1,)).start()
    q.get()
    a, b = mp.Pipe()
    t = threading.Thread(target=lambda: (time.sleep(0.01), b.send("hi")))
    t.start()
    assert a.poll(5) and a.recv() == "hi"
    t.join()
    s1, s2 = socket.socketpair()
    s2.sendall(b"z")
    assert s1.recv(1) == b"z"
    s1.close()
    s2.close()
    select.select([], [], [], 0.001)
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    os.close(r)
    os.close(w)
    from rlscope import stop

    stop()
    waits = _waits(recording)
    main = [n for n, _ in waits[0]]
    for name in ("time.sleep", "os.read", "queue.Queue.get", "threading.Thread.join",
                 "multiprocessing.connection.Connection._poll",
                 "multiprocessing.connection.Connection._recv", "socket.socket.recv",
                 "select.select", "subprocess.Popen.wait"):
        assert name in main, (name, main)
    # Nested waits are not recorded: Queue.get's Condition.wait, poll's selector.
    assert "threading.Condition.wait" not in main
    assert "selectors._PollLikeSelector.select" not in main
    durations = dict(reversed(waits[0]))  # the first call of each name
    assert durations["time.sleep"] >= 9_000_000
    # The read's recorded wait is the time it blocked, as the test measured it around the
    # call (inside it; at least half of it when it blocked for long).
    assert durations["os.read"] <= read_ns
    assert read_ns < 2_000_000 or durations["os.read"] >= read_ns // 2


def test_calls_that_cannot_block_are_not_waits(recording: Path, waits_intercepted):
    """A zero timeout, ``block=False``, ``os.WNOHANG``: the call returns at once, so it
    is not recorded (a pool's worker-handler thread polls this way ~100 times per
    ``pool.map``); the same calls that may block are, by position or keyword. Each
    group of calls is timed, and the main thread's recorded waits are looked up in
    those windows (other code may wait between them: a fork handler)."""
    import multiprocessing as mp

    windows: list[tuple[str, int, int]] = []  # (what is expected there, begin, end)

    def timed(expect: str, calls: Callable[[], object]) -> None:
        t0 = time.perf_counter_ns()
        calls()
        windows.append((expect, t0, time.perf_counter_ns()))

    ev = threading.Event()
    q: queue.Queue[int] = queue.Queue()
    a, b = mp.Pipe()

    def gets() -> None:
        for get in (lambda: q.get(False), lambda: q.get(block=False)):
            with pytest.raises(queue.Empty):
                get()

    def empty() -> None:
        with pytest.raises(queue.Empty):
            q.get(timeout=0.001)

    timed("", lambda: (ev.wait(0), ev.wait(timeout=0.0)))
    timed("", gets)
    timed("", lambda: (a.poll(0), a.poll()))  # Connection._poll(0.0)
    timed("", lambda: select.select([a], [], [], 0))
    timed("threading.Event.wait", lambda: ev.wait(0.002))
    timed("queue.Queue.get", empty)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # exits once the parent has polled it
        os.read(r, 1)
        os._exit(0)
    timed("", lambda: os.waitpid(pid, os.WNOHANG))
    os.write(w, b"x")
    timed("os.waitpid", lambda: os.waitpid(pid, 0))
    os.close(r)
    os.close(w)
    b.send("x")
    timed("multiprocessing.connection.Connection._poll", lambda: a.poll(5))
    a.close()
    b.close()
    from rlscope import stop

    stop()
    (p,) = [p for p in read_trace(recording).processes if p.pid == os.getpid()]
    begins = (p.events.kind == fmt.WAIT_CALL_BEGIN) & (p.events.thread == 0)
    times, names = p.events.time_ns[begins], p.events.name[begins]
    for expect, t0, t1 in windows:
        inside = (times >= t0) & (times <= t1)
        got = [p.strings[n] for n in names[inside]]
        assert got == ([expect] if expect else []), (expect, got)


def test_python_writer_thread_records_no_waits(waits_intercepted, tmp_path: Path):
    import rlscope

    rlscope.start(tmp_path / "t", recorder="python", flush_interval_s=0.01)
    try:
        time.sleep(0.05)  # the writer waits on its Event several times meanwhile
    finally:
        rlscope.stop()
    (p,) = read_trace(tmp_path / "t").processes
    assert set(p.events.thread.tolist()) == {0}
    assert len(p.threads) == 1


def test_installed_at_import_in_a_fresh_process(tmp_path: Path):
    # multiprocessing.connection binds os.read at its import: patched before it.
    code = textwrap.dedent("""
        import sys
        from rlscope import intercept
        intercept.enable("wait")
        for m in ("multiprocessing", "socket", "queue", "subprocess", "selectors"):
            assert m not in sys.modules, m
        import multiprocessing.connection as c, multiprocessing.synchronize as s
        import queue, selectors
        from rlscope.intercept.patch import is_wrapper
        assert is_wrapper(c.Connection.__dict__["_recv"].__defaults__[0])
        assert is_wrapper(c.wait) and is_wrapper(queue.Queue.__dict__["get"])
        assert is_wrapper(vars(selectors._PollLikeSelector)["select"])
        if hasattr(selectors, "EpollSelector"):  # the default selector: its own select
            assert is_wrapper(vars(selectors.EpollSelector)["select"])
        assert is_wrapper(s.Condition.__dict__["wait"])
        import multiprocessing
        lock = multiprocessing.Lock()
        assert is_wrapper(lock.acquire)
        intercept.disable()
        assert not is_wrapper(queue.Queue.__dict__["get"])
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_plumbing_threads_record_no_waits(recording: Path, recorder: str, waits_intercepted):
    """A pool's handler threads and a queue's feeder thread wait for the pool's and the
    queue's own work (a process pool's worker handler wakes ~20 times per ``map``): none
    of their waits is recorded, from the thread's start, in any later recording too; the
    program's own wait for the results is, on its thread."""
    import multiprocessing as mp
    from multiprocessing.pool import ThreadPool

    import rlscope

    with ThreadPool(2) as pool:
        assert pool.map(abs, range(-8, 0)) == list(range(8, 0, -1))
        handlers = [pool._worker_handler, pool._task_handler,  # type: ignore[attr-defined]
                    pool._result_handler]  # type: ignore[attr-defined]
        q: mp.queues.Queue[int] = mp.Queue()
        q.put(1)
        assert q.get(timeout=60) == 1
        quiet = {t.native_id for t in [*handlers, q._thread]}  # type: ignore[attr-defined]
        rlscope.stop()  # the threads stay quiet in the next recording
        rlscope.start(recording.parent / "second", recorder=recorder)
        q.put(2)
        assert q.get(timeout=60) == 2
        assert pool.map(abs, [-1, -2]) == [1, 2]
        q.close()
        q.join_thread()
    rlscope.stop()
    for directory in (recording, recording.parent / "second"):
        (p,) = read_trace(directory).processes
        waits = p.events.kind == fmt.WAIT_CALL_BEGIN
        by_tid = {p.threads[int(th)].tid for th in p.events.thread[waits]}
        assert not by_tid & quiet, [t.name for t in p.threads.values() if t.tid in by_tid]
        main = [p.strings[n] for n, th in zip(p.events.name[waits], p.events.thread[waits],
                                              strict=True) if th == 0]
        assert "threading.Event.wait" in main, main
