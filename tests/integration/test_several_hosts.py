"""Several hosts: the host label (RLSCOPE_HOST) and per-host directories
(RLSCOPE_HOST_DIRS) with both recorders, rls-prof --force clearing them, and a run over
two Ray nodes (started here, each with its own label) read back as one run on one clock
(docs/multiprocess.md#several-hosts)."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlscope.analysis import load
from rlscope.analysis.timeline.select import plan_timeline as timeline_plan
from rlscope.reporters.chrome_trace import write_chrome_trace
from rlscope.trace import format as fmt
from rlscope.trace.reader import read_trace
from rlscope.trace.records import read_header
from tests.conftest import RECORDERS, REPO, run_tool, wait_until

WORKLOAD = REPO / "tests" / "integration" / "workloads" / "ray_two_hosts.py"
CHILD = "import rlscope, subprocess, sys\n" \
        "with rlscope.operation('parent'):\n" \
        "    subprocess.run([sys.executable, '-c', 'import rlscope\\n" \
        "with rlscope.operation(\"child\"): pass'], check=True)\n"


@pytest.mark.parametrize("recorder", RECORDERS)
def test_host_label_and_directory(tmp_path: Path, recorder: str):
    out = tmp_path / "run"
    env = dict(os.environ, RLSCOPE_HOST="node/7", RLSCOPE_HOST_DIRS="1")
    r = run_tool("rls-prof", "-o", str(out), "--recorder", recorder, "--", sys.executable,
                 "-c", CHILD, env=env)
    assert r.returncode == 0, r.stderr
    files = sorted((out / "node_7").glob("*" + fmt.FILE_SUFFIX))  # label made a file name
    assert len(files) == 2 and not list(out.glob("*" + fmt.FILE_SUFFIX))
    assert {read_header(f)[0].host for f in files} == {"node_7"}
    a = load(out)
    assert set(a.operations()["operation"]) >= {"parent", "child"}
    assert list(a.hosts()["host"]) == ["node_7"]
    # --force clears the host directory's traces (and the directory, once empty).
    (out / "node_7" / "notes.txt").write_text("mine")
    r = run_tool("rls-prof", "-o", str(out), "--force", "--", sys.executable, "-c", "pass",
                 env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert not list((out / "node_7").glob("*" + fmt.FILE_SUFFIX))
    assert (out / "node_7" / "notes.txt").read_text() == "mine"


# -- two Ray nodes on this machine -----------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_env(host: str) -> dict[str, str]:
    # A token left in ~/.ray by another cluster must not lock ours; no usage reports.
    return dict(os.environ, RLSCOPE_HOST=host, RAY_AUTH_MODE="disabled",
                RAY_USAGE_STATS_ENABLED="0")


class _Node:
    """``ray start --block``: the node lives as long as this process, which stops its own
    processes on SIGTERM (never ``ray stop``: that would stop every cluster here)."""

    def __init__(self, args: list[str], host: str, temp: Path) -> None:
        exe = Path(sys.executable).parent / "ray"
        self.temp = temp
        self.log = temp.with_suffix(".log")
        with open(self.log, "w") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                [str(exe), "start", "--block", "--num-cpus=1", f"--temp-dir={temp}",
                 f"--resources={json.dumps({host: 1})}", "--disable-usage-stats",
                 f"--dashboard-agent-listen-port={_free_port()}",
                 f"--metrics-export-port={_free_port()}", *args],
                env=_ray_env(host), stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        # Anything of this node still running (it was started for this test): by pid.
        for pid in _pids_using(str(self.temp)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _pids_using(marker: str) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if marker.encode() in cmd:
                out.append(int(d))
    return out


@pytest.fixture
def two_nodes() -> Iterator[str]:
    pytest.importorskip("ray")
    if not (Path(sys.executable).parent / "ray").exists():
        pytest.skip("the ray command is not installed beside this Python")
    base = Path(tempfile.mkdtemp(prefix="rls", dir="/tmp"))  # Ray's socket paths are short
    nodes: list[_Node] = []
    try:
        head = _Node(["--head", "--port=0", "--include-dashboard=false",
                      f"--ray-client-server-port={_free_port()}"], "node-a", base / "a")
        nodes.append(head)
        m = wait_until(lambda: head.proc.poll() is not None
                       or re.search(r"ray start --address='([^']+)'", head.output()),
                       "the Ray head node to start", timeout_s=180)
        assert head.proc.poll() is None, head.output()[-2000:]
        address = m.group(1)  # type: ignore[union-attr]
        worker = _Node([f"--address={address}"], "node-b", base / "b")
        nodes.append(worker)
        wait_until(lambda: worker.proc.poll() is not None
                   or "Ray runtime started" in worker.output(),
                   "the second Ray node to join", timeout_s=180)
        assert worker.proc.poll() is None, worker.output()[-2000:]
        yield address
    finally:
        for n in reversed(nodes):
            n.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_two_ray_nodes_one_run_one_clock(tmp_path: Path, two_nodes: str):
    out, stamps_file = tmp_path / "run", tmp_path / "stamps.json"
    env = dict(_ray_env("node-a"), RLSCOPE_HOST_DIRS="1")
    r = run_tool("rls-prof", "-o", str(out), "--", sys.executable, str(WORKLOAD), two_nodes,
                 str(stamps_file), env=env, timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads(stamps_file.read_text())
    assert {x["host"] for x in results} == {"node-a", "node-b"}
    assert all(x["recording"] for x in results), results
    worker_pids = {x["node"]: x["pid"] for x in results}

    def stamped() -> bool:  # the workers flushed, and may still be running
        try:
            a = load(out, correct=False)
        except Exception:
            return False
        ops = set(a.operations()["operation"])
        return {"stamp-node-a", "stamp-node-b"} <= ops

    wait_until(stamped, "both nodes' workers' stamp operations in the trace", timeout_s=120)
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["node-a", "node-b"]
    a = load(out, correct=False)
    tree = a.process_tree()
    host_of = dict(zip(tree["pid"], tree["host"], strict=True))
    assert host_of[worker_pids["node-a"]] == "node-a"
    assert host_of[worker_pids["node-b"]] == "node-b"
    hosts = a.hosts().set_index("host")
    assert hosts.loc["node-a", "reference"]  # the driver's host, where rls-prof ran
    clock = a.clock()
    ref = clock.hosts["node-a"]

    # Every stamp operation, placed on the run's clock, lies between the realtime
    # readings taken around it (mapped through the reference host's pair), within the
    # stated bound of its host, the reference pair's reading error and the realtime
    # clock's drift since the pairs were read (NTP slews it by at most 500 ppm).
    buf = io.StringIO()
    write_chrome_trace(timeline_plan(read_trace(out)), buf)
    doc = json.loads(buf.getvalue())
    origin = doc["otherData"]["origin_monotonic_ns"]
    begins: dict[int, list[int]] = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X" and e["name"].startswith("stamp-"):
            begins.setdefault(e["pid"], []).append(origin + round(e["ts"] * 1000))
    run_start_real = min(x["stamps"][0][0] for x in results)
    checked = 0
    for x in results:
        h = clock.hosts[x["node"]]
        own = sorted(begins[x["pid"]])
        for r0, r1 in x["stamps"]:
            slack = (h.error_ns + (ref.uncertainty_ns + 1) // 2 + ref.spread_ns
                     + 500e-6 * (r1 - run_start_real) + 1000)  # + timeline's rounding
            lo, hi = r0 - ref.offset_ns - slack, r1 - ref.offset_ns + slack
            assert any(lo <= b <= hi for b in own), (x["node"], r0, r1, own[:3], slack)
            checked += 1
    assert checked == 30
