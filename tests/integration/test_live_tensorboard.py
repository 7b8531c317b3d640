"""``rls-analyze live --tensorboard LOGDIR --until-done`` beside a running job: the event
file it writes holds per-operation scalars over training steps (steps increasing), and
the simulation's milliseconds per step agree with what the job measured itself around the
same calls; it stops by itself when the job ends. Read back with tensorboardX's own Event
message (the TFRecord framing parsed here)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import wait_until

event_pb2 = pytest.importorskip("tensorboardX.proto.event_pb2")

WORKLOAD = textwrap.dedent("""
    import json, sys, time
    import rlscope

    sim, steps = 0.0, 0
    for i in range(1500):  # about 4 s
        t = time.perf_counter()
        with rlscope.operation("simulation"):
            time.sleep(0.002)
        sim += time.perf_counter() - t
        with rlscope.operation("inference"):
            sum(range(3000))
        steps += 4
        rlscope.report_progress(steps)
    json.dump({"ms_per_step": 1e3 * sim / steps}, open(sys.argv[1], "w"))
""")


def _scalars(logdir: Path) -> list[tuple[str, int, float]]:
    out = []
    for f in sorted(logdir.glob("events.out.tfevents.*")):
        data = f.read_bytes()
        pos = 0
        while pos + 12 <= len(data):
            (n,) = struct.unpack("<Q", data[pos:pos + 8])
            body = data[pos + 12:pos + 12 + n]
            pos += 12 + n + 4
            ev = event_pb2.Event.FromString(body)
            for v in ev.summary.value:
                out.append((v.tag, int(ev.step), float(v.simple_value)))
    return out


def test_tensorboard_scalars(tmp_path: Path) -> None:
    script, truth = tmp_path / "job.py", tmp_path / "truth.json"
    out, logdir = tmp_path / "run", tmp_path / "tb"
    script.write_text(WORKLOAD)
    # The live side first: it waits for the run's files; its writer opens the event file
    # at start, so the job starts once it is there (the job is then followed whole).
    live = subprocess.Popen([sys.executable, "-m", "rlscope.cli.analyze", "live", str(out),
                             "--tensorboard", str(logdir), "--until-done", "--refresh", "0.3"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: list(logdir.glob("events.out.tfevents.*")), "the event file")
        job = subprocess.run([sys.executable, "-m", "rlscope.cli.prof", "-o", str(out), "-q",
                              "--", sys.executable, str(script), str(truth)],
                             capture_output=True, text=True, timeout=300)
        assert job.returncode == 0, job.stderr
        _, err = live.communicate(timeout=120)
        assert live.returncode == 0, err
    finally:
        if live.poll() is None:
            live.kill()

    rows = _scalars(logdir)
    (pid,) = {int(t.split("/")[1].rsplit(".", 1)[1]) for t, _, _ in rows}
    who = f"rlscope/job.py.{pid}"
    sim = [(s, v) for t, s, v in rows if t == f"{who}/ms_per_step/simulation"]
    assert len(sim) >= 3, sorted({t for t, _, _ in rows})
    steps = [s for s, _ in sim]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    assert {f"{who}/share_pct/simulation", f"{who}/share_pct/inference",
            f"{who}/steps_per_s"} <= {t for t, _, _ in rows}
    expected = json.loads(truth.read_text())["ms_per_step"]
    median = sorted(v for _, v in sim)[len(sim) // 2]
    assert median == pytest.approx(expected, rel=0.3), (sim, expected)
