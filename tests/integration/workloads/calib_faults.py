"""calib_loop's work, with a fault in the chunk calibration's copies (--fault):

- big-result: every copy's pause list is padded to ~1.5 MB of JSON, a result far
  larger than a pipe holds;
- setup-death: the 5th forked copy (the first of chunk 2) exits (status 3) as it is
  set up;
- copy-crash: a recording copy exits with status 4 past the 40th progress report;
- run-fails: the calibration run exits with status 1 at its first progress report
  (its copies, forked there, die with it): before the driver could measure enough chunks
  and end the run itself, however fast or slow the machine.

Only the calibration run's copies are affected: it is the run without
RLSCOPE_OUTPUT_DIR, and its copies are the forks of the workload process."""

import argparse
import os
import sys

import rlscope

ap = argparse.ArgumentParser()
ap.add_argument("--iterations", type=int, default=4000)
ap.add_argument("--fault", choices=["big-result", "setup-death", "copy-crash", "run-fails"])
args = ap.parse_args()
calibrating = not os.environ.get("RLSCOPE_OUTPUT_DIR")
forks = [0]
main_pid = os.getpid()
if calibrating and args.fault == "big-result":
    from rlscope import _native

    real = _native.pause_gaps
    _native.pause_gaps = lambda: real() + [(1 << 62, (1 << 62) + i) for i in range(40_000)]
if calibrating and args.fault == "setup-death":
    def _count() -> None:
        forks[0] += 1

    def _die() -> None:
        if forks[0] == 5:
            os._exit(3)

    os.register_at_fork(before=_count, after_in_child=_die)
reports = 0
acc = 0
for i in range(1, args.iterations + 1):
    with rlscope.operation("step"):
        for j in range(200):
            acc += j * i
    if i % 20 == 0:
        rlscope.report_progress(i, args.iterations)
        reports += 1
        if calibrating and args.fault == "run-fails" and os.getpid() == main_pid:
            sys.stdout.flush()
            os._exit(1)
        # Only recording copies record in the calibration run.
        if calibrating and args.fault == "copy-crash" and rlscope.is_active() \
                and reports > 40:
            os._exit(4)
print("done", i)
