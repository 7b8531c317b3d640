"""Cost of the phase markers behind inferred operations, on the hand-written DQN and PPO
loops (tests/integration/workloads/handwritten_*.py, unannotated), and of inferring.

    python scripts/bench/zerocode_markers.py [--rounds 7] [--algo dqn,ppo]

Recording: every run is a fresh process (1 torch thread) recording with the native
recorder and torch + gymnasium interception, as under rls-prof, timing the whole loop
(the workload run by runpy, after torch is imported):

  markers   the default: MARK_CALL events (outermost module forward, zero_grad, step)
  off       the same with the marker category switched off (``_native.set_call_mask``)

Rounds interleave the two (order alternated). Inflation = median over rounds of the
per-round ratio markers / off: on a shared 2-core machine its noise is far above the
markers' cost, so the cost of one marker is also measured directly (``micro``): calls of
an ``nn.Identity`` module (the cheapest forward) recording with and without markers,
interleaved, best of 15 rounds of 20,000 calls. Analysis: ``rlscope.analysis.load`` of one
run's trace with ``infer="auto"`` vs ``"off"`` (median of 5). Last lines:

    RESULT micro: marker_ns=<cost of one outermost module call's marker pair>
    RESULT <algo>: markers/off=<ratio> marks=<n> analysis auto/off=<ratio>
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ROOT / "tests" / "integration" / "workloads"
ARGS = {"dqn": ["--steps", "3000"], "ppo": ["--updates", "8"]}

CHILD = r"""
import json, runpy, sys, time
import torch
torch.set_num_threads(1)
import rlscope
from rlscope import _native, intercept
mode, out, script, *args = sys.argv[1:]
rlscope.start(out)
intercept.enable("torch,gym")
if mode == "off":
    _native.set_call_mask(0b111)  # backend, simulator, wait: no markers (bit 3)
sys.argv = [script, *args]
t0 = time.perf_counter()
runpy.run_path(script, run_name="__main__")
dt = time.perf_counter() - t0
rlscope.stop()
print(json.dumps({"seconds": dt}))
"""


MICRO = r"""
import json, sys, time
import torch
torch.set_num_threads(1)
import rlscope
from rlscope import _native, intercept
rlscope.start(sys.argv[1])
intercept.enable("torch")
m, x = torch.nn.Identity(), torch.zeros(1)
best = {0b1111: float("inf"), 0b111: float("inf")}
for r in range(15):
    for mask in ((0b1111, 0b111) if r % 2 == 0 else (0b111, 0b1111)):
        _native.set_call_mask(mask)
        t0 = time.perf_counter_ns()
        for _ in range(20000):
            m(x)
        best[mask] = min(best[mask], (time.perf_counter_ns() - t0) / 20000)
rlscope.stop()
print(json.dumps({"on": best[0b1111], "off": best[0b111]}))
"""


def micro(out: str) -> dict[str, float]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", MICRO, out], capture_output=True, text=True,
                       env=env, check=True)
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def run(mode: str, algo: str, out: str) -> float:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", CHILD, mode, out,
                        str(WORKLOADS / f"handwritten_{algo}.py"), *ARGS[algo]],
                       capture_output=True, text=True, env=env, check=True)
    return float(json.loads(r.stdout.strip().splitlines()[-1])["seconds"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--algo", default="dqn,ppo")
    a = ap.parse_args()
    import rlscope.analysis
    from rlscope.trace import format as fmt
    from rlscope.trace.reader import read_trace

    with tempfile.TemporaryDirectory() as tmp:
        m = micro(f"{tmp}/micro")
    print(f"micro: nn.Identity call {m['on']:.0f} ns with markers, {m['off']:.0f} ns "
          "without")
    print(f"RESULT micro: marker_ns={m['on'] - m['off']:.0f}", flush=True)
    for algo in a.algo.split(","):
        ratios, times = [], {"markers": [], "off": []}
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(a.rounds):
                order = ("markers", "off") if i % 2 == 0 else ("off", "markers")
                got = {m: run(m, algo, f"{tmp}/{m}{i}") for m in order}
                for m, t in got.items():
                    times[m].append(t)
                ratios.append(got["markers"] / got["off"])
                print(f"{algo} round {i}: markers {got['markers']:.3f} s, "
                      f"off {got['off']:.3f} s", flush=True)
            trace = f"{tmp}/markers0"
            (p,) = read_trace(trace).processes
            marks = int((p.events.kind == fmt.MARK_CALL_BEGIN).sum())
            load_t = {}
            for mode in ("auto", "off"):
                ts = []
                for _ in range(5):
                    t0 = time.perf_counter()
                    rlscope.analysis.load(trace, infer=mode).operations()
                    ts.append(time.perf_counter() - t0)
                load_t[mode] = statistics.median(ts)
        infl = statistics.median(ratios)
        print(f"{algo}: median loop {statistics.median(times['markers']):.3f} s with markers, "
              f"{statistics.median(times['off']):.3f} s without; {marks} markers "
              f"({1e3 * statistics.median(times['markers']) / max(marks, 1):.3f} ms of loop "
              f"per marker); analysis {load_t['auto']:.3f} s (infer auto) vs "
              f"{load_t['off']:.3f} s (off)")
        print(f"RESULT {algo}: markers/off={infl:.4f} marks={marks} "
              f"analysis auto/off={load_t['auto'] / load_t['off']:.3f}")


if __name__ == "__main__":
    main()
