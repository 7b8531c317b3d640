"""What each process of a run is: its role and a name a user recognises, from what the
process recorded (metadata) and, for older traces or processes that died early, from its
command line (docs/multiprocess.md). Pure functions of header fields and metadata."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from rlscope.trace import format as fmt

# Interpreter options that take a value (``-W error``, ``-X dev``); others are flags.
_OPTIONS_WITH_VALUE = frozenset("WXQ")
_LONG_WITH_VALUE = frozenset({"--check-hash-based-pycs"})
_PYTHON = re.compile(r"python[\d.]*[dmu]?(\.exe)?$")
MAX_NAME = 60  # characters of a display name
# Ray's Python programs, by the end of their script's path: its workers, and its services
# (started by ``ray.init``/``ray start``; any other script of the ray package is a helper).
RAY_WORKER_SCRIPT = "ray/_private/workers/default_worker.py"
RAY_HELPERS = {
    "ray/dashboard/dashboard.py": "ray dashboard",
    "ray/dashboard/agent.py": "ray dashboard agent",
    "ray/_private/runtime_env/agent/main.py": "ray runtime env agent",
    "ray/_private/log_monitor.py": "ray log monitor",
    "ray/autoscaler/_private/monitor.py": "ray autoscaler monitor",
}
_RAY_PACKAGE = re.compile(r"(^|/)ray/(_private|dashboard|autoscaler|util|serve|_raylet)/")


@dataclass(frozen=True)
class Command:
    """A Python command line, parsed: ``kind`` is "script", "module", "code", "stdin" or
    "other" (not a Python interpreter's argv); ``target`` the script, module or code."""

    kind: str
    target: str
    args: tuple[str, ...]


def parse_command(argv: tuple[str, ...] | list[str]) -> Command:
    if not argv or not _PYTHON.match(os.path.basename(argv[0])):
        return Command("other", " ".join(argv), ())
    i = 1
    while i < len(argv):
        a = argv[i]
        if a in ("-c", "-m"):
            if i + 1 >= len(argv):
                break
            return Command("code" if a == "-c" else "module", argv[i + 1],
                           tuple(argv[i + 2:]))
        if a.startswith("-c") or a.startswith("-m"):  # -cCODE, -mmodule
            return Command("code" if a[1] == "c" else "module", a[2:], tuple(argv[i + 1:]))
        if a == "-":
            return Command("stdin", "-", tuple(argv[i + 1:]))
        if a == "--":
            i += 1
            break
        if a in _LONG_WITH_VALUE:
            i += 2
            continue
        if a.startswith("-") and len(a) > 1:
            i += 2 if a[-1] in _OPTIONS_WITH_VALUE and not a.startswith("--") else 1
            continue
        break
    if i < len(argv):
        return Command("script", argv[i], tuple(argv[i + 1:]))
    return Command("stdin", "-", ())


def role_from_command(cmd: Command) -> str | None:
    """The roles a command line shows: multiprocessing's helpers and spawned children,
    Ray's workers and services."""
    if cmd.kind == "script":
        ray = ray_program(cmd.target)
        if ray is not None:
            return fmt.ROLE_RAY_WORKER if ray == "ray worker" else fmt.ROLE_RAY_HELPER
    if cmd.kind == "code":
        for start, role in fmt.MP_HELPER_CODE.items():
            if cmd.target.startswith(start):
                return role
        if cmd.target.startswith(fmt.MP_SPAWN_CODE):
            return fmt.ROLE_MP_PROCESS
    if "--multiprocessing-fork" in cmd.args:
        return fmt.ROLE_MP_PROCESS
    return None


def ray_program(script: str) -> str | None:
    """"ray worker", the name of a Ray service, or None: not one of Ray's programs."""
    path = script
    if path.endswith(RAY_WORKER_SCRIPT):
        return "ray worker"
    for end, name in RAY_HELPERS.items():
        if path.endswith(end):
            return name
    if _RAY_PACKAGE.search(path):
        return f"ray {os.path.basename(path).removesuffix('.py')}"
    return None


def ray_info(metadata: dict[str, Any]) -> dict[str, Any]:
    """The process's Ray identity (format.META_RAY), or {}."""
    info = metadata.get(fmt.META_RAY)
    return info if isinstance(info, dict) else {}


def role_label(role: str, metadata: dict[str, Any]) -> str:
    """The role as shown: a vector-env worker with its env index and the number of envs;
    a Ray actor with its class; the main process that drives a Ray job."""
    ray = ray_info(metadata)
    if role == fmt.ROLE_RAY_ACTOR and ray.get("actor_class"):
        return f"{role} ({ray['actor_class']})"
    if role == fmt.ROLE_MAIN and ray.get("kind") == "driver":
        return f"{role} (ray driver)"
    if role != fmt.ROLE_VECENV_WORKER:
        return role
    index, n = metadata.get(fmt.META_ENV_INDEX), metadata.get(fmt.META_NUM_ENVS)
    if isinstance(index, list) and index and all(isinstance(i, int) for i in index):
        which = (f"envs {min(index)}-{max(index)}" if len(index) > 1 else f"env {index[0]}")
    elif isinstance(index, int):
        which = f"env {index}"
    else:
        return role
    return f"{role} ({which} of {n})" if isinstance(n, int) else f"{role} ({which})"


def display_name(argv: tuple[str, ...] | list[str], metadata: dict[str, Any],
                 forked: bool = False, fallback: str = "") -> str:
    """A useful name for the process: the script or module and its arguments, what a
    multiprocessing child runs (and its multiprocessing name), the helper's name; never
    a bare ``python -c``. ``forked``: the process shares its parent's command line (a
    fork without exec), which then says nothing about it. ``fallback``: the name when
    neither the command line nor the metadata says anything (no argv recorded): the
    header's process name."""
    ray = _ray_name(ray_info(metadata))
    if ray:
        return _clip(ray)
    target = metadata.get(fmt.META_MP_TARGET)
    mp_name = metadata.get(fmt.META_MP_NAME)
    if isinstance(target, str) and target:
        name = _short_target(target)
        return _clip(f"{name} [{mp_name}]" if isinstance(mp_name, str) else name)
    cmd = parse_command(argv)
    role = role_from_command(cmd)
    if role in (fmt.ROLE_FORKSERVER, fmt.ROLE_RESOURCE_TRACKER):
        return f"multiprocessing {role}"
    if role == fmt.ROLE_RAY_WORKER:
        return "ray worker (ran no task)"
    if role == fmt.ROLE_RAY_HELPER:
        return ray_program(cmd.target) or "ray helper"
    if role == fmt.ROLE_MP_PROCESS:
        base = "multiprocessing spawn child"
    elif cmd.kind == "script":
        base = " ".join([os.path.basename(cmd.target), *cmd.args])
    elif cmd.kind == "module":
        base = " ".join(["-m", cmd.target, *cmd.args])
    elif cmd.kind == "code":
        first = cmd.target.strip().splitlines()[0] if cmd.target.strip() else ""
        base = f"-c {first!r}"
    elif cmd.kind == "stdin":
        base = "python (stdin)"
    else:
        base = cmd.target or fallback or "?"
    if isinstance(mp_name, str):
        base = f"{base} [{mp_name}]"
    return _clip(base + (" (forked)" if forked else ""))


def _ray_name(ray: dict[str, Any]) -> str:
    """An actor by its class and id (``Worker actor 3f2a9c1e``), a task worker by the
    remote functions it ran."""
    if ray.get("kind") == "actor":
        aid = ray.get("actor_id")
        return f"{ray.get('actor_class', '?')} actor" + (f" {aid[:8]}" if isinstance(aid, str)
                                                          and aid else "")
    if ray.get("kind") == "task":
        tasks = ray.get("tasks")
        if isinstance(tasks, list) and tasks:
            return "ray tasks: " + ", ".join(str(t) for t in tasks)
    return ""


def _short_target(target: str) -> str:
    """``pkg.sub.subproc_vec_env:_worker`` -> ``subproc_vec_env._worker``; a function of
    the main script by its own name."""
    module, sep, qualname = target.partition(":")
    if not sep:
        return target
    if module in ("__main__", "__mp_main__"):  # the main script (as spawn imports it)
        return qualname
    return f"{module.rpartition('.')[2]}.{qualname}"


def _clip(s: str) -> str:
    return s if len(s) <= MAX_NAME else s[:MAX_NAME - 1] + "…"
