"""Paired-chunk calibration, inside the workload's own process (``rls-prof --calibrate``).

Whole runs of a workload differ by far more than rlscope's overhead on a shared machine
(identical runs here took 4.1–7.3 s of CPU time; the machine's speed changes by up to
2x within a minute), so calibration compares the *same work* measured moments apart:

- The calibration process runs the command with every interception installed but
  nothing recording (wrappers then cost a flag test per call).
- At a chunk boundary (a progress report: the script's ``rlscope.report_progress`` or
  stable-baselines3's progress updates) it forks one child per configuration. A forked
  child starts from exactly the parent's state, so every child does exactly the same
  work. Each switches its configuration on (recording into its own directory, a set of
  call categories) and stops itself.
- The parent then runs the children in turn, ``RLSCOPE_CHUNK_SLICE_S`` (2 ms) each
  (one at a time, never in parallel), until each has passed the chunk's progress
  reports, read its clocks, written them to a result file beside its trace and left
  with ``os._exit``. Taking
  turns this often, all see the same changes in the machine's speed; each child's
  main-thread CPU time is what is compared.
- The parent then runs the chunk itself, not recording, and adapts the number of
  progress reports per chunk so that a chunk lasts about ``RLSCOPE_CHUNK_S``. After
  ``RLSCOPE_MAX_CHUNKS`` chunks, or once the next two chunks would end past
  ``RLSCOPE_CHUNK_BUDGET_S`` seconds since the process started (with at least
  ``MIN_CHUNKS`` measured), it ends the process (exit status 0).

The parent appends one JSON line per child to ``DIR/chunks.jsonl``; rls-prof reads them
and counts each child's events from its trace (:mod:`rlscope.calibration.chunked`).
A child that fails (dies in its set-up, exits with an error, hangs) stops the
measurement, with one line in ``DIR/stopped.txt`` saying which and how; the process
goes on with the workload, uninstrumented.
The environment it runs under is built by :func:`rlscope.launch.child_env.chunk_calibration`.
Requirements: the native recorder, environments in the process (a forked child must not
share a simulator process with its parent), and single-threaded math (OpenMP thread
pools do not survive ``fork``).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rlscope import envvars

RESULTS = "chunks.jsonl"
RESULT_SUFFIX = ".result.json"  # a child's own result, beside its trace directory
DEFAULT_CHUNK_S = 0.25
DEFAULT_MAX_CHUNKS = 40
MIN_CHUNKS = 4  # fewer: too few paired measurements (half of them calibrate, half check)
DEFAULT_SLICE_S = 0.002  # children take turns about this long (see _interleave)
CHILD_TIMEOUT_S = 120.0  # a child that long past its chunk is hung (e.g. a fork-unsafe pool)

# CALL_BACKEND | CALL_SIMULATOR | CALL_WAIT | CALL_MARK (native/common/calls.h)
ALL_CALLS = 0b1111


@dataclass(frozen=True)
class ChunkConfig:
    name: str
    record: bool
    mask: int  # call categories recorded (bits: 0 backend, 1 simulator, 2 wait, 3 marker)


def encode_configs(configs: list[ChunkConfig]) -> str:
    return json.dumps([[c.name, c.record, c.mask] for c in configs])


def decode_configs(text: str) -> list[ChunkConfig]:
    return [ChunkConfig(str(n), bool(r), int(m)) for n, r, m in json.loads(text)]


def installed_mask() -> int:
    """Call categories for which some library is wrapped in this process now."""
    from rlscope import libraries

    mask = 0
    for lib, n in libraries.counts.items():
        if n and lib in libraries.BACKENDS:
            mask |= 1 | 8  # its phase markers too
        if n and lib in libraries.SIMULATORS:
            mask |= 2
        if n and lib in libraries.WAITS:
            mask |= 4
    return mask


def distinct(configs: list[ChunkConfig], active: int) -> list[ChunkConfig]:
    """Configurations that differ in what they record, given the categories with wrapped
    libraries (``active``); of equal ones the first is kept, or ``full``."""
    out: list[ChunkConfig] = []
    keys: list[tuple[bool, int]] = []
    for c in configs:
        key = (c.record, c.mask & active if c.record else 0)
        if key not in keys:
            out.append(c)
            keys.append(key)
        elif c.name == "full":
            out[keys.index(key)] = c
    return out


class _Child:
    """A forked child timing one configuration over one chunk of ``boundaries``
    progress reports. It stops itself once set up; the parent then runs it in slices."""

    def __init__(self, driver: Driver, cfg: ChunkConfig) -> None:
        self.driver, self.cfg = driver, cfg
        self.seen = 0
        self.dir = driver.out / copy_name(driver.chunk, cfg)
        _die_with_parent()
        from rlscope import _native

        if cfg.record:
            import rlscope

            _native.set_call_mask(cfg.mask)
            rlscope.start(self.dir, recorder=driver.recorder)
        _pin_main_thread(driver.cpu)  # after start(), which started the writer thread...
        _pin_writer_away(driver.cpu)  # ...kept off that CPU, as on an idle core in a run
        _native.install_pause_handler()  # the parent pauses it with SIGTSTP
        os.kill(os.getpid(), signal.SIGSTOP)  # set up; the parent starts the clocks
        # Measured from here: what a chunk of a profiled run costs, not recording's
        # fixed per-process cost.
        self.t0 = (time.perf_counter_ns(), time.thread_time_ns(), time.process_time_ns())

    def boundary(self) -> None:
        self.seen += 1
        if self.seen < self.driver.boundaries:
            return
        wall, thread, proc = time.perf_counter_ns(), time.thread_time_ns(), time.process_time_ns()
        if self.cfg.record:
            import rlscope

            rlscope.stop()  # flush this chunk's trace (after the clocks were read)
        from rlscope import _native

        msg = {"chunk": self.driver.chunk, "config": self.cfg.name, "boundaries": self.seen,
               "wall_ns": wall - self.t0[0], "thread_cpu_ns": thread - self.t0[1],
               "cpu_ns": proc - self.t0[2], "directory": self.dir.name, "pid": os.getpid(),
               "gaps_ns": _native.pause_gaps()}
        write_result(self.driver.out / (self.dir.name + RESULT_SUFFIX), msg)
        os._exit(0)


class Driver:
    def __init__(self, out: Path, configs: list[ChunkConfig], chunk_s: float,
                 max_chunks: int, recorder: str, slice_s: float = DEFAULT_SLICE_S,
                 budget_s: float | None = None) -> None:
        self.out, self.configs, self.recorder = out, configs, recorder
        self.chunk_ns = int(chunk_s * 1e9)
        self.slice_s = slice_s
        self.max_chunks = max_chunks
        self.budget_s = budget_s
        self.t_start = time.monotonic()  # the process's start, near enough
        self.t_first: float | None = None  # when the first chunk's copies were forked
        self.chunk = 0
        self.boundaries = 1  # progress reports per chunk, adapted to last ~chunk_s
        self.left = 0  # parent: boundaries until the next chunk starts
        self.t_chunk = 0  # parent: CPU clock when it started running the chunk itself
        self.child: _Child | None = None
        self.copies: set[int] = set()  # parent: forked copies not yet reaped
        self.stopped = False
        self.active: list[ChunkConfig] | None = None
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self.cpu: int | None = cpus[-1] if cpus else None

    def boundary(self) -> None:
        if self.child is not None:
            self.child.boundary()
            return
        if self.stopped:
            return
        if self.left > 1:
            self.left -= 1
            return
        if self.left == 1:  # the parent's own run of the chunk just ended: adapt its length
            took = max(time.thread_time_ns() - self.t_chunk, 1)
            # (at most x8: work per report can jump, e.g. when learning starts)
            self.boundaries = max(1, min(8 * self.boundaries,
                                         round(self.boundaries * self.chunk_ns / took)))
        if self.chunk >= self.max_chunks:
            self._finish(f"{self.chunk} chunks measured")
        if self.budget_spent():
            self._finish(f"{self.chunk} chunks measured in the time budget "
                         f"({self.budget_s:.0f} s)")
        if self.active is None:
            why = unforkable()
            if why:  # a copy would share them with this process: end, rls-prof says why
                self._finish(CANNOT_FORK + why)
            self.active = distinct(self.configs, installed_mask())
        self._run_chunk(self.active)

    def budget_spent(self) -> bool:
        """Whether the next pair of chunks (one calibrates, one checks) would end past the
        budget, at the pace of the chunks so far; never before ``MIN_CHUNKS``."""
        if self.budget_s is None or self.chunk < MIN_CHUNKS or self.chunk % 2 \
                or self.t_first is None:
            return False
        now = time.monotonic()
        per_chunk = (now - self.t_first) / self.chunk
        return now + 2 * per_chunk - self.t_start > self.budget_s

    def _run_chunk(self, active: list[ChunkConfig]) -> None:
        k = self.chunk % len(active)
        if self.t_first is None:
            self.t_first = time.monotonic()
        kids: list[tuple[ChunkConfig, int]] = []  # (config, pid), each stopped, set up
        parent = os.getpid()
        try:
            for cfg in active[k:] + active[:k]:
                sys.stdout.flush()
                sys.stderr.flush()
                pid, interrupted = _fork()
                if pid == 0:
                    if interrupted:
                        raise KeyboardInterrupt
                    self.child = _Child(self, cfg)
                    return  # in the child: back to the workload
                self.copies.add(pid)
                if interrupted:
                    raise KeyboardInterrupt
                _, status = os.waitpid(pid, os.WUNTRACED)  # stopped, set up
                if not os.WIFSTOPPED(status):
                    self.copies.discard(pid)
                    _raise_if_interrupted(status)
                    # Died before it could be timed: no chunk without every configuration.
                    self._kill_copies()
                    self._stop(f"a calibration copy ({cfg.name}) {_ended(status)} while "
                               f"it was set up, in chunk {self.chunk}")
                    return
                kids.append((cfg, pid))
            results = self._interleave_elsewhere(kids)
        except BaseException:
            # Ctrl-C (or an error) in the parent: no copy may outlive it, and none may
            # still be dying when the process has ended (rls-prof waits for that).
            if os.getpid() == parent:
                self._kill_copies()
            raise
        if results is None:
            return
        with open(self.out / RESULTS, "a") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
        self.left = self.boundaries
        self.chunk += 1
        self.t_chunk = time.thread_time_ns()

    def _interleave_elsewhere(self, kids: list[tuple[ChunkConfig, int]]) -> list[dict] | None:
        """:meth:`_interleave` with the parent off the children's CPU, where it can."""
        mine = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
        others = mine - {self.cpu}
        if others:
            os.sched_setaffinity(0, others)
        try:
            return self._interleave(kids)
        finally:
            if others:
                os.sched_setaffinity(0, mine)

    def _interleave(self, kids: list[tuple[ChunkConfig, int]]) -> list[dict] | None:
        """Run the stopped children in turn, a slice each, until all have exited: they
        see the same changes in the machine's speed. None (and stop) if one failed.

        Measured here (two virtual CPUs, shared host; scripts/bench/calibration_noise.py):
        identical children of a chunk differ by 0.5% (median) in 2 ms turns, 0.8% in
        10 ms turns, and differed by up to 25% run on any CPU one after the other."""
        alive = list(kids)
        results: list[dict] = []
        deadline = time.monotonic() + CHILD_TIMEOUT_S + len(kids) * 20 * self.chunk_ns / 1e9
        failed = ""
        rng = random.Random(self.chunk)
        while alive:
            # A shuffled order and jittered slices: no child may stay in step with a
            # periodic disturbance of the machine.
            for item in rng.sample(alive, len(alive)):
                cfg, pid = item
                os.kill(pid, signal.SIGCONT)
                time.sleep(self.slice_s * rng.uniform(0.5, 1.5))
                os.kill(pid, signal.SIGTSTP)  # the child notes the time and stops itself
                _, status = os.waitpid(pid, os.WUNTRACED)
                if os.WIFSTOPPED(status):
                    continue
                self.copies.discard(pid)
                _raise_if_interrupted(status)
                alive.remove(item)
                result = self._result(cfg)
                if result is not None:
                    results.append(result)
                elif failed:
                    pass
                elif os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
                    failed = f"the workload ended inside chunk {self.chunk}"
                else:
                    failed = (f"a calibration copy ({cfg.name}) {_ended(status)} in chunk "
                              f"{self.chunk}")
            if time.monotonic() > deadline and alive:
                failed = (f"calibration copies hung in chunk {self.chunk} ("
                          + ", ".join(c.name for c, _ in alive) + ")")
                self._kill_copies()
                break
        if failed:
            self._stop(failed)
            return None
        return results

    def _result(self, cfg: ChunkConfig) -> dict | None:
        """A finished child's result (None if it left none, or not a whole one)."""
        path = self.out / (copy_name(self.chunk, cfg) + RESULT_SUFFIX)
        try:
            with open(path) as f:
                result = json.load(f)
        except (OSError, ValueError):
            return None
        path.unlink()  # its contents go to chunks.jsonl
        return result if isinstance(result, dict) else None

    def _kill_copies(self) -> None:
        """Kill the copies not yet reaped and wait until each is gone."""
        for pid in sorted(self.copies):
            try:
                os.kill(pid, signal.SIGKILL)  # also ends a stopped one
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            self.copies.discard(pid)

    def _stop(self, why: str) -> None:
        """Measure no more chunks; the process goes on uninstrumented."""
        self.stopped = True
        (self.out / "stopped.txt").write_text(why + "\n")

    def _finish(self, why: str) -> None:
        from rlscope.inprocess.limits import WorkLimitReached

        self._stop(why)
        print(f"rlscope: calibration: {why}; ending the calibration run", file=sys.stderr)
        raise WorkLimitReached(0)


