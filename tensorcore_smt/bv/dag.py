"""The one walk over a term DAG: every node once, arguments before the node.

The symbolic interpreter's evaluation, the z3 translation, the SMT-LIB printer and the
compiled engine's LLVM lowering all visit a DAG the same way: depth first, each shared
node once, in an order where a node comes after its arguments. This module holds that
walk, written once; each consumer supplies only what it does at one node. The walk is
iterative (model DAGs are tens of thousands of nodes deep along accumulation chains).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol


class Node(Protocol):
    """What the walk needs of a node: a unique id and its argument nodes."""

    uid: int
    args: tuple


def post_order(roots: Iterable[Node], seen: set[int] | None = None) -> list[Any]:
    """The nodes reachable from `roots`, each once, every node after its arguments.

    `seen`: uids already visited by an earlier walk (updated in place), so several walks
    over one growing DAG visit each node once in all."""
    done: set[int] = set() if seen is None else seen
    order: list[Any] = []
    for root in roots:
        if root.uid in done:
            continue
        stack = [root]
        while stack:
            t = stack[-1]
            if t.uid in done:
                stack.pop()
                continue
            pending = [a for a in t.args if a.uid not in done]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            done.add(t.uid)
            order.append(t)
    return order


def fold(
    roots: Iterable[Node],
    node: Callable[[Any, list[Any]], Any],
    memo: dict[int, Any] | None = None,
) -> dict[int, Any]:
    """Compute `node(t, [value of each argument])` for every node reachable from
    `roots`, arguments first, each node once; returns the values by uid (`memo`, when
    given, holds values already known and is extended in place)."""
    values: dict[int, Any] = {} if memo is None else memo
    for t in post_order(roots, set(values)):
        values[t.uid] = node(t, [values[a.uid] for a in t.args])
    return values
