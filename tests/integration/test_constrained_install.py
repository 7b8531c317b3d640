"""rlscope installs beside a pinned stack without upgrading it.

A wheel of this checkout goes into a fresh venv with the constraints old stacks pin
(TensorFlow 2.15: protobuf < 5 and numpy < 2; pandas < 2.2). pip must keep them (and
``pip check`` stay clean); recording with both recorders, ``rls-analyze`` and the
reader/report unit tests must work there.

The venv holds third-party packages only and is cached under build/constrained-install/,
keyed by pyproject.toml, the proto, the constraints and the Python version, so repeated
local runs are fast (CI starts from a clean checkout); rlscope itself is rebuilt and
reinstalled on every run. Other pins, e.g. the dependency floors:

    RLSCOPE_CONSTRAINTS="protobuf==3.20.0;numpy==1.23.2;pandas==1.5.0" \
        .venv/bin/python -m pytest tests/integration/test_constrained_install.py

Skips (with a warning) only when the package index cannot be reached.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import urllib.request
import warnings
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.conftest import REPO

pytestmark = pytest.mark.slow

DEFAULT_CONSTRAINTS = ["protobuf<5", "numpy<2", "pandas<2.2"]
# Installed beside rlscope to run its tests (and rls-analyze plot) in the venv.
TEST_PACKAGES = ["pytest", "hypothesis", "matplotlib"]
# Reader, analysis and report tests, plus both recorders' API and the wire encoder.
UNIT_TESTS = ["test_reader.py", "test_report.py", "test_wire.py", "test_api.py",
              "test_compare.py", "test_timeline.py", "test_overlap.py",
              "test_overlap_stream.py", "test_overlap_properties.py", "test_scopes.py",
              "test_correction.py", "test_utilisation.py"]
INTEGRATION_TESTS = ["test_analyze.py"]
CACHE = REPO / "build" / "constrained-install"
WORKLOAD = REPO / "tests" / "integration" / "workloads" / "loop.py"


def _constraints() -> list[str]:
    env = os.environ.get("RLSCOPE_CONSTRAINTS")
    if env:
        return [c.strip() for c in env.split(";") if c.strip()]
    return DEFAULT_CONSTRAINTS


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(OMP_NUM_THREADS="1", RLSCOPE_REQUIRE_NATIVE="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def _run(cmd: list[str], timeout: float = 300, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          timeout=timeout, env=_env(), **kw)


def _index_unreachable() -> str | None:
    """Why pip's package index cannot be reached, or None when it can."""
    url = os.environ.get("PIP_INDEX_URL")
    if not url:
        r = _run([sys.executable, "-m", "pip", "config", "get", "global.index-url"])
        url = r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else \
            "https://pypi.org/simple"
    try:
        urllib.request.urlopen(url.rstrip("/") + "/pip/", timeout=30).close()
    except Exception as e:
        return f"package index {url} is unreachable ({e})"
    return None


