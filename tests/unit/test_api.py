"""The annotation API, run against both recorders, checked by reading the trace back."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

import rlscope
from rlscope import annotate
from rlscope.analysis.engine.scopes import operation_intervals, phase_intervals
from rlscope.trace import format as fmt
from rlscope.trace.reader import read_trace


def _stop_and_read(out: Path):
    rlscope.stop()
    trace = read_trace(out)
    assert len(trace.processes) == 1
    return trace.processes[0]


def _ops(p):
    iv = operation_intervals(p.events)
    return [(p.name_of(int(n)), int(d)) for n, d in zip(iv.name, iv.depth, strict=True)]


def test_inactive_api_is_noop_and_cheap_objects_are_cached():
    assert not rlscope.is_active()
    with rlscope.operation("x") as s:
        assert s is rlscope.operation("x")
    rlscope.push_operation("y")
    rlscope.pop_operation("nothing-open-but-inactive")
    rlscope.report_progress(1, 2)
    rlscope.set_metadata(algo="PPO")
    assert rlscope.current_operations() == []


def test_nesting_and_per_thread_stacks(recording: Path):
    seen: dict[str, list[str]] = {}

    def worker(tag: str) -> None:
        with rlscope.operation(f"outer-{tag}"), rlscope.operation("inner"):
            seen[tag] = rlscope.current_operations()

    threads = [threading.Thread(target=worker, args=(t,)) for t in "ab"]
    with rlscope.operation("main"):
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert rlscope.current_operations() == ["main"]
    assert seen == {"a": ["outer-a", "inner"], "b": ["outer-b", "inner"]}
    p = _stop_and_read(recording)
    iv = operation_intervals(p.events)
    assert len(iv) == 5 and iv.closed.all()
    by_thread: dict[str, list[tuple[str, int]]] = {}
    for th, n, d in zip(iv.thread, iv.name, iv.depth, strict=True):
        by_thread.setdefault(p.threads[int(th)].name, []).append((p.name_of(int(n)), int(d)))
    assert by_thread["MainThread"] == [("main", 0)]
    assert sorted(v for k, v in by_thread.items() if k != "MainThread") == [
        [("outer-a", 0), ("inner", 1)], [("outer-b", 0), ("inner", 1)]]
    # Parents point at the enclosing interval on the same thread.
    for i in np.flatnonzero(iv.depth == 1):
        par = iv.parent[i]
        assert iv.thread[par] == iv.thread[i]
        assert iv.start_ns[par] <= iv.start_ns[i] <= iv.end_ns[i] <= iv.end_ns[par]


def test_exception_inside_unwinds(recording: Path):
    with pytest.raises(ZeroDivisionError), rlscope.operation("a"), rlscope.operation("b"):
        1 / 0  # noqa: B018
    assert rlscope.current_operations() == []
    with rlscope.operation("after"):
        pass
    p = _stop_and_read(recording)
    assert _ops(p) == [("a", 0), ("b", 1), ("after", 0)]


def test_decorator_applied_before_recording_starts(tmp_path: Path, recorder: str):
    @rlscope.operation("step")
    def step(x: int) -> int:
        """doc"""
        return x + 1

    assert step.__name__ == "step" and step.__doc__ == "doc"
    assert step(1) == 2  # not recording: plain call
    rlscope.start(tmp_path, recorder=recorder)
    try:
        assert [step(i) for i in range(3)] == [1, 2, 3]

        @rlscope.phase("training")
        def train() -> str:
            return "ok"

        assert train() == "ok"
    finally:
        p = _stop_and_read(tmp_path)
    assert _ops(p) == [("step", 0)] * 3
    ph = phase_intervals(p.events)
    assert [p.name_of(int(n)) for n in ph.name] == ["training"]


def test_push_pop_and_misuse(recording: Path, monkeypatch: pytest.MonkeyPatch):
    # A misplaced pop does nothing, as without a recording; the first one warns.
    monkeypatch.setattr(annotate, "_pop_warned", False)
    with pytest.warns(rlscope.RLScopeWarning, match="without a matching push_operation"):
        rlscope.pop_operation()
    rlscope.push_operation("a")
    rlscope.push_operation("b")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rlscope.pop_operation("a")  # warned once already: silent
    monkeypatch.setattr(annotate, "_pop_warned", False)
    with pytest.warns(rlscope.RLScopeWarning, match=r"does not match.*'a'.*'b'") as w:
        rlscope.pop_operation("a")
    assert w[0].filename == __file__  # points at the caller
    assert rlscope.current_operations() == ["a", "b"]  # unchanged by the failed pop
    rlscope.pop_operation("b")
    rlscope.pop_operation()
    assert rlscope.current_operations() == []
    # A with-block left while an inner push is still open closes both and says so.
    with pytest.raises(rlscope.RLScopeError, match="still open"), rlscope.operation("outer"):
        rlscope.push_operation("leaked")
    assert rlscope.current_operations() == []
    p = _stop_and_read(recording)
    iv = operation_intervals(p.events)
    assert iv.closed.all() and iv.unmatched_ends == 0 and iv.name_mismatches == 0
    assert _ops(p) == [("a", 0), ("b", 1), ("outer", 0), ("leaked", 1)]


def test_exit_without_enter_raises(recording: Path):
    op = rlscope.operation("never-entered")
    with pytest.raises(rlscope.RLScopeError, match="without a matching enter"):
        op.__exit__(None, None, None)


def test_progress_an_integration_reports_says_so(recording: Path):
    """Progress reported by an integration (sb3's, rllib's: made only while recording)
    is marked in the trace, once, so a calibration does not try to end runs without
    rlscope at such a report; the script's own reports are not marked."""
    rlscope.report_progress(1)
    annotate.integration_progress("sb3", 10, 100)
    annotate.integration_progress("sb3", 20, 100, metrics={"reward": 1.0})
    p = _stop_and_read(recording)
    assert p.metadata.get(fmt.META_PROGRESS_BY) == "sb3"
    assert p.progress.timesteps.tolist() == [1, 10, 20]
    rlscope.start(recording / "again")
    rlscope.report_progress(1)
    assert fmt.META_PROGRESS_BY not in _stop_and_read(recording / "again").metadata


