"""Summing products in a given tree, in fp32, to check a revealed tree against a library's
own outputs where no GEMM hypothesis expresses it.

Two roundings are modelled, both round-to-nearest-even fp32 (IEEE 754):

- ``fma``: a node of two members where one is a product adds that exact product to the
  other member rounded once (an FMA, as vfmadd accumulates into a SIMD lane); of two
  products, the one with the lower k is rounded first (fma(a_j, b_j, RN(a_i·b_i))); a node
  of two sums rounds their sum; a node of more than two members rounds its exact sum once;
- ``add``: every product rounded to fp32 first, every node its members' sum rounded once.

Exact sums are taken in fp64 with the rounding error kept (TwoSum) and rounded to odd
before the one rounding to fp32, so no sum is rounded twice.
"""

from __future__ import annotations

import math

import numpy as np

from .tree import Tree, deep, leaves

ROUNDINGS = ("fma", "add")


def _rn32(s: np.ndarray, err: np.ndarray) -> np.ndarray:
    """RN_fp32(s + err) for fp64 s, err with s = RN_fp64(s + err): s rounded to odd
    (53 bits, so the rounding to 24 is the one of the exact sum), then to fp32."""
    bits = s.view(np.int64)
    fix = (err != 0) & ((bits & 1) == 0)
    s = s.copy()
    s[fix] = np.nextafter(s[fix], np.where(err[fix] > 0, np.inf, -np.inf))
    return s.astype(np.float32)


def _sum2(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """RN_fp32(x + y) for fp64 arrays holding exact values (TwoSum)."""
    s = x + y
    bb = s - x
    err = (x - (s - bb)) + (y - bb)
    return _rn32(s, err)


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


def evaluate(tree: Tree, a: np.ndarray, b: np.ndarray, rounding: str = "fma") -> np.ndarray:
    """The fp32 sums of a[r, k]·b[r, k] over k in `tree`, one per row r (a, b: T x K,
    values exact in fp32)."""
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding {rounding!r}; allowed: {', '.join(ROUNDINGS)}")
    p = a.astype(np.float64) * b.astype(np.float64)  # exact: 24 + 24 bits <= 53

    def val(t: Tree) -> tuple[np.ndarray, bool]:
        """(value as fp64, whether it is an unrounded product)."""
        if isinstance(t, int):
            if rounding == "add":
                return p[:, t].astype(np.float32).astype(np.float64), False
            return p[:, t], True
        kids = [val(c) for c in t]
        if len(kids) == 2:
            (x, xp), (y, yp) = kids
            if rounding == "fma" and xp and yp:  # the lower k first: RN(p_i), then fma
                x = x.astype(np.float32).astype(np.float64)
            return _sum2(x, y).astype(np.float64), False
        return _sum_many([v for v, _ in kids]).astype(np.float64), False

    with deep(len(leaves(tree))):
        out, raw = val(tree)
    return out.astype(np.float32)
