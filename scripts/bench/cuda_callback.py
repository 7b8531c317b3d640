"""Cost of librlscope_cuda's CUPTI API callback per CUDA API call, measured with the fake
libcupti of tests/cuda (no GPU needed).

    python scripts/bench/cuda_callback.py [--rounds 9] [--calls 200000]

The fake's ``fake_api`` fires the ENTER and EXIT callbacks around an empty body, as CUPTI
does around a CUDA call. tests/cuda/cuda_app.cpp ``bench N`` times N such calls (best of
7 repetitions after a warm-up) in two conditions, run as separate processes and
interleaved A B A B ... (the machine is noisy):

  traced    the env contract of rls-prof: librlscope_cuda subscribed and recording
            (per-thread buffers, the writer thread flushing every 0.5 s)
  baseline  the same library preloaded but switched off (RLSCOPE_CUDA=0): the fake has no
            subscriber and skips the callbacks

Prints the per-condition medians and ``RESULT cuda_callback_ns=<median of traced - baseline
per round>``: what recording one API call adds (both callbacks, two clock reads, one
32-byte append). Real CUPTI's own dispatch cost is not included.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "cuda"))

from fake_build import build  # noqa: E402

from rlscope.launch.child_env import Recording, cuda_library, profiled  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--calls", type=int, default=200_000)
    args = ap.parse_args()
    if cuda_library() is None:
        sys.exit("cuda_callback: rlscope was built without the CUDA collector (no CUPTI headers)")
    with tempfile.TemporaryDirectory() as tmp:
        fake = build(Path(tmp) / "fake")
        traced, base = [], []
        for r in range(args.rounds):
            out = Path(tmp) / f"trace{r}"
            env = profiled(Recording(str(out), "native", 0.5))
            out.mkdir()
            pair = {}
            for cond in (("traced", "baseline") if r % 2 == 0 else ("baseline", "traced")):
                e = dict(env, RLSCOPE_CUDA="1" if cond == "traced" else "0")
                p = subprocess.run([str(fake.app), "bench", str(args.calls)], env=e,
                                   capture_output=True, text=True, check=True)
                pair[cond] = json.loads(p.stdout)["ns_per_call"]
            traced.append(pair["traced"])
            base.append(pair["baseline"])
    diff = [t - b for t, b in zip(traced, base, strict=True)]
    print(f"traced    {statistics.median(traced):7.1f} ns/call  (min {min(traced):.1f})")
    print(f"baseline  {statistics.median(base):7.1f} ns/call  (min {min(base):.1f})")
    print(f"RESULT cuda_callback_ns={statistics.median(diff):.1f}")


if __name__ == "__main__":
    main()
