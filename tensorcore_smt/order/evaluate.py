"""Summing products in a given tree with a given element arithmetic: the model `reveal`
checks a library against (the tree says the order, the arithmetic how each addition
rounds), and learns the arithmetic with (arithmetic.py).

The arithmetic of a part of the tree (`Arithmetic`) is one of:

- ``products``: ``fused``: a product enters its addition exact (an FMA: a node of a sum and
  a product rounds once; of two products, the one with the lower k is rounded first,
  fma(a_j, b_j, RN(a_i·b_i)), as a chain started from zero does); ``rounded``: every
  product is rounded to fp32 first (a separate multiply, then add);
- ``width``: the format every addition rounds to: ``fp32``, or ``fp64`` (a C ``double``
  accumulator; its result rounded once to fp32 at the end);
- ``daz``: subnormal inputs read as zero (MXCSR.DAZ; FTZ with it: fp32 results below the
  normal range written as zero).

A whole tree's model (`TreeArithmetic`) is one arithmetic for every node, or one for each
child of the root (a kernel's main loop and its tail) and a width for the root's own
addition. All roundings are to nearest even (IEEE 754). Exact sums are taken in fp64
with the rounding error kept (TwoSum) and rounded to odd before the one rounding to
fp32, so no sum is rounded twice. A node of more than two members (a matrix unit's fused
add, with its own alignment and truncation) is not modelled here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import numpy as np

from .tree import Tree, deep, leaves, low

FP32_TINY = 2.0**-126


class Products(str, Enum):
    """How a product enters its addition."""

    FUSED = "fused"
    ROUNDED = "rounded"
    LANES = "lanes"
    """fma, but a node of two products adds two lanes of one product each (each
    rounded, then added): the tree alone does not tell that from a chain of two."""


class Width(str, Enum):
    """The format partial sums round to."""

    FP32 = "fp32"
    FP64 = "fp64"


@dataclass(frozen=True)
class Arithmetic:
    """One part's element arithmetic (module docstring)."""

    products: Products = Products.FUSED
    width: Width = Width.FP32
    daz: bool = False

    def text(self) -> str:
        prod = {
            Products.FUSED: "fma",
            Products.ROUNDED: "products rounded to fp32",
            Products.LANES: "fma, a node of two products two one-product lanes added",
        }[self.products]
        if self.width == Width.FP64:
            prod = "exact products" if self.products == Products.FUSED else prod
        out = f"{prod}, sums in {self.width.value}"
        return out + (", subnormals flushed (DAZ/FTZ)" if self.daz else "")

    def to_json(self) -> dict:
        return {"products": self.products.value, "width": self.width.value, "daz": self.daz}


@dataclass(frozen=True)
class TreeArithmetic:
    """The arithmetic of a whole tree: `parts` one Arithmetic (every node), or one per
    child of the root in the root's child order with `root` the width of the root's own
    addition."""

    parts: tuple[Arithmetic | TreeArithmetic, ...]
    root: Width | None = None

    @property
    def uniform(self) -> bool:
        return len(self.parts) == 1 and isinstance(self.parts[0], Arithmetic)

    @property
    def daz(self) -> bool:
        return any(p.daz for p in self.parts)

    def text(self, tree: Tree | None = None) -> str:
        if self.uniform:
            return self.parts[0].text()
        from .tree import render

        kids = list(tree) if tree is not None and not isinstance(tree, int) else []
        named = []
        for i, (c, a) in enumerate(zip(kids or [None] * len(self.parts), self.parts)):
            label = render(c) if c is not None and len(render(c)) <= 40 else f"part {i}"
            inner = a.text() if isinstance(a, Arithmetic) else "(" + a.text(c) + ")"
            named.append(f"{label}: {inner}")
        root = self.root.value if self.root else "fp32"
        return "; ".join(named) + f"; the parts added in {root}"

    def to_json(self) -> dict:
        return {
            "parts": [a.to_json() for a in self.parts],
            "root": self.root.value if self.root else None,
        }

    def at(self, i: int) -> TreeArithmetic:
        """The model of the root's child i."""
        p = self.parts[0 if self.uniform else i]
        return p if isinstance(p, TreeArithmetic) else TreeArithmetic((p,))


UNIFORM = tuple(
    Arithmetic(p, w, d)
    for d in (False, True)
    for w in (Width.FP32, Width.FP64)
    for p in (Products.FUSED, Products.ROUNDED, Products.LANES)
    if p != Products.LANES or w == Width.FP32
)
"""The uniform arithmetics tried, simplest first."""

ROUNDINGS = ("fma", "add")
"""The two fp32 arithmetics of the former tree-sum check (`evaluate` rounding=)."""


