"""One name per process everywhere (docs/multiprocess.md): a multiprocessing worker
started with spawn runs ``python -c ...``, yet the process tree, the utilisation table,
the operations table, the diagnosis, the plot legend and the timeline all call it by
what it runs (``spin [SpawnProcess-1]``), never ``python -c``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import rlscope.analysis
from rlscope.trace import format as fmt
from tests.conftest import run_tool, wait_until

WORKLOADS = Path(__file__).parent / "workloads"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, rlscope.analysis.Analysis]:
    out = tmp_path_factory.mktemp("names") / "run"
    r = run_tool("rls-prof", "-o", str(out), "-q", "--sample-hz", "50", "--",
                 sys.executable, str(WORKLOADS / "mp_named.py"), timeout=300)
    assert r.returncode == 0, r.stderr

    def complete() -> rlscope.analysis.Analysis | None:
        a = rlscope.analysis.load(out)
        return a if a.processes()["complete"].all() else None

    return out, wait_until(complete, "every process of the run to stop recording")


def _worker(a: rlscope.analysis.Analysis) -> tuple[int, str]:
    tree = a.process_tree()
    (w,) = tree[tree["role"] == fmt.ROLE_MP_PROCESS].itertuples()
    assert " -c " in f"{w.command} "  # a bare program name would be "python -c"
    return int(w.pid), str(w.name)


def test_every_table_names_the_worker_as_the_process_tree_does(run):
    _, a = run
    pid, name = _worker(a)
    assert name.startswith("spin [SpawnProcess-")
    procs = a.processes()
    assert list(procs[procs["pid"] == pid]["process"]) == [name]
    ops = a.operations()
    assert set(ops[ops["pid"] == pid]["process"]) == {name}
    assert "spin-step" in set(ops[ops["pid"] == pid]["operation"])
    util = a.utilisation()
    mine = util[util["pid"] == pid]
    assert len(mine) and set(mine["process"]) == {name}
    assert set(a.breakdown()[lambda d: d["pid"] == pid]["process"]) == {name}
    # Every process: the tables' name is the tree's.
    tree = a.process_tree().set_index("index")
    assert list(procs["process"]) == [tree.loc[i, "name"] for i in range(len(procs))]


def test_reports_say_the_same_name(run, tmp_path: Path):
    out, a = run
    pid, name = _worker(a)
    rep = run_tool("rls-analyze", "report", "--format", "json", str(out))
    assert rep.returncode == 0, rep.stderr
    d = json.loads(rep.stdout)
    assert {r["process"] for r in d["utilisation"]["rows"] if r["pid"] == pid} == {name}
    assert {r["process"] for r in d["operations"] if r["pid"] == pid} == {name}
    assert [r["name"] for r in d["process_tree"] if r["pid"] == pid] == [name]
    text = run_tool("rls-analyze", "report", str(out)).stdout
    assert f"{name} ({pid})" in text  # the utilisation table's row
    assert f"Process {pid} {name} (" in text  # the operations table's title
    assert "python -c" not in text and "-c (" not in text
    r = run_tool("rls-analyze", "timeline", str(out), "-o", str(tmp_path / "tl.json"))
    assert r.returncode == 0, r.stderr
    events = json.loads((tmp_path / "tl.json").read_text())["traceEvents"]
    labels = {e["pid"]: e["args"]["name"] for e in events
              if e.get("ph") == "M" and e["name"] == "process_name"}
    assert labels[pid].endswith(f": {name}")


def test_plot_legend_says_the_same_name(run, tmp_path: Path):
    pytest.importorskip("matplotlib")
    out, a = run
    pid, name = _worker(a)
    r = run_tool("rls-analyze", "plot", str(out), "-o", str(tmp_path), "--format", "svg")
    assert r.returncode == 0, r.stderr
    svg = (tmp_path / "utilisation.svg").read_text()
    assert f"{name} ({pid})" in svg and "python -c" not in svg
