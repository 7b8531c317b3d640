"""The multiprocessing integration: what each child records about itself."""

from __future__ import annotations

import multiprocessing.pool
import subprocess
import sys
import textwrap
from concurrent.futures import process as cf_process
from pathlib import Path
from types import SimpleNamespace

from rlscope.analysis.overhead.kinds import PROCESS, count_process
from rlscope.integrations import mp
from rlscope.trace import format as fmt
from rlscope.trace.reader import read_trace


def work() -> None:
    pass


class Custom(multiprocessing.Process):
    def run(self) -> None:
        pass


def test_child_metadata_names_the_role_and_target():
    pool = mp.child_metadata(SimpleNamespace(_target=multiprocessing.pool.worker,
                                             name="ForkPoolWorker-3"))
    assert pool == {fmt.META_ROLE: fmt.ROLE_POOL_WORKER, fmt.META_MP_NAME: "ForkPoolWorker-3",
                    fmt.META_MP_TARGET: "multiprocessing.pool:worker",
                    fmt.META_ROLE_DETAIL: "multiprocessing.Pool"}
    ex = mp.child_metadata(SimpleNamespace(_target=cf_process._process_worker, name="p"))
    assert ex[fmt.META_ROLE] == fmt.ROLE_POOL_WORKER
    assert ex[fmt.META_ROLE_DETAIL] == "ProcessPoolExecutor"
    plain = mp.child_metadata(SimpleNamespace(_target=work, name="SpawnProcess-1"))
    assert plain[fmt.META_ROLE] == fmt.ROLE_MP_PROCESS
    assert plain[fmt.META_MP_TARGET] == f"{__name__}:work"
    sub = mp.child_metadata(Custom())
    assert sub[fmt.META_MP_TARGET] == f"{__name__}:Custom"


def test_helper_role_from_the_code_it_runs():
    assert mp.helper_role(["python", "-B", "-c", "from multiprocessing.forkserver import "
                           "main; main(1, 2)"]) == fmt.ROLE_FORKSERVER
    assert mp.helper_role(["python", "-c", "from multiprocessing.resource_tracker import "
                           "main;main(12)"]) == fmt.ROLE_RESOURCE_TRACKER
    assert mp.helper_role(["python", "train.py"]) is None
    assert mp.helper_role(["python", "-c"]) is None


def test_forked_children_record_their_role(tmp_path: Path, recorder: str):
    code = textwrap.dedent(f"""
        import multiprocessing as mp, rlscope
        from rlscope import intercept
        rlscope.start({str(tmp_path / 't')!r}, recorder={recorder!r})
        intercept.enable("multiprocessing")
        def f(x=0):
            return x
        if __name__ == "__main__":
            ctx = mp.get_context("fork")
            p = ctx.Process(target=f, name="solo")
            p.start(); p.join()
            with ctx.Pool(1) as pool:
                assert pool.map(f, [1, 2]) == [1, 2]
                pool.close(); pool.join()
            rlscope.stop()
            print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    md = {p.pid: p.metadata for p in read_trace(tmp_path / "t").processes}
    roles = sorted(m.get(fmt.META_ROLE, "-") for m in md.values())
    assert roles == ["-", fmt.ROLE_MP_PROCESS, fmt.ROLE_POOL_WORKER]
    solo = next(m for m in md.values() if m.get(fmt.META_MP_NAME) == "solo")
    assert solo[fmt.META_MP_TARGET] == "__main__:f"
    # Forked children are marked as such and charged no start-up by overhead correction
    # (they inherit the parent's interpreter and rlscope set-up); the parent is.
    procs = read_trace(tmp_path / "t").processes
    forked = {p.pid: fmt.META_FORKED in p.metadata for p in procs}
    assert sorted(forked.values()) == [False, True, True]
    assert {p.pid: count_process(p)[PROCESS] for p in procs} == \
        {pid: int(not f) for pid, f in forked.items()}
