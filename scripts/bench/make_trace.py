"""Write a synthetic trace directory of a given size, in the real trace format.

The workload imitates an RL training loop on one or more threads: per environment step an
``inference`` operation with backend calls and a ``simulation`` operation with simulator
calls, a ``backprop`` operation every ``--steps-per-update`` steps, phases, and a progress
record per step. Packed columns are encoded with numpy (protobuf's packed varint wire
format), the rest with the protobuf message classes, so 10M events take seconds.

    python scripts/bench/make_trace.py -o /tmp/big --events 10000000
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from rlscope.trace import format as fmt
from rlscope.trace import messages

STRINGS = ["inference", "simulation", "backprop", "torch.linear", "torch.relu",
           "mujoco.mj_step", "torch.backward", "training", "optimizer", "torch.add"]
SID = {s: i + 1 for i, s in enumerate(STRINGS)}
B, E = fmt.OPERATION_BEGIN, fmt.OPERATION_END
BK, BKE = fmt.BACKEND_CALL_BEGIN, fmt.BACKEND_CALL_END
SM, SME = fmt.SIMULATOR_CALL_BEGIN, fmt.SIMULATOR_CALL_END


def _step_template() -> list[tuple[int, str, int]]:
    """(kind, name, mean ns since the previous event) for one environment step."""
    t: list[tuple[int, str, int]] = [(B, "inference", 2000)]
    for _ in range(3):
        t += [(BK, "torch.linear", 800), (BKE, "torch.linear", 3000),
              (BK, "torch.relu", 300), (BKE, "torch.relu", 900)]
    t += [(E, "inference", 500), (B, "simulation", 700), (SM, "mujoco.mj_step", 2500),
          (SME, "mujoco.mj_step", 40000), (E, "simulation", 1500),
          (fmt.PROGRESS, "", 300)]
    return t


def _update_template() -> list[tuple[int, str, int]]:
    t: list[tuple[int, str, int]] = [(B, "backprop", 3000)]
    for _ in range(4):
        t += [(BK, "torch.linear", 700), (BKE, "torch.linear", 9000)]
    t += [(BK, "torch.backward", 900), (BKE, "torch.backward", 60000),
          (B, "optimizer", 400), (BK, "torch.add", 300), (BKE, "torch.add", 7000),
          (E, "optimizer", 400), (E, "backprop", 800)]
    return t


def synth_events(n_events: int, steps_per_update: int, seed: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Times, kinds, names of about ``n_events`` events of one thread, and step count."""
    rng = np.random.default_rng(seed)
    step, update = _step_template(), _update_template()
    iteration = step * steps_per_update + update
    per_iter = len(iteration)
    iters = max(1, (n_events - 4) // per_iter)
    kinds = np.array([k for k, _, _ in iteration], np.uint8)
    names = np.array([SID.get(s, 0) for _, s, _ in iteration], np.uint32)
    means = np.array([d for _, _, d in iteration], np.float64)
    n = iters * per_iter
    deltas = (np.tile(means, iters) * rng.uniform(0.5, 1.5, n)).astype(np.int64)
    kind = np.concatenate([[fmt.PROCESS_START, fmt.PHASE_BEGIN], np.tile(kinds, iters),
                           [fmt.PHASE_END, fmt.PROCESS_END]]).astype(np.uint8)
    name = np.concatenate([[0, SID["training"]], np.tile(names, iters),
                           [SID["training"], 0]]).astype(np.uint32)
    deltas = np.concatenate([[0, 1000], deltas, [1000, 1000]])
    time = 1_000_000_000 + np.cumsum(deltas)
    return time, kind, name, deltas, iters * steps_per_update


# -- protobuf wire format, vectorised ------------------------------------------------------

def encode_varints(values: np.ndarray) -> np.ndarray:
    """Concatenated base-128 varints of non-negative int64/uint64 values, as uint8."""
    v = values.astype(np.uint64, copy=False)
    nbytes = np.ones(len(v), np.int64)
    for k in range(1, 10):
        nbytes += v >= np.uint64(1) << np.uint64(7 * k)
    pos = np.cumsum(nbytes) - nbytes
    out = np.empty(int(nbytes.sum()), np.uint8)
    for k in range(10):
        sel = np.flatnonzero(nbytes > k)
        if not len(sel):
            break
        byte = (v[sel] >> np.uint64(7 * k)) & np.uint64(0x7F)
        more = (nbytes[sel] > k + 1).astype(np.uint64) << np.uint64(7)
        out[pos[sel] + k] = (byte | more).astype(np.uint8)
    return out


def zigzag(values: np.ndarray) -> np.ndarray:
    v = values.astype(np.int64, copy=False)
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


def _varint(n: int) -> bytes:
    return encode_varints(np.array([n], np.uint64)).tobytes()


def _packed(field: int, values: np.ndarray) -> bytes:
    if not len(values):
        return b""
    body = encode_varints(values)
    return _varint(field << 3 | 2) + _varint(len(body)) + body.tobytes()


def _delimited(payload: bytes) -> bytes:
    return _varint(len(payload)) + payload


def write_process(path: Path, pid: int, threads: list[tuple[np.ndarray, np.ndarray,
                                                           np.ndarray]],
                  steps: int, chunk_events: int, host: str = "synthetic",
                  realtime_offset_ns: int = 0) -> int:
    """Write one process file; ``threads`` holds (time, kind, name) per thread. Its
    clock pair says realtime = monotonic + ``realtime_offset_ns`` on ``host``."""
    rec = messages.Record()
    h = rec.header
    h.format_version = fmt.FORMAT_VERSION
    h.source = "python"
    h.pid, h.ppid, h.host = pid, 1, host
    h.process_name = "synthetic-rl"
    h.argv.extend(["make_trace.py"])
    t0 = int(threads[0][0][0])
    h.clock.monotonic_ns, h.clock.realtime_ns = t0, t0 + realtime_offset_ns
    h.clock.uncertainty_ns = 100
    h.recorder, h.rlscope_version = "synthetic", "0"
    written = 0
    seq = 0
    with open(path, "wb") as f:
        f.write(fmt.MAGIC + _delimited(rec.SerializeToString()))
        # Interleave the threads' events chunk by chunk (each chunk: thread runs in order).
        per_thread = max(1, chunk_events // len(threads))
        n_max = max(len(t[0]) for t in threads)
        step_no = np.zeros(len(threads), np.int64)
        for lo in range(0, n_max, per_thread):
            c = messages.Record()
            ch = c.chunk
            ch.sequence = seq
            if seq == 0:
                for s, i in SID.items():
                    ch.strings.add(id=i, value=s)
                for ti in range(len(threads)):
                    ch.threads.add(index=ti, tid=pid + ti, name=f"thread-{ti}")
            parts = [(ti, t[0][lo:lo + per_thread], t[1][lo:lo + per_thread],
                      t[2][lo:lo + per_thread]) for ti, t in enumerate(threads)]
            parts = [p for p in parts if len(p[1])]
            time = np.concatenate([p[1] for p in parts])
            kind = np.concatenate([p[2] for p in parts])
            name = np.concatenate([p[3] for p in parts])
            thread = np.concatenate([np.full(len(p[1]), p[0], np.uint32) for p in parts])
            ch.base_time_ns = int(time[0])
            deltas = np.diff(time, prepend=time[0])
            args = []
            for ti, _, k, _ in parts:
                n_prog = int(np.count_nonzero(k == fmt.PROGRESS))
                s = step_no[ti] + np.arange(1, n_prog + 1)
                step_no[ti] += n_prog
                a = np.empty(2 * n_prog, np.int64)
                a[0::2], a[1::2] = s, steps
                args.append(a)
            # Scalar fields by protobuf, packed columns appended (fields may come in any
            # order on the wire).
            chunk_bytes = (ch.SerializeToString() + _packed(5, zigzag(deltas))
                           + _packed(6, thread) + _packed(7, kind) + _packed(8, name)
                           + _packed(9, zigzag(np.concatenate(args))))
            record = _varint(2 << 3 | 2) + _varint(len(chunk_bytes)) + chunk_bytes
            f.write(_delimited(record))
            written += len(time)
            seq += 1
    return written


def make_trace(out: Path, events: int, threads: int = 1, processes: int = 1,
               steps_per_update: int = 32, chunk_events: int = 65536, seed: int = 0) -> int:
    out.mkdir(parents=True, exist_ok=True)
    per_file = events // processes
    total = 0
    for p in range(processes):
        per_thread = per_file // threads
        ts = []
        for t in range(threads):
            time, kind, name, _, steps = synth_events(per_thread, steps_per_update,
                                                      seed + 31 * p + t)
            if t > 0:  # worker threads: no process start/end, no phase
                keep = ~np.isin(kind, [fmt.PROCESS_START, fmt.PROCESS_END,
                                       fmt.PHASE_BEGIN, fmt.PHASE_END, fmt.PROGRESS])
                time, kind, name = time[keep], kind[keep], name[keep]
            ts.append((time, kind, name))
        total += write_process(out / f"python.{1000 + p}{fmt.FILE_SUFFIX}", 1000 + p, ts,
                               steps, chunk_events)
    (out / "run.json").write_text(json.dumps({"command": ["make_trace.py"],
                                              "status": "exited", "exit_status": 0}))
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    n = make_trace(a.out, a.events, a.threads, a.processes, seed=a.seed)
    size = sum(f.stat().st_size for f in a.out.iterdir())
    print(f"wrote {n} events to {a.out} ({size / max(n, 1):.2f} bytes/event)",
          file=sys.stderr)


if __name__ == "__main__":
    main()
