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
    """`t` with every node's children in the order of their smallest leaf (iterative:
    linear in the tree's size whatever its depth)."""
    done: dict[int, tuple[Tree, int]] = {}
    stack: list[tuple[Tree, bool]] = [(t, False)]
    while stack:
        x, ready = stack.pop()
        if isinstance(x, int) or id(x) in done:
            continue
        if not ready:
            stack.append((x, True))
            stack.extend((c, False) for c in x if not isinstance(c, int))
            continue
        kids = [(c, c) if isinstance(c, int) else done[id(c)] for c in x]
        kids.sort(key=lambda ct: ct[1])
        done[id(x)] = (
            kids[0][0] if len(kids) == 1 else tuple(c for c, _ in kids),
            kids[0][1],
        )
    return t if isinstance(t, int) else done[id(t)][0]


def lows(t: Tree) -> dict[int, int]:
    """The smallest leaf of every internal node of `t`, by id (iterative)."""
    out: dict[int, int] = {}
    stack: list[tuple[Tree, bool]] = [(t, False)]
    while stack:
        x, ready = stack.pop()
        if isinstance(x, int) or id(x) in out:
            continue
        if not ready:
            stack.append((x, True))
            stack.extend((c, False) for c in x if not isinstance(c, int))
            continue
        out[id(x)] = min(c if isinstance(c, int) else out[id(c)] for c in x)
    return out


def big_stack(fn, *args, **kwargs):
    """fn(*args, **kwargs) in a thread with a 1 GiB stack: comparing, hashing or writing
    out a tree recurses in C once per level, and a chain over K = 65536 products is that
    deep (the main thread's stack holds about 10^4 levels). Exceptions are re-raised."""
    import threading

    box: dict = {}

    def run() -> None:
        try:
            box["out"] = fn(*args, **kwargs)
        except BaseException as e:  # re-raised in the caller's thread
            box["err"] = e

    old = threading.stack_size()
    limit = sys.getrecursionlimit()
    threading.stack_size(1 << 30)
    sys.setrecursionlimit(max(limit, 1 << 20))
    try:
        th = threading.Thread(target=run, daemon=True)
        th.start()
        threading.stack_size(old)
        th.join()
    finally:
        threading.stack_size(old)
        sys.setrecursionlimit(limit)
    if "err" in box:
        raise box["err"]
    return box["out"]


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


_LOWS: dict[int, int] = {}


def render(t: Tree) -> str:
    """The tree in one line: a node as `[...]`, a left-leaning chain of single-leaf
    additions ((x + a) + b) + ... as `chain(x, a, b, ...)`, and runs of leaves in
    arithmetic progression as `a..b` (step 1) or `a..b step s`. A chain over 0..31 whose
    first 16 products are one fused add, then 16, 17, ... one addition each, is
    `[[0..15], 16..31]` when the 17 terms are one fused add, and `chain([0..15], 16..31)`
    when they are 16 additions."""
    global _LOWS
    _LOWS = lows(t)
    try:
        with deep(len(leaves(t))):
            return _render(t)
    finally:
        _LOWS = {}


class _Chain(tuple):
    """Display only: a left-leaning chain of single-leaf additions, flattened."""


def _low_of(x: Tree) -> int:
    if isinstance(x, int):
        return x
    got = _LOWS.get(id(x))
    return low(x) if got is None else got


def _flatten_chain(t: Tree):
    items: list = []
    x = t
    while not isinstance(x, int) and len(x) == 2 and isinstance(x[1], int) and x[1] > _low_of(x[0]):
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


def _ask(query, g: int, others: np.ndarray, top: int) -> np.ndarray:
    """query(g, others), told `top` (the size of the subtree the question lies in, the
    largest answer possible) where it takes it (`query.takes_top`)."""
    if getattr(query, "takes_top", False):
        return query(g, others, top)
    return query(g, others)


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
    s = _ask(query, g, rest, len(members)) if pivot_sizes is None else pivot_sizes
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
        try:  # the pivot is the subtree's smallest leaf, the children come in order
            t = (t, *_children(group, int(v), query))
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
        s = _ask(query, h, others, v) if len(others) else np.zeros(0, np.int64)
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


class TreeIndex:
    """The pair sizes of a tree for many pairs at once (no K x K matrix): each pair's
    lowest common ancestor by binary lifting over the nodes' parents."""

    def __init__(self, t: Tree, k: int) -> None:
        parent = [0] * k
        depth = [0] * k
        size = [1] * k
        nid: dict[int, int] = {}
        order: list[Tree] = []
        stack: list[Tree] = [t]
        while stack:  # pre-order: a node before its children
            x = stack.pop()
            if isinstance(x, int):
                continue
            nid[id(x)] = k + len(order)
            order.append(x)
            stack.extend(x)
        n = k + len(order)
        parent += [0] * len(order)
        depth += [0] * len(order)
        size += [0] * len(order)
        root = k if not isinstance(t, int) else int(t)
        parent[root] = root
        for x in order:
            me = nid[id(x)]
            for c in x:
                ci = c if isinstance(c, int) else nid[id(c)]
                parent[ci] = me
                depth[ci] = depth[me] + 1
        for x in reversed(order):
            me = nid[id(x)]
            size[me] = sum(1 if isinstance(c, int) else size[nid[id(c)]] for c in x)
        self.parent = np.array(parent[:n], np.int64)
        self.depth = np.array(depth[:n], np.int64)
        self.size = np.array(size[:n], np.int64)
        up = [self.parent]
        while (1 << len(up)) <= int(self.depth.max(initial=0)):
            up.append(up[-1][up[-1]])
        self.up = up

    def sizes(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """The size of pair (i[x], j[x]) for every x (1 where i = j)."""
        a = np.asarray(i, np.int64).copy()
        b = np.asarray(j, np.int64).copy()
        swap = self.depth[a] < self.depth[b]
        a[swap], b[swap] = b[swap], a[swap].copy()
        diff = self.depth[a] - self.depth[b]
        for lv, up in enumerate(self.up):
            move = ((diff >> lv) & 1).astype(bool)
            a[move] = up[a[move]]
        for up in reversed(self.up):
            move = up[a] != up[b]
            a[move] = up[a[move]]
            b[move] = up[b[move]]
        lca = np.where(a == b, a, self.parent[a])
        return self.size[lca]
