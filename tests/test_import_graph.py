"""The modules of the package import each other without cycles.

Every import between modules of tensorcore_smt counts, function-local ones too (they are
still a dependency, only a late one), except those under `if TYPE_CHECKING:` (type hints
only, never executed). The graph is read from the source with ast, so an import that a
test never executes still counts."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "tensorcore_smt"


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


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


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports (resolved to modules, not names)."""
    files = {_module(p): p for p in ROOT.rglob("*.py")}
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
                if t and t != mod and t.startswith("tensorcore_smt") and t != "tensorcore_smt":
                    graph[mod].add(t)
    return graph


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
    assert "tensorcore_smt.smt.gemm_models" in g["tensorcore_smt.smt.gemm_query"]
    assert "tensorcore_smt.smt.answers" in g["tensorcore_smt.smt.report"]
    assert len(g) > 150


def test_no_module_imports_itself_through_others():
    assert cycles(import_graph()) == []


def test_a_cycle_is_found_when_there_is_one():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(g) == [["a", "b", "c"]]
