"""Size, time and peak memory of ``rls-analyze timeline`` on a trace directory.

    python scripts/bench/timeline.py DIR [--rounds 3] [--variants default,all,...]

Each round runs every variant once, in a fresh process, in a shuffled order:

  default      ``rls-analyze timeline DIR`` (Perfetto protobuf, native calls left out
               when over the 100 MB budget)
  all          the same with ``--tracks all`` (every native call)
  all-gz       ``--tracks all`` into a ``.pftrace.gz``
  json         ``--format json`` (the default tracks)
  json-all     ``--format json --tracks all`` (every track as JSON)
  before       with ``--before SRC``: ``rls-analyze timeline DIR -o t.json`` run from the
               rlscope sources in SRC (an earlier commit), e.g. made with
               ``git archive 4b6fc00 rlscope | tar -x -C SRC`` and the built
               ``rlscope/trace/_descriptor.py`` copied in (the editable install's import
               hook is bypassed for that run)

Reported per variant: the file's size, the median wall time and the largest peak resident
memory (the child's ``ru_maxrss``) over the rounds, the slices written. The trace is read
and, with ``DIR/calibration.json``, corrected in every run, as the command does. Last line:

    RESULT timeline_default_mb=... timeline_default_s=... timeline_default_peak_mb=... ...
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VARIANTS = {
    "default": ["-o", "{out}/t.pftrace"],
    "all": ["-o", "{out}/t.pftrace", "--tracks", "all"],
    "all-gz": ["-o", "{out}/t.pftrace.gz", "--tracks", "all"],
    "json": ["-o", "{out}/t.json"],
    "json-all": ["-o", "{out}/t.json", "--tracks", "all"],
}


_FROM_SOURCES = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in "
    "type(f).__module__]; sys.path.insert(0, sys.argv.pop(1)); "
    "from rlscope.cli.analyze import main; main(sys.argv[1:])")


def run_once(directory: Path, args: list[str], out: Path, src: Path | None = None
             ) -> tuple[float, float, int, str]:
    """(wall s, peak RSS MB, file bytes, stdout) of one run in a fresh process."""
    cmd = ["-m", "rlscope.cli.analyze"] if src is None else ["-c", _FROM_SOURCES, str(src)]
    argv = [sys.executable, *cmd, "timeline", str(directory),
            *[a.format(out=out) for a in args]]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    stdout = proc.stdout.read() if proc.stdout else ""
    stderr = proc.stderr.read() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{stderr}")
    path = Path(argv[argv.index("-o") + 1])
    return wall, usage.ru_maxrss / 1024, path.stat().st_size, stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("directory", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="comma-separated, of: " + ", ".join(VARIANTS))
    ap.add_argument("--before", type=Path, default=None, metavar="SRC",
                    help="also run the 'before' variant from these rlscope sources")
    args = ap.parse_args()
    names = [v for v in args.variants.split(",") if v]
    for v in names:
        if v not in VARIANTS:
            ap.error(f"unknown variant {v!r}")
    if args.before is not None:
        names.append("before")
    results: dict[str, list[tuple[float, float, int, str]]] = {v: [] for v in names}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = names[:]
            random.shuffle(order)
            for v in order:
                out = Path(tmp) / v
                out.mkdir(exist_ok=True)
                if v == "before":
                    results[v].append(run_once(args.directory, ["-o", "{out}/t.json"], out,
                                               args.before.resolve()))
                else:
                    results[v].append(run_once(args.directory, VARIANTS[v], out))
                for f in out.iterdir():
                    f.unlink()
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    print(f"{'variant':<10} {'MB':>8} {'wall s (median)':>16} {'peak MB':>8}  slices")
    fields = []
    for v in names:
        rows = results[v]
        size = rows[-1][2] / 1e6
        wall = statistics.median(r[0] for r in rows)
        peak = max(r[1] for r in rows)
        m = re.search(r": ([\d,]+) (?:slices|trace events)", rows[-1][3])
        print(f"{v:<10} {size:8.1f} {wall:16.2f} {peak:8.0f}  {m.group(1) if m else '?'}")
        key = v.replace("-", "_")
        fields += [f"timeline_{key}_mb={size:.1f}", f"timeline_{key}_s={wall:.2f}",
                   f"timeline_{key}_peak_mb={peak:.0f}"]
    print("RESULT " + " ".join(fields))


if __name__ == "__main__":
    main()