def test_progress_metadata_and_phase(recording: Path):
    rlscope.set_metadata(algo="PPO", env="CartPole-v1", sizes=[64, 64])
    with pytest.raises(rlscope.RLScopeError, match="not JSON-serialisable"):
        rlscope.set_metadata(bad=object())
    with rlscope.phase("training"):
        for t in range(3):
            with rlscope.operation("inference"):
                pass
            rlscope.report_progress((t + 1) * 100, 300)
    rlscope.report_progress(5)
    p = _stop_and_read(recording)
    # (this test process records many sessions: later ones say which they are)
    # (and rlscope's own records, e.g. its threads' CPU time when recording stops)
    own = {k: v for k, v in p.metadata.items()
           if k != fmt.META_SESSION and not k.startswith("rlscope.")}
    assert own == {"algo": "PPO", "env": "CartPole-v1", "sizes": [64, 64]}
    assert p.progress.timesteps.tolist() == [100, 200, 300, 5]
    assert p.progress.total_timesteps.tolist() == [300, 300, 300, -1]
    assert np.all(np.diff(p.progress.time_ns) >= 0)
    assert p.complete
    kinds = p.events.kind.tolist()
    assert kinds[0] == fmt.PROCESS_START and kinds[-1] == fmt.PROCESS_END


def test_stop_closes_open_scopes_and_start_twice_fails(tmp_path: Path, recorder: str):
    rlscope.start(tmp_path, recorder=recorder)
    with pytest.raises(rlscope.RLScopeError, match="already recording"):
        rlscope.start(tmp_path / "other", recorder=recorder)
    rlscope.push_operation("left-open")
    p = _stop_and_read(tmp_path)
    iv = operation_intervals(p.events)
    assert len(iv) == 1 and iv.closed.all()


def test_unknown_recorder_and_bad_names(tmp_path: Path):
    with pytest.raises(rlscope.RLScopeError, match="unknown recorder"):
        rlscope.start(tmp_path, recorder="bogus")
    with pytest.raises(TypeError):
        rlscope.operation(3)  # type: ignore[arg-type]