def _rn32(s: np.ndarray, err: np.ndarray) -> np.ndarray:
    """RN_fp32(s + err) for fp64 s, err with s = RN_fp64(s + err): s rounded to odd
    (53 bits, so the rounding to 24 is the one of the exact sum), then to fp32. An even
    s with err != 0 moves one step toward err (its odd neighbour on that side)."""
    bits = s.view(np.int64)
    fix = (err != 0) & ((bits & 1) == 0)
    step = np.where((err > 0) == (s > 0), 1, -1)
    s = (bits + fix * step).view(np.float64)
    with np.errstate(over="ignore"):
        return s.astype(np.float32)


def _add(x: np.ndarray, y: np.ndarray, width: Width, ftz: bool) -> np.ndarray:
    """RN_width(x + y) for fp64 arrays of exact values, as fp64."""
    with np.errstate(invalid="ignore", over="ignore"):
        s = x + y
        if width == Width.FP64:
            return s
        bb = s - x
        err = (x - (s - bb)) + (y - bb)
        err[~np.isfinite(s)] = 0.0
    out = _rn32(s, err).astype(np.float64)
    if ftz:
        out[np.abs(out) < FP32_TINY] = 0.0
    return out


def _r32(x: np.ndarray, ftz: bool) -> np.ndarray:
    with np.errstate(over="ignore"):
        out = x.astype(np.float32).astype(np.float64)
    if ftz:
        out[np.abs(out) < FP32_TINY] = 0.0
    return out


def _plan(tree: Tree, model: TreeArithmetic):
    """The internal nodes in evaluation order by level: (level, node id, left, right,
    arithmetic), ids of leaves their k, internal nodes from max k + 1 on; and the root's
    id."""
    k = max(leaves(tree)) + 1  # leaf ids below k, internal nodes from k on
    nodes: list[tuple] = []
    level: dict[int, int] = {}
    daz = model.daz
    stack: list = [(tree, model, False)]
    ids: dict[int, int] = {}
    while stack:
        t, mod, done = stack.pop()
        if isinstance(t, int):
            continue
        if not done:
            stack.append((t, mod, True))
            for i, c in enumerate(t):
                stack.append((c, mod if mod.uniform else mod.at(i), False))
            continue
        kids = [c if isinstance(c, int) else ids[id(c)] for c in t]
        if len(kids) != 2:
            raise ValueError("a fused add of more than two members")
        me = k + len(nodes)
        lv = 1 + max(level.get(c, 0) for c in kids)
        level[me] = lv
        if mod.uniform:
            a = mod.parts[0]
            a = Arithmetic(a.products, a.width, daz)
        else:
            a = Arithmetic(Products.ROUNDED, mod.root or Width.FP32, daz)
        left, right = kids
        if isinstance(t[0], int) and isinstance(t[1], int) and low(t[0]) > low(t[1]):
            left, right = right, left
        nodes.append((lv, me, left, right, a))
        ids[id(t)] = me
    root = tree if isinstance(tree, int) else ids[id(tree)]
    return sorted(nodes, key=lambda x: x[0]), root, k


def supported(tree: Tree) -> bool:
    """Whether every addition of `tree` has two members (what this module models)."""
    stack = [tree]
    while stack:
        x = stack.pop()
        if not isinstance(x, int):
            if len(x) != 2:
                return False
            stack.extend(x)
    return True


