"""The start-up row: the main thread from recording start to the first user event, its
timed imports, and the time order of the report's rows (docs/analysis.md#start-up)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlscope.analysis import analyze, load
from rlscope.analysis.engine.synthetic import process_trace
from rlscope.reporters import table
from rlscope.trace import format as fmt
from rlscope.trace.data import Trace
from rlscope.trace.reader import read_trace

OB, OE = fmt.OPERATION_BEGIN, fmt.OPERATION_END
PB, PE = fmt.PHASE_BEGIN, fmt.PHASE_END
BB, BE = fmt.BACKEND_CALL_BEGIN, fmt.BACKEND_CALL_END
START, END = fmt.PROCESS_START, fmt.PROCESS_END
IMP = fmt.META_IMPORT_PREFIX


def run(*procs):
    return analyze(Trace(None, {}, list(procs)))  # type: ignore[arg-type]


def rows(a) -> dict[str, tuple[int, int, int]]:
    """operation -> (calls, wall ns, self ns), summed over phases."""
    g = a.operations().groupby("operation", sort=False)[["calls", "wall_s", "self_s"]].sum()
    return {k: (int(r.calls), round(r.wall_s * 1e9), round(r.self_s * 1e9))
            for k, r in g.iterrows()}


# Imports [5, 25) and [30, 40) (one nested in it), a backend call at module level [42,
# 45), the first operation at 50, an import after it (not start-up).
CASE = [(0, 0, START, ""), (42, 0, BB, "torch.zeros"), (45, 0, BE, "torch.zeros"),
        (50, 0, OB, "a"), (70, 0, OE, "a"), (100, 0, END, "")]
IMPORTS = {f"{IMP}torch": [5, 25], f"{IMP}gymnasium": [30, 40],
           f"{IMP}gymnasium.envs": [32, 36], f"{IMP}late": [80, 90]}


def test_startup_and_its_imports_are_rows_of_their_own():
    a = run(process_trace(CASE, metadata=IMPORTS))
    r = rows(a)
    assert r["(start-up)"] == (0, 50, 20)  # imports 20 (the nested one counts once)
    assert r["(start-up) > imports"] == (3, 30, 30)  # three timed imports began in it
    assert r["(unannotated)"] == (0, 30, 30)  # after the operation; the late import too
    assert r["a"] == (1, 20, 20)
    ops = a.operations()
    # The start-up's module-level backend call is its own, not unannotated.
    su = ops[ops["operation"] == "(start-up)"].iloc[0]
    assert su.backend_calls == 1 and round(su.backend_s * 1e9) == 3
    assert list(ops["operation"]) == ["(start-up)", "(start-up) > imports", "a",
                                      "(unannotated)"]
    assert list(ops["depth"]) == [0, 1, 0, 0]
    p = a.processes().iloc[0]
    assert round(p.startup_s * 1e9) == 50 and round(p.imports_s * 1e9) == 30
    assert not any(k.startswith(IMP) for k in p.metadata)  # rows, not metadata
    imp = a.imports()
    assert list(imp["module"]) == ["torch", "gymnasium", "gymnasium.envs"]
    assert [round(s * 1e9) for s in imp["seconds"]] == [20, 10, 4]
    # Not operations: no operation time, no top operation of the role.
    tree = a.process_tree().iloc[0]
    assert round(tree.operations_s * 1e9) == 20
    assert list(a.role_operations()["operation"]) == ["a"]


@pytest.mark.parametrize("first", [
    (PB, "training"), (fmt.PROGRESS, ""), (fmt.ENV_STEP_BEGIN, "CartPole-v1"),
    (fmt.ENV_RESET_BEGIN, "CartPole-v1")])
def test_any_user_event_ends_the_startup(first):
    kind, name = first
    a = run(process_trace([(0, 0, START, ""), (30, 0, kind, name), (100, 0, END, "")]))
    assert rows(a)["(start-up)"] == (0, 30, 30)
    assert rows(a)["(unannotated)"][1] == 70


def test_an_operation_on_another_thread_ends_it_and_calls_do_not():
    a = run(process_trace([(0, 0, START, ""), (10, 0, BB, "x"), (20, 0, BE, "x"),
                           (40, 1, OB, "w"), (60, 1, OE, "w"), (100, 0, END, "")]))
    assert rows(a)["(start-up)"] == (0, 40, 40)
    assert rows(a)["(unannotated)"][1] == 60


def test_no_user_event_no_startup():
    """A process that never announces any work (a helper) is all unannotated."""
    a = run(process_trace([(0, 0, START, ""), (10, 0, BB, "x"), (20, 0, BE, "x"),
                           (100, 0, END, "")], metadata={f"{IMP}json": [1, 5]}))
    assert set(rows(a)) == {"(unannotated)"}
    assert a.processes().iloc[0].startup_s == 0 and not len(a.imports())


def test_rows_are_in_time_order_across_phases():
    """Phases by first begin, operations outside phases where theirs began, siblings by
    first begin (not by name or by size), unannotated last in each group."""
    a = run(process_trace([
        (0, 0, START, ""), (10, 0, OB, "setup"), (15, 0, OE, "setup"),
        (20, 0, PB, "train"), (21, 0, OB, "zeta"), (22, 0, OB, "forward"),
        (30, 0, OE, "forward"), (31, 0, OE, "zeta"), (32, 0, OB, "alpha"),
        (33, 0, OB, "forward"), (40, 0, OE, "forward"), (41, 0, OE, "alpha"),
        (50, 0, PE, "train"), (50, 0, PB, "eval"), (51, 0, OB, "alpha"),
        (60, 0, OE, "alpha"), (61, 0, PE, "eval"), (100, 0, END, "")]))
    ops = a.operations()
    assert list(zip(ops["phase"], ops["operation"], strict=True)) == [
        ("", "(start-up)"), ("", "setup"), ("", "(unannotated)"),
        ("train", "zeta"), ("train", "zeta > forward"), ("train", "alpha"),
        ("train", "alpha > forward"), ("train", "(unannotated)"),
        ("eval", "alpha"), ("eval", "(unannotated)")]
    text = table.render(a, "text")
    assert text.index("(start-up)") < text.index("setup") < text.index("zeta") \
        < text.index("alpha")


def test_startup_survives_batches():
    """Fed in batches (as streaming does), the analysis is the same."""
    a = run(process_trace(CASE, metadata=IMPORTS))
    for batch in (1, 2, 3):
        b = analyze(Trace(None, {}, [process_trace(CASE, metadata=IMPORTS)]),  # type: ignore[arg-type]
                    batch_events=batch)
        assert rows(b) == rows(a)


def _record(tmp_path: Path, code: str, recorder: str = "native") -> Path:
    """Run ``code`` in a fresh interpreter under rls-prof's environment."""
    from rlscope.launch.child_env import Recording, profiled

    out = tmp_path / "trace"
    mods = tmp_path / "mods"
    mods.mkdir(exist_ok=True)
    # A module slow to import (busy for 0.15 s), and one it imports (nested: not a record).
    (mods / "slowmod.py").write_text(textwrap.dedent("""
        import time
        import slowdep
        t = time.perf_counter()
        while time.perf_counter() - t < 0.15:
            pass
    """))
    (mods / "slowdep.py").write_text("X = 1\n")
    env = profiled(Recording(str(out), recorder=recorder, intercept="none"))
    env["PYTHONPATH"] = f"{mods}:{env.get('PYTHONPATH', '')}"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return out


def test_recording_times_outermost_imports_of_the_recording_thread(tmp_path: Path,
                                                                   recorder: str):
    code = textwrap.dedent("""
        import threading, time
        t0 = time.monotonic_ns()
        import slowmod
        t1 = time.monotonic_ns()
        th = threading.Thread(target=lambda: __import__("wave"))  # another thread's
        th.start(); th.join()
        import rlscope
        with rlscope.operation("work"):
            pass
        print(t0, t1)
    """)
    out = _record(tmp_path, code, recorder)
    (p,) = read_trace(out).processes
    recs = {k[len(IMP):]: v for k, v in p.metadata.items() if k.startswith(IMP)}
    assert "slowmod" in recs and "slowdep" not in recs and "wave" not in recs
    a = load(out)
    imp = a.imports().set_index("module")["seconds"]
    assert imp["slowmod"] >= 0.15
    proc = a.processes().iloc[0]
    assert proc.imports_s >= 0.15 and proc.startup_s >= proc.imports_s
    doc = json.loads(table.render(a, "json"))
    names = [o["operation"] for o in doc["operations"]]
    assert names[:2] == ["(start-up)", "(start-up) > imports"]
