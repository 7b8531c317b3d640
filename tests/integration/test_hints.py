"""Mistakes get the right hint: a forgotten ``--``, commands shown quoted on one line,
progress past its target, ``python -m`` processes named by their module, and a
misplaced ``pop_operation`` that behaves the same with and without a recording."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlscope.analysis.timeline.counters import CORES_PID
from rlscope.trace import format as fmt
from tests.conftest import run_tool


@pytest.mark.parametrize(("args", "said"), [
    (["python", "dqn.py", "--steps", "600"],
     "--steps comes after the command (python): put -- before the command to pass it on: "
     "rls-prof -o {out} -- python dqn.py --steps 600"),
    (["python", "dqn.py", "--force"],
     "or move --force before the command to give it to rls-prof"),
    (["python", "-u", "dqn.py"], "-u comes after the command (python)"),
])
def test_a_missing_separator_is_suggested(tmp_path: Path, args: list[str], said: str):
    out = tmp_path / "x"
    r = run_tool("rls-prof", "-o", str(out), *args)
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert said.format(out=out) in line, line
    assert not out.exists()  # nothing ran


def test_options_before_the_command_need_no_separator(tmp_path: Path):
    r = run_tool("rls-prof", "-o", str(tmp_path / "x"), "-q", sys.executable, WORK)
    assert r.returncode == 0, r.stderr


SCRIPT = "import rlscope\nfor i in range(3):\n    with rlscope.operation('step'): pass\n"
WORK = str(Path(__file__).parent / "workloads" / "loop.py")


def test_commands_are_shown_quoted_on_one_line(tmp_path: Path):
    out = tmp_path / "q"
    r = run_tool("rls-prof", "-o", str(out), "--", sys.executable, "-c", SCRIPT, "a b")
    assert r.returncode == 0, r.stderr
    rep = run_tool("rls-analyze", "report", str(out))
    assert rep.returncode == 0, rep.stderr
    (run_line,) = [x for x in rep.stdout.splitlines() if x.startswith("Run: ")]
    assert run_line == (f"Run: {sys.executable} -c $'import rlscope\\nfor i in range(3):\\n"
                        "    with rlscope.operation(\\'step\\'): pass\\n' 'a b'  "
                        "[succeeded, exit status 0]")
    dump = run_tool("rls-analyze", "dump", str(out), "--limit", "0")
    (argv_line,) = [x for x in dump.stdout.splitlines() if x.startswith("# argv ")]
    assert "$'import rlscope\\nfor" in argv_line
    # The quoting is bash's: the shown line runs the same command.
    r = subprocess.run(["bash", "-c", run_line[len("Run: "):].split("  [")[0]
                        + "; echo $?"], capture_output=True, text=True, timeout=120,
                       env={k: v for k, v in os.environ.items()
                            if not k.startswith("RLSCOPE_")})
    assert r.stdout.strip().endswith("0"), r.stderr


def test_progress_past_the_target_is_explained(tmp_path: Path):
    out = tmp_path / "p"
    code = ("import rlscope\nfor i in (2048, 4096, 6144):\n"
            "    with rlscope.operation('rollout'): pass\n"
            "    rlscope.report_progress(i, 5000)\n")
    assert run_tool("rls-prof", "-o", str(out), "--", sys.executable, "-c",
                    code).returncode == 0
    rep = run_tool("rls-analyze", "report", str(out))
    assert ("Progress: 6,144 timesteps, target of 5,000 reached (the last iteration ran "
            "1,144 past it)") in rep.stdout
    assert "122.9%" not in rep.stdout and "estimated full training run" not in rep.stdout
    doc = json.loads(run_tool("rls-analyze", "report", "--format", "json",
                              str(out)).stdout)
    assert doc["extrapolation"][0]["fraction_done"] == 1.0


def test_a_module_run_is_named_by_its_module(tmp_path: Path):
    out = tmp_path / "m"
    pkg = tmp_path / "src" / "algo"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ppo.py").write_text(SCRIPT)
    r = run_tool("rls-prof", "-o", str(out), "--", sys.executable, "-m", "algo.ppo",
                 "--seed", "1", cwd=tmp_path / "src")
    assert r.returncode == 0, r.stderr
    rep = run_tool("rls-analyze", "report", str(out))
    assert "Process " in rep.stdout and " -m algo.ppo --seed 1: " in rep.stdout
    dump = run_tool("rls-analyze", "dump", str(out), "--limit", "0")
    assert "process=-m algo.ppo " in dump.stdout
    tl = run_tool("rls-analyze", "timeline", str(out), "-o", str(tmp_path / "t.json"))
    assert tl.returncode == 0, tl.stderr
    ev = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    # (the sampler's run-wide counters, e.g. the cores, are processes of their own)
    (name,) = [e["args"]["name"] for e in ev if e["name"] == "process_name"
               and e["pid"] < CORES_PID]
    assert name.endswith(": -m algo.ppo --seed 1")


MISPLACED = ("import rlscope\n"
             "rlscope.pop_operation()\n"
             "rlscope.push_operation('a')\n"
             "rlscope.pop_operation('b')\n"
             "rlscope.pop_operation('a')\n"
             "print('survived')\n")


def test_a_misplaced_pop_behaves_the_same_with_and_without_a_recording(tmp_path: Path):
    plain = subprocess.run([sys.executable, "-c", MISPLACED], capture_output=True,
                           text=True, timeout=120,
                           env={k: v for k, v in os.environ.items()
                                if not k.startswith("RLSCOPE_")})
    assert plain.returncode == 0 and plain.stdout.strip() == "survived"
    assert plain.stderr == ""
    out = tmp_path / "pop"
    r = run_tool("rls-prof", "-o", str(out), "--", sys.executable, "-c", MISPLACED)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "survived"
    warned = [x for x in r.stderr.splitlines() if "RLScopeWarning" in x]
    assert len(warned) == 1  # once, for the first misplaced pop
    assert "pop_operation() without a matching push_operation" in warned[0]
    assert ":2: RLScopeWarning" in warned[0]  # the caller's line
    from rlscope.trace.reader import read_trace

    (p,) = read_trace(out).processes
    ops = [p.name_of(int(n)) for n, k in zip(p.events.name, p.events.kind, strict=True)
           if k in (fmt.OPERATION_BEGIN, fmt.OPERATION_END)]
    assert ops == ["a", "a"]  # the misplaced pops recorded nothing
