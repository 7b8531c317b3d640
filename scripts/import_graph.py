#!/usr/bin/env python3
"""Print rlscope's import graph between packages (analysis by subpackage), counting imports
inside functions: what docs/architecture.md's layer picture is drawn from."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "rlscope"
SPLIT = {"analysis"}  # packages shown by subpackage


def group(module: str) -> str:
    parts = module.split(".")
    if len(parts) < 2:
        return "rlscope"
    if parts[1] in SPLIT and len(parts) > 2 and (ROOT / parts[1] / parts[2]).is_dir():
        return f"{parts[1]}.{parts[2]}"
    return parts[1]


def _is_module(name: str) -> bool:
    p = ROOT.parent.joinpath(*name.split("."))
    return p.with_suffix(".py").exists() or p.is_dir()


def main() -> None:
    edges: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        me = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        me = me.removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # ``from rlscope.x import y``: the module y when it is one, else rlscope.x
                names = [f"{node.module}.{a.name}" if _is_module(f"{node.module}.{a.name}")
                         else node.module for a in node.names]
            for m in names:
                if m.startswith("rlscope") and group(m) != group(me):
                    edges.setdefault(group(me), set()).add(group(m))
    for g in sorted(edges):
        sys.stdout.write(f"{g} -> {', '.join(sorted(edges[g]))}\n")


if __name__ == "__main__":
    main()
