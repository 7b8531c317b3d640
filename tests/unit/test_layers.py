"""The package's layers (docs/architecture.md): dependencies point one way, no module
reaches into another package's private names, and no two packages import each other.
Read from the source with ast, so lazy imports inside functions count too."""

from __future__ import annotations

import ast
import itertools
import textwrap
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "rlscope"

_RECORDING_NEVER = ("rlscope.analysis", "rlscope.calibration", "rlscope.launch",
                    "rlscope.reporters", "rlscope.cli", "rlscope.trace.reader",
                    "rlscope.trace.records", "rlscope.trace.data")
# importer prefix -> rlscope modules it must never import (prefixes)
FORBIDDEN = {
    "rlscope.trace": ("rlscope.analysis", "rlscope.calibration", "rlscope.launch",
                      "rlscope.reporters", "rlscope.cli", "rlscope.annotate",
                      "rlscope.intercept", "rlscope.integrations", "rlscope.inprocess"),
    "rlscope.analysis": ("rlscope.calibration", "rlscope.launch", "rlscope.reporters",
                         "rlscope.cli", "rlscope.inprocess"),
    "rlscope.reporters": ("rlscope.calibration", "rlscope.launch", "rlscope.cli",
                          "rlscope.inprocess"),
    # rls-prof's side: talks to the profiled processes through their environment only
    # (but see ALLOWED).
    "rlscope.calibration": ("rlscope.reporters", "rlscope.cli", "rlscope.inprocess"),
    "rlscope.launch": ("rlscope.calibration", "rlscope.analysis", "rlscope.reporters",
                       "rlscope.cli", "rlscope.trace.reader", "rlscope.trace.records",
                       "rlscope.trace.data", "rlscope.inprocess", "rlscope.intercept",
                       "rlscope.integrations"),
    # The profiled process's side.
    "rlscope.inprocess": _RECORDING_NEVER,
    "rlscope.annotate": (*_RECORDING_NEVER, "rlscope.intercept", "rlscope.integrations",
                         "rlscope.inprocess"),
    "rlscope.recorder": (*_RECORDING_NEVER, "rlscope.intercept", "rlscope.integrations",
                         "rlscope.inprocess"),
    "rlscope.intercept": (*_RECORDING_NEVER, "rlscope.integrations", "rlscope.inprocess"),
    "rlscope.integrations": (*_RECORDING_NEVER, "rlscope.intercept", "rlscope.inprocess"),
    # Shared tables, importing nothing of rlscope.
    "rlscope.envvars": ("rlscope",),
    "rlscope.libraries": ("rlscope",),
}
# importer prefix -> modules it may import although FORBIDDEN names a prefix of them
ALLOWED = {
    # rls-prof's calibration writes the chunk copies' configurations and reads their
    # result files (their format and defaults live beside the code that writes them), and
    # parses RLSCOPE_MAX_PROGRESS as the profiled process does; its microbenchmark times
    # the Python stack sampler as profiled processes run it.
    "rlscope.calibration": ("rlscope.inprocess.chunk_copies", "rlscope.inprocess.limits",
                            "rlscope.inprocess.pysampler"),
    # The patcher and the import hook, never rlscope.intercept's enable/disable (which
    # installs the integrations, by name, from rlscope.libraries).
    "rlscope.integrations": ("rlscope.intercept.patch", "rlscope.intercept.importhook"),
}
# Private modules that are the package's own boundary, importable from anywhere.
SHARED_PRIVATE = {"rlscope._native", "rlscope._version", "rlscope._bootstrap"}
NATIVE = {"rlscope._native"}  # extension modules: no Python source, import no rlscope module


def _sources(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if p.name != "_descriptor.py")


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package(name: str) -> str:
    """The unit of the package-level checks: rlscope.X (a subpackage or a module)."""
    return ".".join(name.split(".")[:2])


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _walk(node: ast.AST, in_function: bool = False, *,
          type_checking: bool = True) -> Iterator[tuple[ast.AST, bool]]:
    """Every node below ``node`` with whether it sits inside a function. Without
    ``type_checking``, the bodies of ``if TYPE_CHECKING:`` blocks (never run) are left out."""
    for child in ast.iter_child_nodes(node):
        if not type_checking and isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield other, in_function
                yield from _walk(other, in_function, type_checking=False)
            continue
        inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                  ast.Lambda))
        yield child, inner
        yield from _walk(child, inner, type_checking=type_checking)


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


