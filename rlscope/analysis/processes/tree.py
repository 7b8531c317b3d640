"""The process tree of a run and each process's role (docs/multiprocess.md).

Processes are told apart by their position in the run (a pid can be reused), and a
process's parent is the traced process with its parent pid that started last before it
(on the same host). Roles come from what the process recorded, else from its command
line, else from its place in the tree: the launcher's child is the main process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rlscope.analysis.processes import roles
from rlscope.trace import format as fmt

NO_PARENT = -1

# Where a role came from.
FROM_METADATA = "recorded"
FROM_COMMAND = "command line"
FROM_TREE = "process tree"


@dataclass(frozen=True)
class ProcessFacts:
    """What the tree needs of one process; ``start_ns`` on the run's clock."""

    pid: int
    ppid: int
    host: str
    start_ns: int
    argv: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Tree:
    parent: list[int]  # index of the parent in the run, NO_PARENT when not traced
    depth: list[int]
    order: list[int]  # indices in depth-first order (roots and siblings by start)


def build_tree(procs: Sequence[ProcessFacts]) -> Tree:
    by_pid: dict[tuple[str, int], list[int]] = {}
    for i, p in enumerate(procs):
        by_pid.setdefault((p.host, p.pid), []).append(i)
    parent = []
    for i, p in enumerate(procs):
        # A pid reused within the run: the parent is the latest one started at or before
        # the child (a process that started after the child cannot be its parent).
        cands = [j for j in by_pid.get((p.host, p.ppid), ()) if j != i
                 and procs[j].start_ns <= p.start_ns]
        parent.append(max(cands, key=lambda j: (procs[j].start_ns, j)) if cands
                      else NO_PARENT)
    _break_cycles(parent)
    children: dict[int, list[int]] = {}
    for i, pa in enumerate(parent):
        children.setdefault(pa, []).append(i)
    depth = [0] * len(procs)
    order: list[int] = []
    stack = sorted(children.get(NO_PARENT, []), key=lambda i: _start_key(procs, i),
                   reverse=True)
    while stack:
        i = stack.pop()
        order.append(i)
        kids = sorted(children.get(i, []), key=lambda j: _start_key(procs, j), reverse=True)
        for j in kids:
            depth[j] = depth[i] + 1
        stack.extend(kids)
    return Tree(parent, depth, order)


def _start_key(procs: Sequence[ProcessFacts], i: int) -> tuple[int, int, int]:
    return (procs[i].start_ns, procs[i].pid, i)


def _break_cycles(parent: list[int]) -> None:
    """Equal start times and reused pids could make a loop; its earliest member becomes
    a root so every process is reached from one."""
    state = [0] * len(parent)  # 0 unseen, 1 on the current walk, 2 done
    for i in range(len(parent)):
        walk = []
        j = i
        while j != NO_PARENT and state[j] == 0:
            state[j] = 1
            walk.append(j)
            j = parent[j]
        if j != NO_PARENT and state[j] == 1:  # back on this walk: a cycle
            loop = walk[walk.index(j):]
            parent[min(loop)] = NO_PARENT
        for k in walk:
            state[k] = 2


@dataclass(frozen=True)
class Role:
    role: str
    source: str


def assign_roles(procs: Sequence[ProcessFacts], tree: Tree,
                 launcher_pid: int | None) -> list[Role]:
    """Recorded role, else the command line's, else: the launcher's child (or, with no
    such process, the earliest process whose parent was not traced) is the main process;
    any other process is a subprocess."""
    out: list[Role | None] = []
    for p in procs:
        recorded = p.metadata.get(fmt.META_ROLE)
        if isinstance(recorded, str) and recorded:
            out.append(Role(recorded, FROM_METADATA))
            continue
        from_cmd = roles.role_from_command(roles.parse_command(p.argv))
        out.append(Role(from_cmd, FROM_COMMAND) if from_cmd else None)
    mains = [i for i, p in enumerate(procs) if out[i] is None and launcher_pid is not None
             and p.ppid == launcher_pid and tree.parent[i] == NO_PARENT]
    if not mains and not any(r is not None and r.role == fmt.ROLE_MAIN for r in out):
        roots = [i for i in tree.order if tree.parent[i] == NO_PARENT and out[i] is None]
        mains = roots[:1]
    for i in mains:
        out[i] = Role(fmt.ROLE_MAIN, FROM_TREE)
    roles_ = [r if r is not None else Role(fmt.ROLE_SUBPROCESS, FROM_TREE) for r in out]
    for i in sorted(range(len(procs)), key=lambda i: _start_key(procs, i)):
        j = previous_session(procs, i)
        if j is not None:  # the same process: what it was in its earlier session
            roles_[i] = roles_[j]
    return roles_


def session_number(p: ProcessFacts) -> int:
    """Which recording session of its process the trace is (0: the first), as recorded."""
    n = p.metadata.get(fmt.META_SESSION)
    return n if isinstance(n, int) and n > 0 else 0


def previous_session(procs: Sequence[ProcessFacts], i: int) -> int | None:
    """The process's earlier session that trace ``i`` continues (the latest trace of the
    same pid and host started before it), when ``i`` says it is a later session."""
    p = procs[i]
    if not session_number(p):
        return None
    cands = [j for j, q in enumerate(procs) if j != i and q.pid == p.pid
             and q.host == p.host and q.start_ns <= p.start_ns]
    return max(cands, key=lambda j: _start_key(procs, j)) if cands else None


def forked(procs: Sequence[ProcessFacts], tree: Tree, i: int) -> bool:
    """Whether process ``i`` has its parent's command line: a fork without exec."""
    pa = tree.parent[i]
    return pa != NO_PARENT and bool(procs[i].argv) and procs[i].argv == procs[pa].argv