def evaluate_model(
    tree: Tree, model: TreeArithmetic, a: np.ndarray, b: np.ndarray, budget: int = 1 << 23
) -> np.ndarray:
    """The fp32 sums of a[r, k]·b[r, k] over k in `tree` with `model`'s arithmetic, one
    per row r (a, b: T x K, values exact in fp32), evaluated level by level (the nodes
    of one level at once) in chunks of rows (`budget` float64 values of products and
    partial sums a chunk: at K = 16384, 10^5 rows at once would hold 13 GB)."""
    with deep(len(leaves(tree)) if not isinstance(tree, int) else 1):
        plan, root, k = _plan(tree, model)
    daz = model.daz
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    if daz:
        a = np.where(np.abs(a) < FP32_TINY, 0.0, a)
        b = np.where(np.abs(b) < FP32_TINY, 0.0, b)
    if isinstance(root, int) and root < k:  # a single product
        return _r32(a[:, root] * b[:, root], daz).astype(np.float32)
    steps, slots = _schedule(plan, k)
    rows = max(1, min(len(a), budget // (max(1, slots) + k)))  # p holds K values a row
    out = np.empty(len(a), np.float32)
    for r0 in range(0, len(a), rows):
        out[r0 : r0 + rows] = _eval_rows(
            steps, slots, root, k, a[r0 : r0 + rows], b[r0 : r0 + rows]
        )
    return out


def _schedule(plan: list[tuple], k: int):
    """The plan as vectorized steps (one per level and arithmetic), each node's value in
    a slot freed once its parent has read it: (arithmetic, left slot or -1, left k or -1,
    right slot or -1, right k or -1, output slots) per step; and the slots used."""
    parent: dict[int, int] = {}
    for lv, _me, left, right, _ in plan:
        parent[left] = parent[right] = lv
    free: list[int] = []
    used = 0
    slot: dict[int, int] = {}
    steps = []
    i = 0
    while i < len(plan):
        lv = plan[i][0]
        j = i
        while j < len(plan) and plan[j][0] == lv:
            j += 1
        group = plan[i:j]
        by: dict[Arithmetic, list] = {}
        for item in group:
            by.setdefault(item[4], []).append(item)
        release = []
        for ar, items in by.items():
            cols = []
            for c in ("l", "r"):
                ids = np.array([it[2] if c == "l" else it[3] for it in items])
                leaf = ids < k
                sl = np.array([slot.get(int(x), -1) if x >= k else -1 for x in ids])
                cols.append((leaf, np.where(leaf, ids, 0), np.where(leaf, 0, sl)))
            for it in items:
                for c in (it[2], it[3]):
                    if c >= k:
                        release.append(slot.pop(c))
            steps.append((ar, cols, items))
        for _, cols, items in steps[-len(by) :]:
            outs = []
            for it in items:
                if free:
                    s = free.pop()
                else:
                    s = used
                    used += 1
                slot[it[1]] = s
                outs.append(s)
            cols.append(np.array(outs))
        free.extend(release)  # after the level's outputs: no step writes what another reads
        i = j
    root_slot = slot
    return [(ar, cols) for ar, cols, _ in steps] + [("root", root_slot)], used


def _eval_rows(steps, slots, root, k, a, b) -> np.ndarray:
    p = np.ascontiguousarray((a * b).T)  # exact: 24 + 24 bits <= 53; one row a product
    vals = np.zeros((max(1, slots), len(a)))
    *work, (_, slot_of) = steps
    for ar, ((xl, xk, xs), (yl, yk, ys), outs) in work:
        ftz = ar.daz
        x = _gather(p, vals, xl, xk, xs)
        y = _gather(p, vals, yl, yk, ys)
        if ar.products == Products.ROUNDED:
            if xl.any():
                x[xl] = _r32(x[xl], ftz)
            if yl.any():
                y[yl] = _r32(y[yl], ftz)
        elif ar.width == Width.FP32:  # fused: of two products the first is rounded
            both = xl & yl
            if both.any():
                x[both] = _r32(x[both], ftz)
                if ar.products == Products.LANES:  # two lanes: the second rounded too
                    y[both] = _r32(y[both], ftz)
        vals[outs] = _add(x, y, ar.width, ftz)
    with np.errstate(over="ignore"):
        return vals[slot_of[root]].astype(np.float32)


def _gather(p: np.ndarray, vals: np.ndarray, leaf: np.ndarray, ks: np.ndarray, sl: np.ndarray):
    if leaf.all():
        return p[ks]
    if not leaf.any():
        return vals[sl]
    return np.where(leaf[:, None], p[ks], vals[sl])


def evaluate(tree: Tree, a: np.ndarray, b: np.ndarray, rounding: str = "fma") -> np.ndarray:
    """The fp32 sums of a[r, k]·b[r, k] over k in `tree`, one per row r, every node in
    fp32: ``fma`` (products fused) or ``add`` (products rounded first); a node of more
    than two members rounds its exact sum once."""
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding {rounding!r}; allowed: {', '.join(ROUNDINGS)}")
    prod = Products.FUSED if rounding == "fma" else Products.ROUNDED
    if supported(tree):
        return evaluate_model(tree, TreeArithmetic((Arithmetic(prod),)), a, b)
    return _evaluate_nary(tree, a, b, rounding)


def _evaluate_nary(tree: Tree, a: np.ndarray, b: np.ndarray, rounding: str) -> np.ndarray:
    p = a.astype(np.float64) * b.astype(np.float64)

    def val(t: Tree) -> tuple[np.ndarray, bool]:
        if isinstance(t, int):
            if rounding == "add":
                return p[:, t].astype(np.float32).astype(np.float64), False
            return p[:, t], True
        kids = [val(c) for c in t]
        if len(kids) == 2:
            (x, xp), (y, yp) = kids
            if rounding == "fma" and xp and yp:
                x = x.astype(np.float32).astype(np.float64)
            return _add(x, y, Width.FP32, False), False
        return _sum_many([v for v, _ in kids]).astype(np.float64), False

    with deep(len(leaves(tree))):
        out, _ = val(tree)
    return out.astype(np.float32)


def _sum_many(cols: list[np.ndarray]) -> np.ndarray:
    """RN_fp32 of the exact sum of fp64 arrays, trial by trial."""
    stack = np.stack(cols, axis=1)
    out = np.empty(len(stack), np.float32)
    for r, row in enumerate(stack):
        vals = [float(v) for v in row]
        s = math.fsum(vals)
        rest = math.fsum([*vals, -s]) if math.isfinite(s) else 0.0
        out[r] = _rn32(np.array([s]), np.array([rest]))[0]
    return out