CANNOT_FORK = "cannot fork copies: "  # stopped.txt's start when no copy was tried
_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


def unforkable() -> str:
    """Why a forked copy of this process would break the run ("" if it would not): live
    child processes (vector-env workers, a pool, a simulator it started; the copy would
    share their pipes) or Ray (a copy cannot share the driver's connections)."""
    ray = sys.modules.get("ray")
    try:
        if ray is not None and ray.is_initialized():
            return "the workload uses Ray, whose connections a forked copy cannot share"
    except Exception:  # another module named ray
        pass
    kids = _live_children()
    if kids:
        return (f"the workload's process has {kids} live child process"
                f"{'es' if kids != 1 else ''} (vector-env workers, a pool, ...) whose pipes "
                "a forked copy would share")
    return ""


def _children_of(pid: str) -> set[str]:
    out: set[str] = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            out.update(f.read().split())
    return out


def _live_children() -> int:
    """Live descendants of this process other than multiprocessing's own helpers (whose
    children count: a forkserver's are the workers)."""
    try:
        todo = sorted(_children_of("self"))
    except OSError:  # no /proc: what multiprocessing knows of
        mp = sys.modules.get("multiprocessing")
        return len(mp.active_children()) if mp is not None else 0
    n = 0
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
            if any(h in cmd for h in _HELPERS):
                todo += sorted(_children_of(pid))
                continue
        except OSError:
            continue  # gone meanwhile
        n += 1
    return n


