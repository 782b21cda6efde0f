"""The error figures of an output D against a value given exactly as a sum of fp64 terms.

The same figures as accuracy.measure_blocks (ulps at the exact value, relative errors,
normwise error), from |D - X| and |X| rounded once to fp64 by gemm/expansion.py rather
than from wide integers. They are the same bits: every figure is a correctly rounded
value times a power of two, and with every nonzero |D - X| and |X| between 2^-900 and
2^900 (`in_range`; the digit products of inputs of grids above 2^-400 are) no scaling
leaves fp64's normal range except the normwise terms, which then square to 0 either way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..formats import Format
from .accuracy import ErrorStats, normwise
from .expansion import Rounded, decoded, pair, rounded_pair, rounded_sum

RANGE_BITS = 900
"""|terms| and their sums stay within 2^-900 .. 2^900 (zeros aside) on the fast path."""


def in_range(x: np.ndarray) -> bool:
    """Whether every nonzero |x| lies within 2^-RANGE_BITS .. 2^RANGE_BITS."""
    a = np.abs(x)
    return bool(np.all((a == 0) | ((a >= 2.0**-RANGE_BITS) & (a <= 2.0**RANGE_BITS))))


def d_in_range(d_fmt: Format) -> bool:
    """Whether every finite value of the output format is 0 or inside the fast range."""
    s = d_fmt.spec
    return s.is_integer or (s.emin - s.mbits >= -RANGE_BITS and s.emax < RANGE_BITS)


def measure_terms(
    d_bits: np.ndarray,
    d_fmt: Format,
    blocks: Iterable[tuple[Any, list[np.ndarray]]],
    d_values: tuple[np.ndarray, np.ndarray] | None = None,
) -> ErrorStats:
    """The error of output D, block by block: `blocks` yields (index, terms) for blocks
    that cover D once, the exact value of D[index] being the sum of the fp64 arrays
    `terms` (each of the block's shape, inside the fast range). `d_values`: D's values
    and finite mask (`expansion.decoded`) when the caller has them."""
    s = d_fmt.spec
    shape = np.shape(d_bits)
    ulps, rel = np.empty(shape), np.empty(shape)
    dn, xn = np.empty(shape), np.empty(shape)
    high: int | None = None
    nonfinite = 0
    for index, terms in blocks:
        if d_values is None:
            d, fin = decoded(d_bits[index], d_fmt)
        else:
            d, fin = d_values[0][index], d_values[1][index]
        x, z = _rounded(d, terms)
        xnz = x.value != 0
        ulp_exp = np.maximum(np.where(xnz, x.log2, s.emin), s.emin) - s.mbits
        ulps[index] = np.where(fin, np.ldexp(z.value, -ulp_exp), np.inf)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(xnz, z.value / x.value, np.where(z.value == 0, 0.0, np.inf))
        rel[index] = np.where(fin, r, np.inf)
        dn[index] = np.where(fin, z.value, 0.0)
        xn[index] = np.where(fin, x.value, 0.0)
        tops = [t for t in (_top(z.log2, fin & (z.value != 0)), _top(x.log2, xnz)) if t is not None]
        if tops:
            high = max(tops + ([high] if high is not None else []))
        nonfinite += int((~fin).sum())
    if high is not None:  # onto the scale 2^-high, as measure_blocks
        np.ldexp(dn, -high, out=dn)
        np.ldexp(xn, -high, out=xn)
    return ErrorStats(ulps, rel, normwise(dn, xn), nonfinite)


def _rounded(d: np.ndarray, terms: list[np.ndarray]) -> tuple[Rounded, Rounded]:
    """(|X|, |D - X|) correctly rounded, X the exact sum of `terms`: X first as an exact
    pair hi + lo (one pass; nearly always), D - X then from three terms."""
    hi, lo, ok = pair(terms)
    x = rounded_pair(hi, lo)
    z = rounded_sum([d, -hi, -lo])
    if not ok.all():  # the rest from all their terms
        rest = [t[~ok] for t in terms]
        xr, zr = rounded_sum(rest), rounded_sum([d[~ok]] + [-t for t in rest])
        for full, part in ((x, xr), (z, zr)):
            full.value[~ok], full.log2[~ok] = part.value, part.log2
    return x, z


def _top(log2: np.ndarray, where: np.ndarray) -> int | None:
    return int(log2[where].max()) if where.any() else None
