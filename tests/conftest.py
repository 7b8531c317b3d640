"""Shared fixtures: both recorders, and running the command-line tools in a subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

import rlscope

# A test run started in the background by a non-interactive shell (`cmd &`, as CI harnesses
# and `nohup` do) inherits SIGINT ignored, and so would every process the tests start: the
# Ctrl-C tests could not interrupt anything. A handler (unlike an ignore) is reset to the
# default at exec, so the processes the tests start get Ctrl-C as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parent.parent
T = TypeVar("T")


def _native_available() -> bool:
    try:
        from rlscope import _native  # noqa: F401
    except ImportError:
        if os.environ.get("RLSCOPE_REQUIRE_NATIVE") == "1":
            raise
        return False
    return True


RECORDERS = ["native", "python"] if _native_available() else ["python"]


@pytest.fixture(params=RECORDERS)
def recorder(request: pytest.FixtureRequest) -> str:
    """Each test using this runs once per recorder: the native one and its Python oracle."""
    return request.param


@pytest.fixture
def recording(tmp_path: Path, recorder: str):
    """An active in-process recording; yields its directory and stops it afterwards."""
    out = tmp_path / "trace"
    rlscope.start(out, recorder=recorder)
    try:
        yield out
    finally:
        rlscope.stop()


def run_tool(tool: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120,
             cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run rls-prof or rls-analyze through the current interpreter."""
    module = {"rls-prof": "rlscope.cli.prof", "rls-analyze": "rlscope.cli.analyze"}[tool]
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=cwd)


@pytest.fixture(scope="session")
def trace_proto(tmp_path_factory: pytest.TempPathFactory):
    """proto/rlscope/trace.proto compiled by protoc: its FileDescriptorProto (the schema
    itself, whatever Python module the package loads its messages from)."""
    pytest.importorskip("grpc_tools")
    from google.protobuf import descriptor_pb2

    out = tmp_path_factory.mktemp("proto") / "trace.desc"
    r = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{REPO / 'proto'}",
                        f"--descriptor_set_out={out}", "rlscope/trace.proto"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    (f,) = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    return f


def wait_until(predicate: Callable[[], T], what: str, timeout_s: float = 120,
               interval_s: float = 0.05) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that. Tests wait
    this way, never by sleeping a fixed time: CI shares two cores with other work, so
    anything may take many times longer than on an idle machine. Fails the test, saying
    ``what`` was awaited, after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(interval_s)
