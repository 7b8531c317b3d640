"""Every process under rls-prof imports rlscope at start-up: it must stay free of the
offline side (numpy, pandas, protobuf, the trace reader, the analysis). Checked in fresh
interpreters, as a profiled process starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlscope.launch.child_env import Recording, profiled

FORBIDDEN = ("numpy", "pandas", "google.protobuf", "rlscope.trace.reader",
             "rlscope.trace.records", "rlscope.trace.data", "rlscope.analysis",
             "rlscope.calibration", "rlscope.reporters", "rlscope.trace.messages", "click",
             "psutil", "typing", "dataclasses", "json", "socket", "ctypes",
             "multiprocessing")
# The modules loaded so far, read before this snippet imports json to print them.
SHOW = "import sys; m = sorted(sys.modules); import json; print(json.dumps(m))"


def _modules(code: str, env: dict[str, str]) -> set[str]:
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return set(json.loads(r.stdout.splitlines()[-1]))


def _offending(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if any(m == f or m.startswith(f + ".") for f in FORBIDDEN))


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("RLSCOPE_")}


def test_import_rlscope_is_lean():
    mods = _modules("import rlscope\n" + SHOW, _clean_env())
    assert "rlscope.annotate" in mods
    assert _offending(mods) == []


@pytest.mark.parametrize("intercept", ["auto", "none"])
def test_profiled_process_start_up_is_lean(tmp_path: Path, intercept: str):
    env = profiled(Recording(str(tmp_path / "trace"), intercept=intercept), _clean_env())
    mods = _modules("import rlscope; assert rlscope.is_active()\n" + SHOW, env)
    assert "rlscope.inprocess.autostart" in mods and "rlscope._native" in mods
    assert ("rlscope.intercept" in mods) == (intercept == "auto")
    assert _offending(mods) == []
    assert list((tmp_path / "trace").glob("python.*.rlscope")), "the process recorded"
