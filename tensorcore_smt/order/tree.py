"""Summation trees over K products, and how one is rebuilt from pair sizes.

A tree is a leaf (an int: the product's k index, 0-based) or a tuple of two or more
subtrees: one addition of its members (a tuple of more than two is a fused multi-term
add, as a matrix unit adds several products and its accumulator at once). Children are
kept in the order of their smallest leaf, so two trees that add the same sets are equal.

The size of a pair (i, j) is the number of leaves under the smallest subtree holding both
(their lowest common ancestor). `build` rebuilds the tree from sizes asked pivot by pivot
(every leaf set it asks about is one subtree's leaves), checking on the way that the sizes
are those of one tree; `sizes` is the inverse (the sizes of every pair of a tree).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

Tree = int | tuple["Tree", ...]


class NotATree(ValueError):
    """The pair sizes are not those of any summation tree."""


class Pending(Exception):
    """A pair size not known yet: a batched build (classes.py) asks it in its next call.
    `build` goes on with the subtrees that do not depend on it and raises Pending at the
    end, so one pass collects every question that can be asked at once."""


@contextmanager
def deep(k: int) -> Iterator[None]:
    """Room on the Python stack for trees of depth up to `k` (a chain over K is K deep)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 4 * k + 1000))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def low(t: Tree) -> int:
    """The smallest leaf of `t`."""
    while not isinstance(t, int):
        t = t[0]
    return t


def node(children: list[Tree]) -> Tree:
    """One addition of `children` in canonical order (a single child is itself)."""
    if len(children) == 1:
        return children[0]
    return tuple(sorted(children, key=low))


def canonical(t: Tree) -> Tree:
    """`t` with every node's children in the order of their smallest leaf."""
    with deep(len(leaves(t))):
        return _canonical(t)


def _canonical(t: Tree) -> Tree:
    return t if isinstance(t, int) else node([_canonical(c) for c in t])


def leaves(t: Tree) -> list[int]:
    out: list[int] = []
    stack = [t]
    while stack:
        x = stack.pop()
        if isinstance(x, int):
            out.append(x)
        else:
            stack.extend(reversed(x))
    return out


def to_lists(t: Tree) -> int | list:
    """The tree as nested lists (the JSON form; json.dumps it inside `deep`)."""
    with deep(len(leaves(t))):
        return _to_lists(t)


def _to_lists(t: Tree) -> int | list:
    return t if isinstance(t, int) else [_to_lists(c) for c in t]


def from_lists(x, k: int = 4096) -> Tree:
    """A tree from nested lists (leaves ints), children put in canonical order."""
    with deep(k):
        return _from_lists(x)


def _from_lists(x) -> Tree:
    return int(x) if not isinstance(x, list) else node([_from_lists(c) for c in x])


def render(t: Tree) -> str:
    """The tree in one line: a node as `[...]`, a left-leaning chain of single-leaf
    additions ((x + a) + b) + ... as `chain(x, a, b, ...)`, and runs of leaves in
    arithmetic progression as `a..b` (step 1) or `a..b step s`. A chain over 0..31 whose
    first 16 products are one fused add, then 16, 17, ... one addition each, is
    `[[0..15], 16..31]` when the 17 terms are one fused add, and `chain([0..15], 16..31)`
    when they are 16 additions."""
    with deep(len(leaves(t))):
        return _render(t)


class _Chain(tuple):
    """Display only: a left-leaning chain of single-leaf additions, flattened."""


def _flatten_chain(t: Tree):
    items: list = []
    x = t
    while not isinstance(x, int) and len(x) == 2 and isinstance(x[1], int) and x[1] > low(x[0]):
        items.append(x[1])
        x = x[0]
    if len(items) < 2:
        return None
    return _Chain([x, *reversed(items)])


def _runs(items: list) -> list[str]:
    parts: list[str] = []
    i = 0
    while i < len(items):
        c = items[i]
        if not isinstance(c, int):
            parts.append(_render(c))
            i += 1
            continue
        j = i + 1
        step = items[j] - c if j < len(items) and isinstance(items[j], int) else 0
        while (
            step > 0
            and j < len(items)
            and isinstance(items[j], int)
            and items[j] - items[j - 1] == step
        ):
            j += 1
        if step > 0 and j - i > 2:
            last = items[j - 1]
            parts.append(f"{c}..{last}" + (f" step {step}" if step != 1 else ""))
            i = j
        else:
            parts.append(str(c))
            i += 1
    return parts