def _loaded(me: str, is_package: bool, node: ast.AST, modules: set[str],
            parents: bool = False) -> list[str]:
    """The rlscope modules an import statement loads: ``from a import b`` loads ``a.b``
    when that is a module, else ``a``; relative imports resolved against ``me``. With
    ``parents``, also the packages above them that run first (rlscope's own __init__,
    the public API every import runs, left out)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parent = me.split(".") if is_package else me.split(".")[:-1]
            parent = parent[:len(parent) - (node.level - 1)]
            base = ".".join([*parent, base] if base else parent)
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                 for a in node.names]
    else:
        return []
    out = []
    for n in names:  # "import a.b.c" loads a.b.c; keep the longest known module
        while n and n not in modules:
            n = n.rpartition(".")[0]
        if not n:
            continue
        out.append(n)
        up = n.rpartition(".")[0]
        while parents and "." in up:  # up to, not including, the root package
            if up in modules:
                out.append(up)
            up = up.rpartition(".")[0]
    return out


def import_graph(root: Path, *, functions: bool = True) -> dict[str, set[str]]:
    """Module -> rlscope modules it imports when run (with the packages above them): at
    module level, and with ``functions`` inside functions too (TYPE_CHECKING blocks never
    run: left out)."""
    paths = _sources(root)
    modules = {_module_name(p, root) for p in paths} | NATIVE
    graph: dict[str, set[str]] = {}
    for p in paths:
        me = _module_name(p, root)
        deps: set[str] = set()
        for node, in_function in _walk(ast.parse(p.read_text(), str(p)), type_checking=False):
            if in_function and not functions:
                continue
            deps.update(_loaded(me, p.name == "__init__.py", node, modules, parents=True))
        graph[me] = deps - {me}
    return graph


def package_graph(graph: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    """The same imports between packages (rlscope.X); a package importing its own
    modules (its __init__ its submodules, or back) is no edge."""
    out: dict[str, set[str]] = {}
    for m, deps in graph.items():
        out.setdefault(_package(m), set()).update(
            _package(d) for d in deps if _package(d) != _package(m))
    return out


def cycles(graph: Mapping[str, Iterable[str]]) -> Iterator[list[str]]:
    """One cycle ``[a, b, ..., a]`` per back edge of a depth-first search: none exactly
    when the graph has no cycle."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    for start in sorted(graph):
        if start in state:
            continue
        stack = [start]
        todo = [iter(sorted(graph.get(start, ())))]
        state[start] = 1
        while todo:
            d = next(todo[-1], None)
            if d is None:
                state[stack.pop()] = 2
                todo.pop()
            elif state.get(d) == 1:
                yield [*stack[stack.index(d):], d]
            elif d not in state:
                state[d] = 1
                stack.append(d)
                todo.append(iter(sorted(graph.get(d, ()))))


def _within_one_package(cycle: list[str]) -> bool:
    """A package's __init__ importing its own submodules is not a cycle."""
    return all(c.startswith(cycle[0] + ".") or cycle[0].startswith(c + ".")
               for c in cycle[1:-1])


def check_no_package_cycles(root: Path) -> None:
    """AssertionError naming the packages and an import of each step of the first cycle
    between packages, counting imports inside functions."""
    graph = import_graph(root)
    for cycle in cycles(package_graph(graph)):
        steps = []
        for a, b in itertools.pairwise(cycle):
            via = [f"{m} -> {d}" for m, deps in graph.items() if _package(m) == a
                   for d in deps if _package(d) == b]
            # the most specific import: a module's rather than a package's it implies
            steps.append(f"{a} -> {b} ({min(via, key=lambda s: (-len(s), s))})")
        raise AssertionError("packages import each other: " + "; ".join(steps))


SOURCES = _sources(ROOT)