def write_result(path: Path, msg: dict) -> None:
    """A copy's result, as a file: it can be megabytes (a long chunk's pauses), more than
    a pipe holds, and one os.write of it to a pipe is cut short when the parent's SIGTSTP
    lands in it. Renamed into place when whole: the parent never reads half of one."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:  # buffered: writes until all is written, signals or not
        json.dump(msg, f)
    os.replace(tmp, path)


def copy_name(chunk: int, cfg: ChunkConfig) -> str:
    """The name of a copy's trace directory (and, with RESULT_SUFFIX, its result)."""
    return f"{chunk}-{cfg.name.replace('+', '_')}"


def _ended(status: int) -> str:
    """How a child ended, from its wait status."""
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def _fork() -> tuple[int, bool]:
    """os.fork, and whether Ctrl-C came meanwhile. Python handles a SIGINT that arrives
    during os.fork in its at-fork callbacks, where the KeyboardInterrupt is only printed:
    the process (parent or copy) would go on with the workload. With Python's default
    handler in place, such a SIGINT is noted instead, for the caller to raise."""
    hit: list[int] = []
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return os.fork(), False
    try:
        signal.signal(signal.SIGINT, lambda signum, _frame: hit.append(signum))
    except ValueError:  # not the main thread, which alone sets handlers
        return os.fork(), False
    try:
        pid = os.fork()
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return pid, bool(hit)