def _pip(python: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
    r = _run([python, "-m", "pip", "--disable-pip-version-check", *args], timeout=1200)
    if r.returncode != 0:
        why = _index_unreachable()
        if why:
            msg = f"{why}; cannot test installing rlscope beside pinned packages"
            warnings.warn(msg, stacklevel=2)
            pytest.skip(msg)
        pytest.fail(f"pip {' '.join(args)} failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    return r


def _have_build_tools() -> bool:
    return (all(importlib.util.find_spec(m) for m in ("scikit_build_core", "grpc_tools"))
            and bool(importlib.util.find_spec("cmake") or shutil.which("cmake")))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    args = ["wheel", "--no-deps", "-q", "-w", str(out)]
    if _have_build_tools():
        # This venv's build tools (scripts/setup.sh installs them) and a build directory
        # of the test's own, so rebuilds are incremental and leave build/<tag> alone.
        args += ["--no-build-isolation", "-C", f"build-dir={CACHE / 'wheel-build'}"]
    _pip(sys.executable, *args, str(REPO))
    (whl,) = out.glob("rlscope-*.whl")
    return whl


@pytest.fixture(scope="module")
def venv(wheel: Path) -> Path:
    constraints = _constraints()
    h = hashlib.sha256()
    for f in (REPO / "pyproject.toml", REPO / "proto" / "rlscope" / "trace.proto"):
        h.update(f.read_bytes())
    h.update(repr((constraints, TEST_PACKAGES, sys.version_info[:2])).encode())
    root = CACHE / f"venv-{h.hexdigest()[:12]}"
    python = root / "bin" / "python"
    done = root / "complete"  # written last: a venv without it was interrupted
    if done.exists():
        _pip(python, "install", "-q", "--no-deps", "--force-reinstall", str(wheel))
        return root
    for old in CACHE.glob("venv-*"):
        shutil.rmtree(old)
    r = _run([sys.executable, "-m", "venv", root])
    assert r.returncode == 0, r.stderr
    (root / "constraints.txt").write_text("\n".join(constraints) + "\n")
    _pip(python, "install", "-q", "-c", str(root / "constraints.txt"), str(wheel),
         *TEST_PACKAGES)
    done.write_text("\n".join(constraints) + "\n")
    return root


def test_pinned_versions_are_kept(venv: Path):
    python = venv / "bin" / "python"
    r = _run([python, "-m", "pip", "check"])
    assert r.returncode == 0, r.stdout + r.stderr
    constraints = [Requirement(c) for c in _constraints()]
    code = ("import importlib.metadata as m, json, sys; "
            "print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))")
    r = _run([python, "-c", code, "rlscope", *(c.name for c in constraints)])
    assert r.returncode == 0, r.stderr
    versions = json.loads(r.stdout)
    print("constrained install:", versions)  # shown with pytest -s
    for c in constraints:
        assert c.specifier.contains(versions[c.name], prereleases=True), (c, versions)


@pytest.mark.parametrize("recorder", ["native", "python"])
def test_record_and_analyze(venv: Path, tmp_path: Path, recorder: str):
    out = tmp_path / "trace"
    bin_ = venv / "bin"
    r = _run([bin_ / "rls-prof", "-o", out, "--recorder", recorder, "--",
              bin_ / "python", WORKLOAD, "--iterations", "50", "--fork"])
    assert r.returncode == 0, r.stderr
    r = _run([bin_ / "rls-analyze", "report", out])
    assert r.returncode == 0, r.stderr
    assert "inference" in r.stdout and f"{recorder} recorder" in r.stdout
    r = _run([bin_ / "rls-analyze", "report", "--format", "json", out])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {p["recorder"] for p in doc["processes"]} == {recorder}
    calls = {o["operation"]: o["calls"] for o in doc["operations"]}
    assert calls["inference"] == 50 and calls["child-op"] > 0
    r = _run([bin_ / "rls-analyze", "report", "--format", "csv", out])
    assert r.returncode == 0 and r.stdout.startswith("pid,process,phase,operation"), r.stderr
    r = _run([bin_ / "rls-analyze", "dump", "--limit", "10", out])
    assert r.returncode == 0, r.stderr
    assert f"recorder={recorder}" in r.stdout and "OPERATION_BEGIN" in r.stdout


def test_reader_and_report_tests_pass(venv: Path, tmp_path: Path):
    # A copy of the tests, so the checkout's rlscope/ (no native parts, not the wheel)
    # is not on the path.
    suite = tmp_path / "suite"
    shutil.copytree(REPO / "tests", suite / "tests",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (suite / "scripts" / "bench").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "bench" / "make_trace.py", suite / "scripts" / "bench")
    shutil.copy(REPO / "pyproject.toml", suite)  # the pytest settings
    tests = [f"tests/unit/{t}" for t in UNIT_TESTS]
    tests += [f"tests/integration/{t}" for t in INTEGRATION_TESTS]
    r = _run([venv / "bin" / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider",
              *tests], timeout=900, cwd=suite)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