def test_many_events_across_chunks(recording: Path):
    n = 50_000
    for _ in range(n):
        with rlscope.operation("tiny"):
            pass
    rlscope.flush()
    p = _stop_and_read(recording)
    iv = operation_intervals(p.events)
    assert len(iv) == n and iv.closed.all()
    assert np.all(iv.duration_ns >= 0)
    assert np.all(np.diff(p.events.time_ns[p.events.thread == 0]) >= 0)


def test_env_events_carry_their_env_index_and_wait_calls_their_category(recording: Path,
                                                                        recorder: str):
    import time

    from rlscope import annotate

    rec = annotate.active_recorder()
    assert rec is not None
    sleep = rec.wrap(time.sleep, 2, "time.sleep")  # category 2: a blocking call
    rlscope.report_progress(5, 10)
    for i in (0, 1, 2):
        rec.env_begin(False, i, "CartPole-v1")
        rec.env_end(False, "CartPole-v1")
    rec.env_begin(True, 7, "Pendulum-v1")
    sleep(0.001)
    rec.env_end(True, "Pendulum-v1")
    rlscope.report_progress(10, 10)
    p = _stop_and_read(recording)
    e = p.env
    assert [fmt.KIND_NAMES[int(k)] for k in e.kind] == ["ENV_STEP_BEGIN", "ENV_STEP_END"] * 3 \
        + ["ENV_RESET_BEGIN", "ENV_RESET_END"]
    assert e.index.tolist() == [0, -1, 1, -1, 2, -1, 7, -1]
    assert [p.name_of(int(n)) for n in e.name[::2]] == ["CartPole-v1"] * 3 + ["Pendulum-v1"]
    assert np.all(np.diff(e.time_ns) >= 0)
    # Arguments of progress and env events do not mix.
    assert p.progress.timesteps.tolist() == [5, 10]
    assert p.progress.total_timesteps.tolist() == [10, 10]
    kinds = p.events.kind.tolist()
    b, end = kinds.index(fmt.WAIT_CALL_BEGIN), kinds.index(fmt.WAIT_CALL_END)
    assert p.name_of(int(p.events.name[b])) == "time.sleep"
    assert p.events.time_ns[end] - p.events.time_ns[b] >= 1_000_000
    assert kinds.index(fmt.ENV_RESET_BEGIN) < b < end < kinds.index(fmt.ENV_RESET_END)


def test_event_arguments_stay_with_their_events_across_chunks(recording: Path,
                                                              recorder: str):
    """More events than one chunk holds, flushed at once, with an argument row falling
    on every possible chunk boundary (the Python twin once cut an env step from its index
    there: "chunk 6 has 21845 event arguments for events that carry 21846")."""
    from rlscope import annotate

    rec = annotate.active_recorder()
    assert rec is not None
    n = 70_000  # over 65,536 rows per chunk, in a pattern with 1 and 2 argument rows
    for i in range(n):
        if i % 3:
            rec.env_begin(False, i, "CartPole-v1")
            rec.env_end(False, "CartPole-v1")
        else:
            rlscope.report_progress(i, n)
    p = _stop_and_read(recording)
    steps = [i for i in range(n) if i % 3]
    assert p.env.index[::2].tolist() == steps
    assert p.progress.timesteps.tolist() == list(range(0, n, 3))
    assert set(p.progress.total_timesteps.tolist()) == {n}


def test_scope_entered_before_the_recording_exits_silently(tmp_path: Path, recorder: str):
    """A with-block open when the recording starts (rlscope.start() inside it; a chunk
    calibration copy, forked mid-phase, that runs on to the program's end) was never
    recorded: leaving it is not a mistake and must not raise."""
    out = tmp_path / "t"
    with rlscope.phase("training"):
        with rlscope.operation("warm-up"):
            pass
        rlscope.start(out, recorder=recorder)
        with rlscope.operation("step"):
            pass
    with rlscope.operation("after"):
        pass
    p = _stop_and_read(out)
    assert _ops(p) == [("step", 0), ("after", 0)]
    # Still an error for a scope this recording never saw entered, once none is pending.
    rlscope.start(tmp_path / "u", recorder=recorder)
    try:
        with pytest.raises(rlscope.RLScopeError, match="without a matching enter"):
            rlscope.operation("never-entered").__exit__(None, None, None)
    finally:
        rlscope.stop()