def _raise_if_interrupted(status: int) -> None:
    """A copy ended by Ctrl-C: the terminal interrupted this process too, but Python can
    lose that KeyboardInterrupt (raised in os.fork's at-fork callbacks, it is only
    printed), and the process would go on with the workload."""
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGINT:
        raise KeyboardInterrupt


def _pin_writer_away(cpu: int | None) -> None:
    """rlscope's writer thread on the other CPUs: woken every 20 ms, it would otherwise
    often preempt the copy it belongs to, on the CPU it is timed on."""
    others = set(range(os.cpu_count() or 1)) - {cpu}
    if cpu is None or not others or not os.path.isdir("/proc/self/task"):
        return
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip().startswith("rlscope-writer"):
                    os.sched_setaffinity(int(tid), others)
        except OSError:
            continue


def _pin_main_thread(cpu: int | None) -> None:
    """Every child of a chunk runs on the same CPU: on a virtual machine the CPUs can
    differ in speed by tens of percent at a given moment."""
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {cpu})  # 0: the calling thread
        except OSError:
            pass


def _die_with_parent() -> None:
    """A stopped child must not outlive a parent killed mid-chunk (Linux prctl)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def parse_budget(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None  # set by rls-prof; a hand-set bad value: no budget, the chunk limit


def install_from_env() -> None:
    """Called by rlscope.inprocess.autostart when ``RLSCOPE_CALIBRATE_CHUNKS`` is set."""
    from rlscope import annotate

    # Processes the workload starts run as usual (not chunked, not recording).
    out = Path(os.environ.pop(envvars.CHUNK_DIR))
    out.mkdir(parents=True, exist_ok=True)
    driver = Driver(out, decode_configs(os.environ[envvars.CHUNK_CONFIGS]),
                    float(os.environ.get(envvars.CHUNK_S, DEFAULT_CHUNK_S)),
                    int(os.environ.get(envvars.MAX_CHUNKS, DEFAULT_MAX_CHUNKS)),
                    os.environ.get(envvars.RECORDER, "native"),
                    float(os.environ.get(envvars.CHUNK_SLICE_S, DEFAULT_SLICE_S)),
                    parse_budget(os.environ.get(envvars.CHUNK_BUDGET_S)))
    annotate.set_progress_hook(driver.boundary)
