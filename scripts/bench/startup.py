"""Start-up cost rlscope adds to every process it profiles, and to the launcher.

    python scripts/bench/startup.py [--rounds 40]

Each round runs, in a shuffled order, fresh processes of:

  plain     ``python -c pass`` with rlscope's variables removed from the environment
  child     the same with the environment a profiled process gets (rls-prof's contract:
            the bootstrap sitecustomize starts recording and installs interception), as
            every worker, forkserver and helper of a profiled run pays
  import    ``python -c "import rlscope"`` without recording (what annotated code pays
            outside rls-prof)
  launcher  ``rls-prof -q -o DIR -- python -c pass`` (parse options, run.json before and
            after, the profiled child, collecting the trace files)

Added time = median over rounds of (variant - plain) in the same round, so the machine's
slow drift cancels. rlscope's modules are byte-compiled first, as a pip install does (with
PYTHONDONTWRITEBYTECODE set, an editable checkout would otherwise recompile them in every
process). Last line:

    RESULT startup_added_ms=<child - plain> launcher_added_ms=<launcher - plain>
"""

from __future__ import annotations

import argparse
import compileall
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlscope import envvars as E
from rlscope.launch.child_env import Recording, profiled


def _time(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - t0) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args()
    py = sys.executable
    prof = str(Path(py).with_name("rls-prof"))
    if not os.path.exists(prof):
        sys.exit(f"{prof} not found: install rlscope into this interpreter's environment")
    import rlscope

    compileall.compile_dir(os.path.dirname(rlscope.__file__), quiet=1)
    base = {k: v for k, v in os.environ.items() if not k.startswith(E.PREFIX)}
    tmp = Path(tempfile.mkdtemp(prefix="rlscope-startup-"))
    try:
        child_env = profiled(Recording(str(tmp / "child")), base)
        variants = {
            "plain": ([py, "-c", "pass"], base),
            "child": ([py, "-c", "pass"], child_env),
            "import": ([py, "-c", "import rlscope"], base),
            "launcher": ([prof, "-q", "--force", "-o", str(tmp / "launcher"), "--", py, "-c",
                          "pass"], base),
        }
        for argv, e in variants.values():  # warm the file cache
            _time(argv, e)
        times: dict[str, list[float]] = {k: [] for k in variants}
        rng = random.Random(0)
        for r in range(args.rounds):
            for name in rng.sample(list(variants), len(variants)):
                argv, e = variants[name]
                times[name].append(_time(argv, e))
            if r % 10 == 9:
                shutil.rmtree(tmp / "child", ignore_errors=True)  # keep the dir small
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    plain = times["plain"]
    print(f"{'variant':10} {'median ms':>10} {'added ms (median of paired)':>28}")
    added = {}
    for name, ts in times.items():
        added[name] = statistics.median(t - p for t, p in zip(ts, plain, strict=True))
        print(f"{name:10} {statistics.median(ts):10.1f} {added[name]:28.1f}")
    print(f"RESULT startup_added_ms={added['child']:.1f} "
          f"launcher_added_ms={added['launcher']:.1f} import_added_ms={added['import']:.1f}")


if __name__ == "__main__":
    main()
