"""rls-analyze compare on real multi-process runs: rows per process role (the main
process, multiprocessing processes, pool workers), idle helpers (forkserver, resource
tracker) left out, and no phase needed (the workload has none)."""

from __future__ import annotations

import json
from pathlib import Path

from rlscope.trace import format as fmt
from tests.conftest import run_tool
from tests.integration.test_multiprocess import record


def test_compare_two_multiprocess_runs_per_role(tmp_path: Path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        a = record(d, "multiproc.py", "forkserver")
        tree = a.process_tree()
        assert set(tree.loc[tree["idle_helper"], "role"]) >= {fmt.ROLE_FORKSERVER}
        assert set(a.operations()["phase"]) == {""}  # no phase in this workload
    r = run_tool("rls-analyze", "compare", *map(str, dirs), "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    roles = list(dict.fromkeys(row["role"] for row in rows))
    assert roles[0] == fmt.ROLE_MAIN
    assert {fmt.ROLE_MAIN, fmt.ROLE_MP_PROCESS, fmt.ROLE_POOL_WORKER} <= set(roles)
    assert not {fmt.ROLE_FORKSERVER, fmt.ROLE_RESOURCE_TRACKER} & set(roles)
    keys = {(row["role"], row["key"]) for row in rows}
    assert (fmt.ROLE_MAIN, "parent") in keys
    assert (fmt.ROLE_MP_PROCESS, "worker-step") in keys
    assert (fmt.ROLE_POOL_WORKER, "task:work > worker-step") in keys
    mp_rows = [row for row in rows if row["role"] == fmt.ROLE_MP_PROCESS]
    assert {row["processes"] for row in mp_rows} == {2}  # the two workers summed
    # The text: grouped by role, main first, and one line on what was left out.
    r = run_tool("rls-analyze", "compare", *map(str, dirs))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[2] == "main (1 process)"
    left = [ln for ln in lines if ln.startswith("Left out: idle helper processes")]
    assert len(left) == 1 and fmt.ROLE_FORKSERVER in left[0]
    # One role; a phase the runs lack is one line naming what they have.
    r = run_tool("rls-analyze", "compare", *map(str, dirs), "--role", fmt.ROLE_MP_PROCESS,
                 "--format", "json")
    assert r.returncode == 0, r.stderr
    assert {row["role"] for row in json.loads(r.stdout)} == {fmt.ROLE_MP_PROCESS}
    r = run_tool("rls-analyze", "compare", *map(str, dirs), "--phase", "training")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "no phase 'training': it has no phases" in r.stderr
