"""A forked child's trace starts with no open scopes: scopes the parent had open at the
fork are not the child's, and leaving them in the child records nothing and raises
nothing (both recorders)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import rlscope
from rlscope import annotate
from rlscope.trace import format as fmt
from rlscope.trace.reader import read_trace

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _child(body) -> None:
    """Run ``body`` in a forked child (recording continues there); assert it exited 0."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            body()
            rlscope.stop()
            code = 0
        except BaseException as e:  # pragma: no cover - reported by the exit status
            print(f"child failed: {e!r}", file=sys.stderr)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _kinds_names(directory: Path, pid_is_parent: bool) -> list[tuple[str, str]]:
    me = os.getpid()
    (p,) = [p for p in read_trace(directory).processes if (p.pid == me) == pid_is_parent]
    return [(fmt.KIND_NAMES[int(k)], p.strings[int(n)] if n else "")
            for k, n in zip(p.events.kind, p.events.name, strict=True)]


def test_inherited_scopes_close_silently(recording: Path):
    outer = rlscope.operation("outer")

    def child() -> None:
        assert rlscope.current_operations() == []
        with rlscope.operation("child_work"):
            assert rlscope.current_operations() == ["child_work"]
        rlscope.pop_operation("pushed")  # the parent's push: silent
        outer.__exit__(None, None, None)  # the parent's with-block: silent
        with rlscope.phase("p"):
            pass

    with outer:
        rlscope.push_operation("pushed")
        _child(child)
        rlscope.pop_operation("pushed")
    rlscope.stop()
    assert _kinds_names(recording, pid_is_parent=False) == [
        ("PROCESS_START", ""), ("OPERATION_BEGIN", "child_work"),
        ("OPERATION_END", "child_work"), ("PHASE_BEGIN", "p"), ("PHASE_END", "p"),
        ("PROCESS_END", "")]
    parent = [e for e in _kinds_names(recording, pid_is_parent=True)
              if e[0].startswith("OPERATION")]
    assert parent == [("OPERATION_BEGIN", "outer"), ("OPERATION_BEGIN", "pushed"),
                      ("OPERATION_END", "pushed"), ("OPERATION_END", "outer")]


def test_child_scopes_left_open_inside_an_inherited_one_still_error(
        recording: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(annotate, "_pop_warned", False)  # (the child's first misplaced pop)
    outer = rlscope.operation("outer")

    def child() -> None:
        rlscope.push_operation("mine")
        with pytest.raises(rlscope.RLScopeError, match="still open"):
            outer.__exit__(None, None, None)
        with pytest.warns(rlscope.RLScopeWarning, match="without a matching push"):
            rlscope.pop_operation("other")

    with outer:
        rlscope.push_operation("other")
        _child(child)
        rlscope.pop_operation("other")
    rlscope.stop()
    child_ops = [e for e in _kinds_names(recording, pid_is_parent=False)
                 if e[0].startswith("OPERATION")]
    assert child_ops == [("OPERATION_BEGIN", "mine"), ("OPERATION_END", "mine")]
