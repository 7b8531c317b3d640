"""``rls-prof --calibrate`` says where it is while it runs (a status line redrawn on a
terminal, plain lines in a log) and ends with lines in plain words; the technical detail
is behind ``--verbose``."""

from __future__ import annotations

import io
import math
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from rlscope.analysis.overhead.model import Calibration, KindCost
from rlscope.cli.common import StatusLine
from rlscope.reporters.calibration import summary_lines
from tests.conftest import REPO, run_tool

WORKLOAD = str(REPO / "tests" / "integration" / "workloads" / "calib_loop.py")
CHUNKS = ["--calibrate", "--chunks", "6", "--chunk-seconds", "0.1"]
# Words of the technical detail: never in the default lines.
JARGON = ("microbenchmark", "held-out", "jackknife", "standard error", "tight-loop",
          "uninstrumented", "annotation:", "round 1/")


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_status_line_redraws_in_place_on_a_terminal() -> None:
    out, clock = _Stream(tty=True), _Clock()
    s = StatusLine("rls-prof: ", out, clock=clock)
    s.update("calibrating: chunk 1 of at most 8")
    clock.t += 3
    s.update("calibrating: chunk 1 of at most 8")  # the same text: the time moves on
    s.echo("rls-prof: a line that stays")
    clock.t += 62
    s.update("calibrating: chunk 2 of at most 8")
    s.done()
    assert out.getvalue() == (
        "\r\x1b[Krls-prof: calibrating: chunk 1 of at most 8 (0 s)"
        "\r\x1b[Krls-prof: calibrating: chunk 1 of at most 8 (3 s)"
        "\r\x1b[Krls-prof: a line that stays\n"
        "\r\x1b[Krls-prof: calibrating: chunk 1 of at most 8 (3 s)"
        "\r\x1b[Krls-prof: calibrating: chunk 2 of at most 8 (1 min 05 s)"
        "\r\x1b[K")
    assert s.elapsed() == "1 min 05 s"


def test_status_line_is_plain_lines_in_a_log() -> None:
    out, clock = _Stream(tty=False), _Clock()
    s = StatusLine("rls-prof: ", out, every_s=10, clock=clock)
    for text in ["a", "a", "b", "c"]:  # b and c within 10 s of a: not printed
        s.update(text)
        clock.t += 1
    clock.t += 10
    s.update("c")  # 10 s after a, and news: printed
    s.update("d")  # within 10 s of c: not
    clock.t += 20
    s.update("d")
    s.update("d")  # printed already
    s.echo("rls-prof: stays")
    s.done()
    assert out.getvalue() == ("rls-prof: a (0 s)\nrls-prof: c (14 s)\nrls-prof: d (34 s)\n"
                              "rls-prof: stays\n")
    assert "\r" not in out.getvalue()


def _kind(per: float, err: float, source: str, events: int = 1000, est: float = math.nan,
          mb: float = math.nan, diffuse: float = 0.0) -> KindCost:
    return KindCost(per, per / 3, err, source, events, diffuse_ns=diffuse, estimate_ns=est,
                    microbenchmark_ns=mb)


def test_plain_lines_say_what_was_measured_how_sure_and_what_it_means() -> None:
    cal = Calibration(
        command=["x"], mode="chunks",
        costs={"annotation": _kind(150, 20, "chunks (inside part: microbenchmark)",
                                   events=2000, est=150, mb=100),
               "backend_call": _kind(300, 400, "chunks", events=1000, est=300),
               "simulator_call": _kind(100, 30, "microbenchmark", events=10, est=60, mb=100),
               "wait_call": _kind(5000, 900, "chunks", events=10, est=5000, mb=100,
                                  diffuse=4800)},
        uninstrumented={"chunks": 8, "chunk_mean_s": 0.01},
        validation={"validation_rounds": [1, 3, 5], "total_error_pct": 0.8,
                    "raw_total_error_pct": 7.5},
        warnings=["held-out chunks: something technical"])
    plain = summary_lines(cal)
    text = "\n".join(plain)
    # what it means for the report: (2000 x 150 + 1000 x 300 + 10 x 100 + 10 x 5000) ns
    # of 10 ms
    assert plain[0] == ("  rlscope's book-keeping took about 6.5% of this workload's time; "
                        "rls-analyze removes it from every number it reports (--no-correct "
                        "shows them raw)")
    assert ("    an operation or phase beginning or ending: 150 ns, measured on this "
            "workload (± 20 ns)") in plain
    assert ("    a call into the ML backend (torch, tensorflow, jax, ...): 300 ns, measured "
            "on this workload (a rough figure: the error margin is as large as the value)"
            ) in plain
    assert ("    a call into the simulator (mujoco, box2d, ...): 100 ns, from a benchmark of "
            "rlscope's hooks (the workload's measurement came out lower, within its noise; "
            "a hook costs at least this)") in plain
    assert "removed evenly over the run" in text  # the diffuse part, said plainly
    assert ("  check (good): on 3 chunks of work not used to measure the costs, the "
            "corrected time came out 0.8% above the same work without rlscope "
            "(uncorrected: 7.5% above)") in plain
    assert plain[-1] == ("  (rls-prof --verbose also shows how each cost was estimated, "
                         "and 1 technical warning)")
    assert not [w for w in JARGON if w in text], text
    detail = "\n".join(summary_lines(cal, verbose=True))
    assert detail.startswith(text.rsplit("\n", 1)[0])  # the plain lines, then the detail
    assert "jackknife" in detail and "warning: held-out chunks: something technical" in detail