def _render(t) -> str:
    if isinstance(t, int):
        return str(t)
    ch = _flatten_chain(t)
    if ch is not None:
        return "chain(" + ", ".join(_runs(list(ch))) + ")"
    return "[" + ", ".join(_runs(list(t))) + "]"


def size_matrix(t: Tree, k: int) -> np.ndarray:
    """The size of every pair (i, j) of `t` (K x K, the diagonal 1)."""
    out = np.ones((k, k), np.int64)

    def walk(x: Tree) -> np.ndarray:
        if isinstance(x, int):
            return np.array([x])
        groups = [walk(c) for c in x]
        allx = np.concatenate(groups)
        n = len(allx)
        for i, g in enumerate(groups):
            rest = np.concatenate(groups[i + 1 :]) if i + 1 < len(groups) else None
            if rest is not None:
                out[np.ix_(g, rest)] = n
                out[np.ix_(rest, g)] = n
        return allx

    with deep(k):
        walk(t)
    return out


Query = Callable[[int, np.ndarray], np.ndarray]
"""query(pivot, others) -> the size of each pair (pivot, other)."""


def build(k: int, query: Query) -> Tree:
    """The tree over leaves 0..k-1 whose pair sizes `query` answers (FPRev's recursion:
    a pivot's sizes name its ancestors, the leaves first met at each ancestor are split
    into that ancestor's other children by asking one of them, and so on). Each pivot is
    asked once, about the leaves of one subtree. NotATree when the answers contradict
    every tree."""
    with deep(k):
        return _subtree(np.arange(k), query)


def from_sizes(sizes: np.ndarray) -> Tree:
    """The tree whose pair sizes are all of `sizes` (K x K, the diagonal ignored), every
    pair checked; NotATree when they are not those of one tree."""
    k = len(sizes)
    t = build(k, lambda p, o: sizes[p, o])
    off = ~np.eye(k, dtype=bool)
    bad = np.argwhere((size_matrix(t, k) != sizes) & off)
    if len(bad):
        i, j = bad[0]
        raise NotATree(
            f"pair ({i}, {j}) meets in a subtree of {sizes[i, j]} products where the tree "
            f"the other pairs give has {size_matrix(t, k)[i, j]}: not one summation tree"
        )
    return t


def _subtree(members: np.ndarray, query: Query, pivot_sizes: np.ndarray | None = None) -> Tree:
    """The subtree whose leaves are exactly `members` (members[0] the pivot; its sizes
    against members[1:] given or asked)."""
    if len(members) == 1:
        return int(members[0])
    g, rest = int(members[0]), members[1:]
    s = query(g, rest) if pivot_sizes is None else pivot_sizes
    if s.min() < 2 or s.max() != len(members):
        raise NotATree(
            f"leaf {g}: sizes {int(s.min())}..{int(s.max())} within a subtree of "
            f"{len(members)} leaves"
        )
    t: Tree = g
    covered = 1
    pending = False
    for v in np.unique(s):
        group = rest[s == v]
        covered += len(group)
        if covered != v:
            raise NotATree(
                f"leaf {g}: {covered} leaves within the subtree of size {int(v)} met there"
            )
        try:
            t = node([t, *_children(group, int(v), query)])
        except Pending:
            pending = True
    if pending:
        raise Pending
    return t


def _children(group: np.ndarray, v: int, query: Query) -> list[Tree]:
    """Split `group` (the leaves an ancestor of size v adds beside the pivot's child)
    into that ancestor's other children."""
    out: list[Tree] = []
    pending = False
    while len(group):
        h, others = int(group[0]), group[1:]
        s = query(h, others) if len(others) else np.zeros(0, np.int64)
        if len(s) and s.max() > v:
            raise NotATree(f"leaf {h}: size {int(s.max())} above its ancestor's {v}")
        inside = s < v
        try:
            out.append(_subtree(np.concatenate([[h], others[inside]]), query, s[inside]))
        except Pending:
            pending = True
        group = others[~inside]
    if pending:
        raise Pending
    return out