def test_forked_child_leaving_a_phase_entered_before_recording(tmp_path: Path):
    """The chunk calibration's case: a phase entered while nothing recorded, a fork, the
    child starts recording and leaves the phase at the program's end."""
    code = textwrap.dedent(f"""
        import os, sys, rlscope
        with rlscope.phase("training"):
            pid = os.fork()
            if pid == 0:
                rlscope.start({str(tmp_path / "child")!r})
                with rlscope.operation("step"):
                    pass
        if pid == 0:
            rlscope.stop()
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "0", r.stderr[-2000:]
    assert "Traceback" not in r.stderr


def test_a_later_session_says_again_what_the_process_is(tmp_path: Path, recorder: str):
    """Role and vector-env metadata are written again in each later session (analysis
    reads sessions apart); other metadata is not, and a forked child keeps none of its
    parent's."""
    role = {fmt.META_ROLE: fmt.ROLE_VECENV_WORKER, fmt.META_VECENV: {"pid": 1, "name": "V#1"}}
    rlscope.start(tmp_path, recorder=recorder)
    rlscope.set_metadata(algo="PPO", **role)
    rlscope.stop()
    rlscope.start(tmp_path, recorder=recorder)
    rlscope.stop()
    # (this test process has recorded sessions before: both say which they are)
    first, later = sorted(read_trace(tmp_path).processes,
                          key=lambda p: int(p.metadata.get(fmt.META_SESSION, 0)))
    assert first.metadata["algo"] == "PPO" and "algo" not in later.metadata
    assert {k: later.metadata.get(k) for k in role} == role
    code = textwrap.dedent(f"""
        import os, sys, rlscope
        from rlscope.trace import format as fmt
        rlscope.start(sys.argv[1], recorder={recorder!r})
        rlscope.set_metadata(**{{fmt.META_ROLE: "pool-worker"}})
        pid = os.fork()
        if pid == 0:
            rlscope.stop()
            rlscope.start(sys.argv[1] + "/child", recorder={recorder!r})
            rlscope.stop()
            os._exit(0)
        os.waitpid(pid, 0)
        rlscope.stop()
    """)
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "f")], check=True, timeout=120)
    (child,) = read_trace(tmp_path / "f" / "child").processes
    assert fmt.META_ROLE not in child.metadata


def test_the_recording_key_changes_with_each_session_and_in_a_forked_child(tmp_path: Path,
                                                                          recorder: str):
    """annotate.recording_key: what is said once per trace file is said again when it
    changes: a new session, and a forked child (its own file), whose pid it carries."""
    import os

    from rlscope import annotate

    rlscope.start(tmp_path / "a", recorder=recorder)
    first = annotate.recording_key()
    assert first[0] == os.getpid()
    rlscope.stop()
    rlscope.start(tmp_path / "a", recorder=recorder)
    try:
        second = annotate.recording_key()
        assert second != first
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            ok = annotate.recording_key()[0] == os.getpid() != second[0]
            os.write(w, b"1" if ok else b"0")
            os._exit(0)
        os.waitpid(pid, 0)
        assert os.read(r, 1) == b"1"
        os.close(r)
        os.close(w)
    finally:
        rlscope.stop()


def test_own_threads_cpu_is_kept_in_ns(tmp_path: Path):
    """The CPU of rlscope's writer thread, noted at stop, in ns (its schedstat): /proc's
    stat counts in 10 ms clock ticks, and a short recording's writer read 0 there."""
    from tests.conftest import wait_until

    if not Path(f"/proc/self/task/{threading.get_native_id()}/schedstat").exists():
        pytest.skip("no per-thread schedstat in /proc here")
    out = tmp_path / "run"
    rlscope.start(out)

    def writer_ns() -> int | None:  # once the writer thread has run at all
        for task in Path("/proc/self/task").iterdir():
            try:
                if (task / "comm").read_text().strip() == "rlscope-writer":
                    ns = int((task / "schedstat").read_text().split()[0])
                    return ns if ns > 0 else None
            except OSError:
                continue
        return None

    for _ in range(2000):
        with rlscope.operation("tiny"):
            pass
    before = wait_until(writer_ns, "the writer thread to have run")
    p = _stop_and_read(out)
    writer = int(p.metadata.get(fmt.META_THREAD_CPU_PREFIX + "rlscope-writer", 0))
    assert writer >= before and writer % 10_000_000 != 0, (writer, before)
