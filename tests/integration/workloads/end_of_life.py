"""How processes end under rls-prof. Prints one JSON line.

  terminate METHOD   Pool workers busy in operations, ended by Pool.terminate() (SIGTERM)
  sigkill METHOD     a Process worker busy in operations, ended by SIGKILL
  orphan FILE S      leaves a child burning S s of CPU after this process exits; the
                     child writes the CPU time it used to FILE
  ignored FILE S     as ``orphan``, but this process ignores SIGCHLD (as Ray's raylet
                     does) and waits until the child has gone: the kernel reaps it, and
                     its CPU reaches no one's RUSAGE_CHILDREN
  forkserver         one Process through the forkserver (which outlives this process)
  pool_exit METHOD   ``with Pool() as p: p.map(...)``: the with-block's terminate() sends
                     SIGTERM to workers that may already be exiting
  os_exit METHOD     children (a multiprocessing Process, a bare os.fork()) that record
                     an operation and leave through os._exit()
  unanswered         a forked Process records 100 operations, then blocks for good in C
                     with SIGTERM blocked on its main thread (a helper thread takes it):
                     its Python handler can never run, as when the signal lands just
                     before a lock wait (Pool.terminate()); ended by SIGTERM
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time

import rlscope


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def busy(counter, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with rlscope.operation("task_step"):
            spin(0.002)
        with counter.get_lock():
            counter.value += 1


def started(counter, n: int, timeout: float = 120) -> None:
    """Poll until the workers have done ``n`` steps (start-up under load is slow)."""
    end = time.monotonic() + timeout
    while counter.value < n:
        if time.monotonic() > end:
            raise SystemExit("workers did not start")
        time.sleep(0.01)


def square(x: int) -> int:
    return x * x


def noop() -> int:
    return os.getpid()


ORPHAN = """
import sys, time
end = time.process_time() + float(sys.argv[2])
while time.process_time() < end:
    pass
with open(sys.argv[1], "w") as f:
    f.write(str(time.process_time()))
"""


def main() -> None:
    mode = sys.argv[1]
    out: dict[str, object] = {}
    if mode == "terminate":
        ctx = mp.get_context(sys.argv[2])
        counter = ctx.Value("i", 0)
        pool = ctx.Pool(2, initializer=_init, initargs=(counter,))
        results = [pool.apply_async(_pool_busy, (60,)) for _ in range(2)]
        started(counter, 200)
        out["workers"] = [p.pid for p in pool._pool]  # type: ignore[attr-defined]
        out["end_ns"] = time.perf_counter_ns()
        pool.terminate()
        pool.join()
        assert not any(r.ready() and r.successful() for r in results)
    elif mode == "sigkill":
        ctx = mp.get_context(sys.argv[2])
        counter = ctx.Value("i", 0)
        p = ctx.Process(target=busy, args=(counter, 60))
        p.start()
        started(counter, 200)
        out["workers"] = [p.pid]
        out["end_ns"] = time.perf_counter_ns()
        os.kill(p.pid, signal.SIGKILL)
        p.join()
    elif mode == "orphan":
        # Not holding our output pipes open: whoever reads them sees their end at our exit.
        child = subprocess.Popen([sys.executable, "-c", ORPHAN, sys.argv[2], sys.argv[3]],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out["orphan"] = child.pid
        child.returncode = 0  # not waited for: Popen's __del__ would not reap it anyway
    elif mode == "ignored":
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
        child = subprocess.Popen([sys.executable, "-c", ORPHAN, sys.argv[2], sys.argv[3]])
        out["child"] = child.pid
        child.wait()  # waitpid blocks until the child has gone, then fails: ECHILD
    elif mode == "pool_exit":
        with mp.get_context(sys.argv[2]).Pool(2) as pool:
            out["squares"] = pool.map(square, range(4))
    elif mode == "forkserver":
        ctx = mp.get_context("forkserver")
        with ctx.Pool(1) as pool:
            out["worker"] = pool.apply(noop)
    elif mode == "unanswered":
        ctx = mp.get_context("fork")
        ready = ctx.Event()
        p = ctx.Process(target=_block_in_c, args=(ready,))
        p.start()
        if not ready.wait(120):
            raise SystemExit("the worker did not start")
        t0 = time.perf_counter()
        p.terminate()
        p.join(120)
        out.update(worker=p.pid, exitcode=p.exitcode, ended_s=time.perf_counter() - t0)
        if p.exitcode is None:
            p.kill()
    elif mode == "os_exit":
        p = mp.get_context(sys.argv[2]).Process(target=_step_then_os_exit)
        p.start()
        p.join()
        pid = os.fork()
        if pid == 0:
            _step_then_os_exit()
        os.waitpid(pid, 0)
        out["children"] = [p.pid, pid]
    print(json.dumps(out), flush=True)


def _step_then_os_exit() -> None:
    # Well inside one flush interval: only a flush at the exit writes the step.
    with rlscope.operation("last_step"):
        spin(0.001)
    os._exit(3)


def _block_in_c(ready) -> None:
    import threading

    for _ in range(100):
        with rlscope.operation("before"):
            pass
    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    lock = threading.Lock()
    lock.acquire()
    ready.set()
    lock.acquire()  # never returns; no signal interrupts this thread


_counter = None


def _init(counter) -> None:
    global _counter
    _counter = counter


def _pool_busy(seconds: float) -> None:
    busy(_counter, seconds)


if __name__ == "__main__":
    main()
