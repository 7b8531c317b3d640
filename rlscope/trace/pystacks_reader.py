"""Read the Python stack samples of a run (``pystacks.<pid>.rlstacks``, written by
rlscope.inprocess.pysampler, whose docstring gives the line format)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rlscope.trace import format as fmt


@dataclass
class PyStacks:
    """One process's samples: each is (time, OS thread id, stack id)."""

    path: Path
    pid: int
    hz: float
    functions: list[tuple[str, int, str]]  # by id: (file, first line, qualified name)
    stacks: list[tuple[int, ...]]  # by id: function ids, outermost first
    time_ns: np.ndarray  # int64, CLOCK_MONOTONIC as the trace's events
    tid: np.ndarray  # int64 (negative: a thread the sampler could not name)
    stack: np.ndarray  # int32
    warnings: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.time_ns)


def stack_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The stack sample files of a run directory and of its host directories."""
    d = Path(directory)
    pattern = f"{fmt.SOURCE_STACKS}.*{fmt.STACKS_SUFFIX}"
    return sorted([*d.glob(pattern), *d.glob(f"*/{pattern}")])


def read_stacks(path: str | os.PathLike[str]) -> PyStacks:
    """A stack file; a torn last line (the process was killed) is dropped, any other
    malformed line skipped with one warning for the file."""
    p = Path(path)
    data = p.read_bytes()
    lines = data.split(b"\n")
    torn = lines.pop()  # b"" when the file ends with a newline
    functions: dict[int, tuple[str, int, str]] = {}
    stacks: dict[int, tuple[int, ...]] = {}
    t: list[int] = []
    tid: list[int] = []
    sid: list[int] = []
    pid, hz, bad = -1, 0.0, 0
    for raw in lines:
        f = raw.decode("utf-8", "replace").split("\t")
        try:
            tag = f[0]
            if tag == "s":
                t.append(int(f[1]))
                tid.append(int(f[2]))
                sid.append(int(f[3]))
            elif tag == "k":
                stacks[int(f[1])] = tuple(int(x) for x in reversed(f[2].split()))
            elif tag == "f":
                functions[int(f[1])] = (f[2], int(f[3]), f[4])
            elif tag == "rlstacks":
                pid, hz = int(f[2]), float(f[3])
            else:
                bad += 1
        except (IndexError, ValueError):
            bad += 1
    warnings = []
    if torn:
        warnings.append(f"{p.name}: a torn last line (the process was killed while writing "
                        "it) is left out")
    if bad:
        warnings.append(f"{p.name}: {bad} malformed line(s) left out")
    if pid < 0:
        pid = _pid_of(p)
    fn = [functions.get(i, ("?", 0, f"<function {i}>"))
          for i in range(max(functions, default=-1) + 1)]
    st = [stacks.get(i, ()) for i in range(max(stacks, default=-1) + 1)]
    s = np.array(sid, np.int32)
    ok = s < len(st)
    if not ok.all():
        warnings.append(f"{p.name}: {int((~ok).sum())} sample(s) of an undefined stack "
                        "left out")
    return PyStacks(p, pid, hz, fn, st, np.array(t, np.int64)[ok], np.array(tid, np.int64)[ok],
                    s[ok], warnings)


def _pid_of(p: Path) -> int:
    try:
        return int(p.name.split(".")[1])
    except (IndexError, ValueError):
        return -1


def sample_times(path: str | os.PathLike[str]) -> tuple[int, np.ndarray]:
    """(pid, the samples' times) of a stack file, without its stacks: what the overhead
    correction needs (kinds.PY_SAMPLE), found by a scan of the bytes (a day-long run
    holds millions of samples). A torn last line is left out."""
    p = Path(path)
    data = p.read_bytes()
    data = data[:data.rfind(b"\n") + 1]
    head = _HEAD.search(data)
    pid = int(head.group(1)) if head else _pid_of(p)
    return pid, np.array([int(t) for t in _SAMPLE.findall(data)], np.int64)


_HEAD = re.compile(rb"^rlstacks\t\d+\t(\d+)\t", re.M)
_SAMPLE = re.compile(rb"^s\t(\d+)\t-?\d+\t\d+$", re.M)
