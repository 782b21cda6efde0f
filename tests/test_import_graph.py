"""The modules of the package import each other without cycles, and so do its packages.

Every import between modules of tensorcore_smt counts, function-local ones too (they are
still a dependency, only a late one), and `importlib.import_module("tensorcore_smt...")`
with a literal name, except those under `if TYPE_CHECKING:` (type hints only, never
executed). The graph is read from the source with ast, so an import that a test never
executes still counts. The package graph has one node per subpackage (bv, model, gemm,
...) and per top-level module (api, formats, errors, ...): an edge for every module
import between two of them."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "tensorcore_smt"


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            t = node.test
            name = t.id if isinstance(t, ast.Name) else getattr(t, "attr", None)
            if name == "TYPE_CHECKING":
                for sub in node.body:
                    for n in ast.walk(sub):
                        if hasattr(n, "lineno"):
                            lines.add(n.lineno)
    return lines


def _import_module_target(node: ast.AST) -> str | None:
    """The literal module name of an `importlib.import_module("...")` call, else None."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
    arg = node.args[0]
    if name in ("import_module", "__import__") and isinstance(arg, ast.Constant):
        return arg.value if isinstance(arg.value, str) else None
    return None


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the package modules it imports (resolved to modules, not names), for the
    package at `root`."""
    top = root.name

    def module(path: Path) -> str:
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)

    files = {module(p): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        tree = ast.parse(path.read_text())
        skip = _type_checking_lines(tree)
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif (name := _import_module_target(node)) is not None:
                targets = [name]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    prefix = ".".join(base + ([node.module] if node.module else []))
                else:
                    prefix = node.module or ""
                # `from . import ieee` names a submodule: no dependency on the package's
                # __init__ beyond the one every submodule has; a name that is not a
                # submodule is taken from the package module itself
                subs = [f"{prefix}.{a.name}" for a in node.names]
                targets = [t if t in files else prefix for t in subs]
            for t in targets:
                # the longest prefix that is a module of the package
                while t and t not in files:
                    t = t.rpartition(".")[0]
                if t and t != mod and t.startswith(top + ".") and t != top:
                    graph[mod].add(t)
    return graph


def package_of(module: str) -> str:
    """The node of `module` in the package graph: its subpackage or top-level module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """package -> the packages its modules import (module-level graph collapsed)."""
    out: dict[str, set[str]] = {package_of(m): set() for m in graph}
    for m, targets in graph.items():
        out[package_of(m)] |= {package_of(t) for t in targets} - {package_of(m)}
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_graph_is_read():
    g = import_graph()
    assert "tensorcore_smt.gemm.model" in g["tensorcore_smt.smt.gemm_query"]
    assert "tensorcore_smt.smt.answers" in g["tensorcore_smt.smt.report"]
    assert len(g) > 150
    pg = package_graph(g)
    assert {"bv", "model", "spec", "formats", "gemm", "engine", "api", "cli"} <= set(pg)
    assert "formats" in pg["model"] and "model" in pg["spec"] and "engine" in pg["gemm"]


def test_no_module_imports_itself_through_others():
    assert cycles(import_graph()) == []


def test_no_package_imports_itself_through_others():
    """The packages form a DAG: each has a layer below which everything it uses lies."""
    assert cycles(package_graph(import_graph())) == []


def test_every_kind_of_import_is_read(tmp_path):
    """A package whose only cycles go through a function-local import and an importlib
    call is found cyclic; an import under TYPE_CHECKING is not counted."""
    pkg = tmp_path / "toy"
    for sub in ("low", "high", "hint"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "a.py").write_text("def f():\n    from ..high import b\n")
    (pkg / "high" / "b.py").write_text(
        "import importlib\n\nfrom ..low import a\n\nimportlib.import_module('toy.hint.c')\n"
    )
    (pkg / "hint" / "c.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from ..high import b\n"
    )
    g = import_graph(pkg)
    assert g["toy.low.a"] == {"toy.high.b"}
    assert g["toy.high.b"] == {"toy.low.a", "toy.hint.c"}
    assert g["toy.hint.c"] == set()
    assert cycles(g) == [["toy.high.b", "toy.low.a"]]
    assert cycles(package_graph(g)) == [["high", "low"]]


def test_a_cycle_is_found_when_there_is_one():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(g) == [["a", "b", "c"]]
