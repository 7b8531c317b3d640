"""Python stack sampling in a profiled process: a daemon thread that, up to ``hz`` times a
second (paced by the process's CPU: see ``_run``), takes every other thread's Python
stack (``sys._current_frames``) with the recorder's
clock (CLOCK_MONOTONIC, ``time.monotonic_ns``) and the thread's OS id (gettid, as the
recorders record it), and appends them to ``pystacks.<pid>.rlstacks`` beside the trace.
The analysis joins each sample to the operation, phase and category open on that thread
at that time (rlscope.analysis.hotspots). Why a thread, not a signal or another process:
docs/attribution.md#python-hotspots.

The file is text, one record a line, tab-separated, written by appends of whole lines
(a kill leaves at most one torn line, which the reader drops):

    rlstacks<TAB>1<TAB><pid><TAB><hz>        first line
    f<TAB><id><TAB><file><TAB><first line><TAB><qualified name>   a function (code object)
    k<TAB><id><TAB><function ids, innermost first, space-separated>  a stack
    s<TAB><time ns><TAB><tid><TAB><stack id>  a sample

Every id is defined before the first line that uses it. Imports only the standard
library's light modules: it runs in every profiled process (docs/architecture.md).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from types import FrameType

from rlscope.trace import format as fmt

FLUSH_S = 0.5  # samples reach the file at least this often (and at stop)
# A sample is taken once the process's other threads used a period of CPU since the last
# (at most hz a second of wall time); between samples the thread sleeps until that much
# CPU can have been used at the rate last seen (IDLE_CPU of a core at least), at most
# IDLE_BACKOFF periods: idle processes (workers blocked on a queue) cost a few wake-ups
# a second.
IDLE_CPU = 0.02
IDLE_BACKOFF = 8
# rlscope's own threads' CPU (this one's and the native writer's) is noted in the trace
# this often, not only at stop: a process killed without stopping (Ray ends most of its
# processes so) keeps all but the last few seconds of it.
NOTE_S = 2.0
WRITER = "rlscope-writer"  # the native writer thread's OS name (native/common/recorder.cpp)
VERSION = 1

_active: PySampler | None = None
_fork_hook = False


class PySampler:
    """The sampling thread of one process (a new one after fork)."""

    def __init__(self, path: str, hz: float) -> None:
        self.path, self.hz = path, float(hz)
        self._stopping = False  # read by the thread between sleeps
        self._lock = threading.Lock()  # the pending lines and the file
        self._lines: list[str] = [f"rlstacks\t{VERSION}\t{os.getpid()}\t{self.hz:g}\n"]
        self._codes: dict[int, int] = {}  # id(code) -> function id
        self._keep: list[object] = []  # the code objects, so their ids stay theirs
        self._stacks: dict[tuple[int, ...], int] = {}
        # threading ident -> OS thread id. The thread starting the sampler knows its own
        # for sure: in a forked child it is the only thread, and Python 3.11's threading
        # keeps the parent's native_id for it until multiprocessing's bootstrap resets it
        # (a sample taken before that, and cached, was tagged with the parent's thread).
        self._known = {threading.get_ident(): threading.get_native_id()}
        self._tids: dict[int, int] = dict(self._known)
        self._missing: dict[int, float] = {}  # ident -> last lookup that failed
        self.samples = 0
        self.cost_ns = 0  # CPU time spent taking samples (not writing them)
        self.skips = 0  # wake-ups without a sample (the process used too little CPU)
        self.thread_cpu_ns = 0  # the thread's CPU time, once it has ended
        self._writer_stat: str | None = None  # the writer thread's schedstat file
        self.notes = 0  # times rlscope's threads' CPU was noted in the trace
        self._thread = threading.Thread(target=self._run, name="rlscope-pysampler",
                                         daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True  # the thread ends at its next wake-up (one period at most)
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        self.flush()

    def _run(self) -> None:
        period = 1.0 / self.hz
        period_ns = int(period * 1e9)
        me = threading.get_ident()
        last_flush = last_note = time.monotonic()
        next_t = last_flush + period
        seen = sampled_at = time.process_time_ns() - time.thread_time_ns()
        seen_t = last_flush
        # time.sleep, not Event.wait: a wake-up costs half the CPU (39 vs 77 us measured
        # here), and the thread wakes up to hz times a second in every process. The
        # original, not the wait wrapper: rlscope's own thread records nothing (its sleeps
        # were waits in the trace and the process counted a thread more).
        sleep = getattr(time.sleep, "__wrapped__", time.sleep)
        while True:
            sleep(max(0.0, next_t - time.monotonic()))
            if self._stopping:
                break
            now = time.monotonic()
            cpu = time.process_time_ns() - time.thread_time_ns()  # the other threads'
            if cpu - sampled_at >= period_ns or not self.samples:
                self.sample(me)
                sampled_at = cpu
                next_t = max(next_t + period, now)  # late: skip missed ticks, no burst
            else:
                self.skips += 1
                # Paced by the process's CPU: no sample before its other threads used a
                # period of CPU since the last one, so a starved or mostly blocked
                # process is sampled less and its sampler costs less. Every wake-up costs
                # (it takes the GIL), so the next one is when, at the CPU rate just seen,
                # a period will have been used: between 1 and IDLE_BACKOFF periods away.
                rate = (cpu - seen) / max(1.0, (now - seen_t) * 1e9)  # cores in use
                wait = (period_ns - (cpu - sampled_at)) / max(rate, IDLE_CPU) / 1e9
                next_t = now + min(max(wait, period), IDLE_BACKOFF * period)
            seen, seen_t = cpu, now
            if now - last_flush >= FLUSH_S:
                self.flush()
                last_flush = now
            if now - last_note >= NOTE_S:
                self._note_cpu()
                last_note = now
        self.thread_cpu_ns = time.thread_time_ns()
        self._note_cpu()

    def _note_cpu(self) -> None:
        """This thread's CPU time and the native writer thread's, as the trace's
        metadata while it still records (every NOTE_S and at the end; the process tree's
        CPU holds them: overhead correction removes them there). Keyed as
        rlscope.annotate keys a live rlscope thread at stop (its 15-character OS name):
        the later record wins, nothing is counted twice."""
        from rlscope import annotate

        rec = annotate.active_recorder()
        if rec is None:
            return
        self.notes += 1
        rec.metadata(fmt.META_THREAD_CPU_PREFIX + self._thread.name[:15],
                     str(time.thread_time_ns()))
        writer = self._writer_cpu_ns()
        if writer is not None:
            rec.metadata(fmt.META_THREAD_CPU_PREFIX + WRITER, str(writer))

    def _writer_cpu_ns(self) -> int | None:
        """The native writer thread's CPU time (ns, its ``schedstat``), found by its name
        once (again after a new recording's writer replaced it); None where /proc has no
        such thread or no schedstat."""
        for _ in range(2):
            if self._writer_stat is None:
                self._writer_stat = _find_thread(WRITER)
                if self._writer_stat is None:
                    return None
            try:
                with open(self._writer_stat, "rb") as f:
                    return int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                self._writer_stat = None  # that thread is gone: look again
        return None

    def sample(self, skip: int) -> None:
        """One sample of every thread but ``skip``'s."""
        t0 = time.thread_time_ns()
        frames = sys._current_frames()
        t = time.monotonic_ns()
        out: list[str] = []
        codes, stacks = self._codes, self._stacks
        f: FrameType | None = None
        for ident, f in frames.items():
            if ident == skip:
                continue
            ids = []
            while f is not None:
                c = f.f_code
                i = codes.get(id(c))
                if i is None:
                    i = self._define_code(c, out)
                ids.append(i)
                f = f.f_back
            key = tuple(ids)
            sid = stacks.get(key)
            if sid is None:
                sid = stacks[key] = len(stacks)
                out.append(f"k\t{sid}\t{' '.join(map(str, key))}\n")
            tid = self._tids.get(ident)
            if tid is None:
                tid = self._thread_id(ident)
            out.append(f"s\t{t}\t{tid}\t{sid}\n")
        f = None  # no frame kept alive until the next sample
        del frames
        with self._lock:
            self._lines.extend(out)
        self.samples += 1
        self.cost_ns += time.thread_time_ns() - t0

    def _define_code(self, c: object, out: list[str]) -> int:
        i = self._codes[id(c)] = len(self._codes)
        self._keep.append(c)
        name = str(getattr(c, "co_qualname", None) or getattr(c, "co_name", "?"))
        file = str(getattr(c, "co_filename", "?"))
        line = int(getattr(c, "co_firstlineno", 0))
        out.append(f"f\t{i}\t{_clean(file)}\t{line}\t{_clean(name)}\n")
        return i

    def _thread_id(self, ident: int) -> int:
        """The OS id of a thread (threading knows it for threads it started or adopted):
        looked up at the first sample of a new thread, then again at most once a second
        while threading does not know it."""
        now = time.monotonic()
        if now - self._missing.get(ident, -1e9) >= 1.0:
            self._tids = {th.ident: th.native_id for th in threading.enumerate()
                          if th.ident is not None and th.native_id is not None}
            self._tids.update(self._known)
            if len(self._missing) > 10_000:  # threads come and go: forget old ones
                self._missing.clear()
        tid = self._tids.get(ident)
        if tid is None:
            self._missing[ident] = now
            return -ident  # not a thread threading knows: kept apart, joined to none
        return tid

    def flush(self, timeout: float = -1) -> None:
        if not self._lock.acquire(timeout=timeout):
            return  # leaving from a signal handler while the lock is held: no hang
        try:
            if not self._lines:
                return
            data = "".join(self._lines).encode("utf-8", "backslashreplace")
            self._lines = []
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
            except OSError:
                pass  # the trace goes on without samples rather than failing the program
        finally:
            self._lock.release()


def _find_thread(name: str) -> str | None:
    """The ``schedstat`` path of this process's thread called ``name``, or None."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm", "rb") as f:
                if f.read().strip().decode(errors="replace") == name:
                    return f"/proc/self/task/{tid}/schedstat"
        except OSError:
            continue
    return None


def _clean(s: str) -> str:
    return s.replace("\t", " ").replace("\n", " ")


def parse_rate(value: str | None, default: float) -> float:
    """Samples a second from ``--sample-python`` / $RLSCOPE_SAMPLE_PYTHON: "off" or "0"
    is 0 (no sampling), a positive number is the rate; ValueError otherwise."""
    if value is None or not value.strip():
        return default
    v = value.strip().lower()
    if v in ("off", "0", "none", "no"):
        return 0.0
    hz = float(v)
    if not 0 < hz <= 10_000:
        raise ValueError(f"{value!r}: a rate in Hz (1 to 10000) or off")
    return hz


def start(out_dir: str, hz: float) -> PySampler | None:
    """Start sampling this process into ``out_dir`` (and each forked child that records)."""
    global _active, _fork_hook
    if hz <= 0 or _active is not None:
        return _active
    s = PySampler(_fresh_path(out_dir), hz)
    s.start()
    _active = s
    if not _fork_hook:
        _fork_hook = True
        os.register_at_fork(after_in_child=_after_fork_child)
        import atexit

        atexit.register(stop)
        _wrap_os_exit()
    return s


def _fresh_path(out_dir: str) -> str:
    """``pystacks.<pid>.rlstacks``, or ``pystacks.<pid>.<n>.rlstacks`` for a later start in
    the same process (each file's ids are its own)."""
    base = os.path.join(out_dir, f"{fmt.SOURCE_STACKS}.{os.getpid()}")
    path, n = base + fmt.STACKS_SUFFIX, 1
    while os.path.exists(path):
        path, n = f"{base}.{n}{fmt.STACKS_SUFFIX}", n + 1
    return path


def stop() -> None:
    global _active
    s, _active = _active, None
    if s is not None:
        s.stop()


def _wrap_os_exit() -> None:
    """multiprocessing's forked children leave through ``os._exit``, skipping atexit:
    write what is pending first (without waiting for the thread: this may be a signal
    handler's exit)."""
    prev = os._exit

    def _exit(code: int) -> None:
        s = _active
        if s is not None:
            s._stopping = True
            s.flush(timeout=1.0)
        prev(code)

    setattr(os, "_exit", _exit)  # noqa: B010 (mypy refuses to assign a function)


def active() -> PySampler | None:
    return _active


def _after_fork_child() -> None:
    """The parent's thread is gone in the child; its pending lines are the parent's. A
    child that records (rlscope's own at-fork hook ran first) samples into its own file."""
    global _active
    s, _active = _active, None
    if s is None:
        return
    from rlscope import annotate

    out = annotate.output_dir()
    if annotate.is_active() and out:
        start(out, s.hz)
