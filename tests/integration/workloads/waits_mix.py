"""Busy Python mixed with sleeps and pipe waits of known length, in one operation.

The workload times itself with perf_counter (the clock the recorders use): the
operation, each busy stretch and each blocking call. Prints one JSON line of seconds.
Pipe waits: a forked helper answers each request on a raw os.pipe, or a multiprocessing
Connection, after a given delay, so the main process blocks in os.read / Connection.recv.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import time

import rlscope


def raw_helper(req: int, resp: int) -> None:
    while True:
        d = os.read(req, 8)
        if not d or d == b"q":
            os._exit(0)
        time.sleep(int(d) / 1e6)
        os.write(resp, b"x")


def conn_helper(conn) -> None:
    while True:
        d = conn.recv()
        if d is None:
            return
        time.sleep(d)
        conn.send(b"y" * 1000)


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--busy-s", type=float, default=0.02)
    ap.add_argument("--sleep-s", type=float, default=0.015)
    ap.add_argument("--pipe-s", type=float, default=0.015)
    a = ap.parse_args()
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        raw_helper(req_r, resp_w)
    parent, child = mp.Pipe()
    proc = mp.get_context("fork").Process(target=conn_helper, args=(child,))
    proc.start()
    waited = busy_s = 0.0
    t_op0 = time.perf_counter()
    with rlscope.operation("mix"):
        for i in range(a.iterations):
            t0 = time.perf_counter()
            busy(a.busy_s)
            t1 = time.perf_counter()
            time.sleep(a.sleep_s)
            t2 = time.perf_counter()
            if i % 2:
                os.write(req_w, str(int(a.pipe_s * 1e6)).encode())
                t3 = time.perf_counter()
                os.read(resp_r, 1)
            else:
                parent.send(a.pipe_s)
                t3 = time.perf_counter()
                parent.recv()
            t4 = time.perf_counter()
            busy_s += t1 - t0
            waited += (t2 - t1) + (t4 - t3)
    op_s = time.perf_counter() - t_op0
    os.write(req_w, b"q")
    parent.send(None)
    proc.join()
    os.waitpid(pid, 0)
    print(json.dumps({"op_s": op_s, "waited_s": waited, "busy_s": busy_s}))


if __name__ == "__main__":
    main()