def test_the_check_says_when_correcting_did_not_help() -> None:
    cal = Calibration(command=["x"], mode="chunks",
                      costs={"annotation": _kind(700, 60, "chunks", est=700, mb=50)},
                      uninstrumented={"chunk_mean_s": 0.1},
                      validation={"validation_rounds": [1, 3], "total_error_pct": -3.1,
                                  "raw_total_error_pct": -1.3})
    (check,) = [ln for ln in summary_lines(cal) if "check" in ln]
    assert check == ("  check (fair): on 2 chunks of work not used to measure the costs, the "
                     "corrected time came out 3.1% below the same work without rlscope "
                     "(uncorrected: 1.3% below); correcting did not bring it closer here: "
                     "rlscope's cost on this workload is within the measurement's noise")
    cal.validation.update(total_error_pct=9.0, raw_total_error_pct=12.0)
    (check,) = [ln for ln in summary_lines(cal) if "check" in ln]
    assert check.startswith("  check (poor): ") and "more --chunks" in check


def test_default_calibration_output_is_plain_and_verbose_adds_the_detail(
        tmp_path: Path) -> None:
    r = run_tool("rls-prof", "-o", str(tmp_path / "plain"), *CHUNKS, "--",
                 sys.executable, WORKLOAD, "--iterations", "20000", timeout=300)
    assert r.returncode == 0, r.stderr
    err = r.stderr
    # progress while it ran, as plain lines (stderr is not a terminal here)
    assert "\r" not in err and "\x1b" not in err
    status = [ln for ln in err.splitlines() if re.search(r"calibrating: .* \(\d+ s\)$", ln)]
    assert status, err
    assert "calibrating: running the command to its first progress report (0 s)" in status[0]
    # the outcome in plain words
    assert "calibration written to" in err and "what it costs, per event:" in err
    assert re.search(r"rlscope's book-keeping took (about \d+\.\d%|less than 0\.1%) of "
                     r"this workload's time", err), err
    assert re.search(r"check \((good|fair|poor)\): on \d+ chunks of work", err), err
    summary = err[err.index("calibration written to"):]
    assert not [w for w in JARGON if w in summary], summary

    v = run_tool("rls-prof", "-o", str(tmp_path / "verbose"), "--verbose", *CHUNKS, "--",
                 sys.executable, WORKLOAD, "--iterations", "20000", timeout=300)
    assert v.returncode == 0, v.stderr
    assert "  detail:" in v.stderr and "standard error (jackknife" in v.stderr
    assert "calibration runs in " in v.stderr


def test_whole_runs_say_which_run_of_how_many(tmp_path: Path) -> None:
    r = run_tool("rls-prof", "-o", str(tmp_path / "runs"), "--verbose", "--calibrate",
                 "--calibrate-by", "runs", "--repetitions", "2", "--", sys.executable,
                 WORKLOAD, "--iterations", "200", timeout=300)
    assert r.returncode == 0, r.stderr
    assert re.search(r"calibrating: whole run 1 of \d+ \(round 1 of 2, without rlscope\)",
                     r.stderr), r.stderr
    assert "round 1/2 uninstrumented: " in r.stderr  # each run's times: --verbose only
    assert "on 1 whole run not used to measure the costs" in r.stderr


def test_on_a_terminal_the_status_line_is_redrawn(tmp_path: Path) -> None:
    """stderr on a pseudo-terminal: the status is one line rewritten in place."""
    master, slave = pty.openpty()
    with open(tmp_path / "stdout.log", "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rlscope.cli.prof", "-o", str(tmp_path / "tty"), *CHUNKS,
             "--", sys.executable, WORKLOAD, "--iterations", "20000"],
            stdout=out, stderr=slave, stdin=subprocess.DEVNULL,
            env={**os.environ, "COLUMNS": "200"})
    os.close(slave)
    got = bytearray()
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal has closed it
                break
            if not data:
                break
            got += data
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
        rc = proc.wait(timeout=60)
    text = got.decode(errors="replace")
    assert rc == 0, text
    redraws = re.findall(r"\r\x1b\[Krls-prof: (calibrating: [^\r\n]*?) \((\d+) s\)", text)
    assert redraws, text
    assert any(re.fullmatch(r"calibrating: chunk \d of at most 6", t) for t, _ in redraws), text
    assert any(t == "calibrating: timing rlscope's hooks in a tight loop" for t, _ in redraws)
    # cleared before the outcome: it is not left among the lines that stay
    lines = [ln.rsplit("\r\x1b[K", 1)[-1] for ln in text.replace("\r\n", "\n").split("\n")]
    assert not [ln for ln in lines if ln.startswith("rls-prof: calibrating: chunk")]
    assert any(ln.startswith("rls-prof: calibration written to") for ln in lines), text
