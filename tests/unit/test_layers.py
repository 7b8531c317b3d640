"""The package's layers (docs/architecture.md): dependencies point one way, and no module
reaches into another package's private names. Read from the source with ast, so lazy
imports inside functions count too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "rlscope"

# importer prefix -> rlscope modules it must never import (prefixes)
FORBIDDEN = {
    "rlscope.trace": ("rlscope.analysis", "rlscope.calibration", "rlscope.launch",
                      "rlscope.reporters", "rlscope.cli", "rlscope.annotate",
                      "rlscope.intercept"),
    "rlscope.analysis": ("rlscope.calibration", "rlscope.launch", "rlscope.reporters",
                         "rlscope.cli"),
    "rlscope.reporters": ("rlscope.calibration", "rlscope.launch", "rlscope.cli"),
    "rlscope.calibration": ("rlscope.reporters", "rlscope.cli"),
    "rlscope.launch": ("rlscope.calibration", "rlscope.analysis", "rlscope.reporters",
                       "rlscope.cli", "rlscope.trace.reader", "rlscope.trace.records",
                       "rlscope.trace.data"),
    "rlscope.annotate": ("rlscope.analysis", "rlscope.calibration", "rlscope.launch",
                         "rlscope.reporters", "rlscope.cli", "rlscope.intercept",
                         "rlscope.trace.reader"),
    "rlscope.recorder": ("rlscope.analysis", "rlscope.calibration", "rlscope.launch",
                         "rlscope.cli", "rlscope.trace.reader", "rlscope.intercept"),
    "rlscope.intercept": ("rlscope.analysis", "rlscope.calibration", "rlscope.launch",
                          "rlscope.reporters", "rlscope.cli", "rlscope.trace.reader"),
    "rlscope.integrations": ("rlscope.analysis", "rlscope.calibration", "rlscope.launch",
                             "rlscope.reporters", "rlscope.cli", "rlscope.trace.reader"),
}
# Private modules that are the package's own boundary, importable from anywhere.
SHARED_PRIVATE = {"rlscope._native", "rlscope._version", "rlscope._bootstrap"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package(name: str) -> str:
    return ".".join(name.split(".")[:2])


def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for every rlscope import."""
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names if a.name.startswith("rlscope")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.startswith("rlscope"):
            out.append((node.module, [a.name for a in node.names], node.lineno))
    return out


SOURCES = sorted(p for p in ROOT.rglob("*.py") if p.name != "_descriptor.py")


def test_the_sources_are_found():
    names = {_module_name(p) for p in SOURCES}
    assert {"rlscope.annotate", "rlscope.launch.child_env", "rlscope.trace.records",
            "rlscope.analysis.overhead.model"} <= names


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_dependencies_point_one_way(path: Path):
    me = _module_name(path)
    rules = [bad for prefix, bad in FORBIDDEN.items()
             if me == prefix or me.startswith(prefix + ".")]
    for module, names, line in _imports(path):
        targets = [module] + [f"{module}.{n}" for n in names]
        for bad in (b for r in rules for b in r):
            hit = [t for t in targets if t == bad or t.startswith(bad + ".")]
            assert not hit, f"{me} (line {line}) imports {hit[0]}: against the layering"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_names_of_another_package(path: Path):
    me = _module_name(path)
    for module, names, line in _imports(path):
        for target in [module] + [f"{module}.{n}" for n in names]:
            shared = any(target == s or target.startswith(s + ".") for s in SHARED_PRIVATE)
            if shared or _package(target) == _package(me):
                continue
            private = [p for p in target.split(".")[1:] if p.startswith("_")
                       and not p.startswith("__")]
            assert not private, f"{me} (line {line}) reaches into {target}"


def test_module_level_imports_have_no_cycles():
    graph: dict[str, set[str]] = {}
    names = {_module_name(p) for p in SOURCES}
    for p in SOURCES:
        tree = ast.parse(p.read_text())
        deps: set[str] = set()
        for node in tree.body:  # module level only: lazy imports may point back
            mods: list[str] = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                mods = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            deps |= {m for m in mods if m in names}
        graph[_module_name(p)] = deps - {_module_name(p)}
    seen: dict[str, int] = {}  # 1: on the stack, 2: done

    def visit(n: str, stack: list[str]) -> None:
        seen[n] = 1
        for d in graph.get(n, ()):
            if seen.get(d) == 1:
                cycle = [*stack[stack.index(d):], d] if d in stack else [n, d]
                # A package's __init__ importing its own submodules is not a cycle.
                if not all(c.startswith(cycle[0] + ".") or cycle[0].startswith(c + ".")
                           for c in cycle[1:-1]):
                    raise AssertionError("import cycle: " + " -> ".join(cycle))
            elif d not in seen:
                visit(d, [*stack, d])
        seen[n] = 2

    for n in sorted(graph):
        if n not in seen:
            visit(n, [n])
