"""Random rows for integer units (s8/u8/s4/u4/b1 operands, s32 c): the validation mix's
kinds read for integers, reproducible from a seed.

- ``normal`` and ``bits``: values uniform over each format's range (for an integer
  format every pattern is a value, so the two coincide);
- ``cancel``: the second half of the products repeats the first with a negated, so the
  sum cancels (an unsigned a is kept and b's sign cannot flip: then as ``normal``);
- ``wide``: every operand an extreme of its format (least, largest, 0, +-1), the largest
  products of both signs: all -128 times -128 is the largest s8 product;
- ``subnormal``: small values (|x| <= 2), the sum near c;
- ``zeros``: about half of the operands 0;
- ``special``: extreme operands of one sign of product and c closer to the s32 limit of that
  sign than the largest sum of those products: the sum leaves the s32 range, where
  wrap-around and `.satfinite` differ.
"""

from __future__ import annotations

import numpy as np

from ..formats import Format
from .kinds import MIX, RowKind


def _values(fmt: Format, rng: np.random.Generator, shape) -> np.ndarray:
    lo, hi = fmt.spec.int_range
    return rng.integers(lo, hi + 1, size=shape, dtype=np.int64)


def _extremes(fmt: Format, rng: np.random.Generator, shape) -> np.ndarray:
    lo, hi = fmt.spec.int_range
    pick = np.array(sorted({lo, hi, 0, min(hi, 1), max(lo, -1), lo + 1}), dtype=np.int64)
    return pick[rng.integers(0, len(pick), size=shape)]


def _patterns(values: np.ndarray, fmt: Format) -> np.ndarray:
    return (values & ((1 << fmt.spec.storage) - 1)).astype(np.uint64)


def integer_rows(
    a_fmt: Format, b_fmt: Format, c_fmt: Format, K: int, n: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`n` rows (a (n, K), b (n, K), c (n,) bit patterns, kind indices into `MIX`)."""
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, len(MIX), size=n)
    a = _values(a_fmt, rng, (n, K))
    b = _values(b_fmt, rng, (n, K))
    c = _values(c_fmt, rng, n)
    is_ = {k: kind == MIX.index(k) for k in MIX}
    w = is_[RowKind.WIDE] | is_[RowKind.SPECIAL]
    a[w] = _extremes(a_fmt, rng, (int(w.sum()), K))
    b[w] = _extremes(b_fmt, rng, (int(w.sum()), K))
    small = is_[RowKind.SUBNORMAL]
    for x, f in ((a, a_fmt), (b, b_fmt)):
        lo, hi = f.spec.int_range
        x[small] = np.clip(rng.integers(-2, 3, size=(int(small.sum()), K)), lo, hi)
        z = is_[RowKind.ZEROS][:, None] & (rng.integers(0, 2, size=(n, K)) == 1)
        x[z] = 0
    h = K // 2
    if h and a_fmt.spec.signed:
        cancel = is_[RowKind.CANCEL]
        a[cancel, h : 2 * h] = -np.maximum(a[cancel, :h], a_fmt.spec.int_range[0] + 1)
        b[cancel, h : 2 * h] = b[cancel, :h]
    sp = np.flatnonzero(is_[RowKind.SPECIAL])
    if len(sp):
        # one sign for every product of the row (a_k b_k >= 0, or <= 0), c near that limit
        up = rng.integers(0, 2, size=len(sp)).astype(bool)
        (a_lo, a_hi), (b_lo, b_hi) = a_fmt.spec.int_range, b_fmt.spec.int_range
        sa, sb = a_fmt.spec.signed, b_fmt.spec.signed
        pos = (a_lo, b_lo) if sa and sb else (a_hi, b_hi)
        neg = (a_lo, b_hi) if sa else (a_hi, b_lo)
        a[sp] = np.where(up, pos[0], neg[0])[:, None]
        b[sp] = np.where(up, pos[1], neg[1])[:, None]
        lo32, hi32 = c_fmt.spec.int_range
        reach = K * max(abs(pos[0] * pos[1]), abs(neg[0] * neg[1]), 1)
        near = rng.integers(0, reach, size=len(sp))  # most of these rows leave the range
        c[sp] = np.where(up, hi32 - near, lo32 + near)
    return _patterns(a, a_fmt), _patterns(b, b_fmt), _patterns(c, c_fmt), kind


__all__ = ["integer_rows"]