def test_the_sources_are_found():
    names = {_module_name(p) for p in SOURCES}
    assert {"rlscope.annotate", "rlscope.launch.child_env", "rlscope.trace.records",
            "rlscope.analysis.overhead.model", "rlscope.inprocess.autostart",
            "rlscope.libraries", "rlscope.envvars"} <= names


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_dependencies_point_one_way(path: Path):
    me = _module_name(path)
    rules = [bad for prefix, bad in FORBIDDEN.items()
             if me == prefix or me.startswith(prefix + ".")]
    allowed = [ok for prefix, oks in ALLOWED.items()
               if me == prefix or me.startswith(prefix + ".") for ok in oks]
    modules = {_module_name(p) for p in SOURCES} | NATIVE
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        for target in _loaded(me, path.name == "__init__.py", node, modules):
            if any(target == ok or target.startswith(ok + ".") for ok in allowed):
                continue
            for bad in (b for r in rules for b in r):
                assert not (target == bad or target.startswith(bad + ".")), \
                    f"{me} (line {node.lineno}) imports {target}: against the layering"


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
    for cycle in cycles(import_graph(ROOT, functions=False)):
        # Inside one package, a lazy import may point back; at module level only the
        # package's __init__ and its own submodules may.
        assert _within_one_package(cycle), "import cycle: " + " -> ".join(cycle)


def test_packages_do_not_import_each_other():
    """Between packages no cycle at all, lazy imports inside functions included."""
    check_no_package_cycles(ROOT)


# -- the checker itself ---------------------------------------------------------------------

def test_cycles_on_synthetic_graphs():
    assert next(cycles({"a": {"b"}, "b": {"c"}, "c": set()}), None) is None
    assert next(cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}})) == ["a", "b", "c", "a"]
    assert next(cycles({"x": {"a"}, "a": {"b"}, "b": {"a"}})) == ["a", "b", "a"]
    assert package_graph({"rlscope.p": {"rlscope.p.m"}, "rlscope.p.m": {"rlscope.p"}}) \
        == {"rlscope.p": set()}


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in {"rlscope/__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root / "rlscope"


def test_a_cycle_through_function_level_imports_fails(tmp_path: Path):
    """The cycle this test was written for: intercept's registry importing an integration
    in a function, the integration importing intercept back in another."""
    root = _tree(tmp_path, {
        "rlscope/intercept/__init__.py": """
            def enable():
                from rlscope.integrations import sb3
                return sb3
        """,
        "rlscope/intercept/patch.py": "",
        "rlscope/integrations/__init__.py": "from rlscope.intercept.patch import *\n",
        "rlscope/integrations/sb3.py": "",
        "rlscope/integrations/rllib.py": """
            def install():
                from rlscope import intercept
                return intercept
        """,
    })
    assert not list(cycles(import_graph(root, functions=False)))  # module level sees none
    with pytest.raises(AssertionError, match="rlscope.integrations -> rlscope.intercept "
                                             r"\(rlscope.integrations"):
        check_no_package_cycles(root)


def test_what_is_not_a_cycle(tmp_path: Path):
    """A package's __init__ importing its own submodules (which import it back), imports
    for the type checker only, and one-way imports pass."""
    root = _tree(tmp_path, {
        "rlscope/a/__init__.py": """
            from rlscope.a import sub

            def later():
                from rlscope.a import other
                return other
        """,
        "rlscope/a/sub.py": "import rlscope.a\nfrom rlscope import b\n",
        "rlscope/a/other.py": "from rlscope.a import sub\n",
        "rlscope/b.py": """
            TYPE_CHECKING = False
            if TYPE_CHECKING:
                from rlscope.a import sub
        """,
    })
    check_no_package_cycles(root)
    graph = import_graph(root)
    assert graph["rlscope.b"] == set()
    assert graph["rlscope.a.sub"] == {"rlscope.a", "rlscope.b"}
    assert graph["rlscope.a.other"] == {"rlscope.a", "rlscope.a.sub"}  # the package runs first
    assert all(_within_one_package(c) for c in cycles(import_graph(root, functions=False)))
