"""The error of a GEMM output against the exact product A·B (+ C), in integer arithmetic.

Every finite value of a binary format is (-1)^s · sig · 2^(exp - mbits) with an integer
significand (formats.decode), so the exact product of two matrices of such values is an
integer matrix on a grid of 2^lsb. `exact_matmul` computes it with matrix products over
exponent slices, each slice small enough that every partial sum is an exact integer
(K · 2^(bits_a + w) · 2^(bits_b + w) < 2^53 for slice width w, so fp64 BLAS products
are exact; 2^63 in int64 for fp32's wide significands), and joins the slices in
wide integers (gemm/wide.py: 32-bit limbs, whole-array operations): no floating-point
operation touches a value, and the result is exact in any summation order. `measure`
compares an output D with it, vectorised: the error of each element in ulps of the
output format at the exact value (|D - X| computed exactly, then rounded once to fp64),
and relative errors (elementwise and normwise, ||D - X||_F / ||X||_F; these divide the
correctly rounded |D - X| and |X|, so they are within 2 units in the last place of fp64).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..bv.core import BV
from ..bv.vector import VECTOR
from ..formats import EXP_W, Format, decode
from .wide import LIMB, Wide

INT64_BITS = 62
"""Magnitude bits an int64 accumulator may use (one bit of headroom below the sign)."""
FLOAT64_BITS = 52
"""Magnitude bits of integer sums that fp64 matrix products (BLAS) compute exactly: every
partial sum in any order is an integer below 2^53."""
MIN_FLOAT64_WIDTH = 4
"""Narrower exponent slices than this (wide significands: fp32) use int64 products."""


@dataclass(frozen=True)
class GridValues:
    """Finite values of an array as signed integers sig · 2^shift, value = that · 2^lsb
    (lsb = emin - mbits of the format): `sig` int64 with the sign applied, `shift` >= 0."""

    sig: np.ndarray
    shift: np.ndarray
    lsb: int
    sig_bits: int
    finite: np.ndarray


def grid_values(bits: np.ndarray, fmt: Format) -> GridValues:
    """Decode bit patterns (any shape) with the model's decoder onto the format's grid."""
    s = fmt.spec
    a = np.asarray(bits).astype(np.uint64)
    flat = a.reshape(-1)
    u = decode(BV(VECTOR, VECTOR.lanes(flat, s.storage), s.storage), fmt)

    def arr(x, dtype) -> np.ndarray:
        return np.broadcast_to(np.asarray(x, dtype=dtype), flat.shape).reshape(a.shape)

    exp = arr(u.exp.v, np.int64)
    exp = np.where(exp >> (EXP_W - 1) != 0, exp - (1 << EXP_W), exp)
    sig = arr(u.sig.v, np.int64)
    neg = arr(u.sign.v, bool)
    finite = ~(arr(u.is_nan.v, bool) | arr(u.is_inf.v, bool))
    zero = arr(u.is_zero.v, bool) | ~finite
    sig = np.where(zero, 0, np.where(neg, -sig, sig))
    if s.is_integer:  # the decoder's sign and magnitude are the integer itself
        return GridValues(sig, np.zeros_like(sig), 0, s.storage, finite)
    shift = np.where(zero, 0, exp - s.emin)
    return GridValues(sig, shift, s.emin - s.mbits, s.mbits + 1, finite)


def _slices(g: GridValues, width: int) -> list[tuple[int, np.ndarray]]:
    """(base shift, int64 matrix with entries sig << (shift - base)) for every slice of
    `width` shifts that holds a nonzero value; the matrices add up to the grid values."""
    out = []
    idx = g.shift // width
    for i in np.unique(idx[g.sig != 0]):
        sel = (idx == i) & (g.sig != 0)
        base = int(i) * width
        m = np.where(sel, g.sig << np.where(sel, g.shift - base, 0), 0)
        out.append((base, m))
    return out


@dataclass(frozen=True)
class Exact:
    """An exact matrix: the integers `w` (gemm/wide.py) times 2^lsb."""

    w: Wide
    lsb: int

    @property
    def ints(self) -> np.ndarray:
        """The integers as Python ints (an object array; for tests and small reports)."""
        return self.w.to_ints()

    @property
    def shape(self) -> tuple[int, ...]:
        return self.w.shape

    def aligned(self, lsb: int, n_limbs: int = 0) -> Wide:
        """The integers on the finer grid 2^lsb (lsb <= self.lsb)."""
        return self.w.shifted(self.lsb - lsb, n_limbs)

    def plus(self, other: Exact) -> Exact:
        """self + other, exactly."""
        lo = min(self.lsb, other.lsb)
        x, y = self.aligned(lo), other.aligned(lo)
        n = max(len(x.limbs), len(y.limbs)) + 1
        return Exact(Wide(_padded(x, n).limbs + _padded(y, n).limbs).normalised(), lo)


def _padded(x: Wide, n: int) -> Wide:
    """x with n limbs (n >= its own count; normalising carries the sign up)."""
    extra = n - len(x.limbs)
    if extra <= 0:
        return x
    return Wide(np.concatenate([x.limbs, np.zeros((extra, *x.shape), np.int64)])).normalised()


def grid_exact(g: GridValues) -> Exact:
    """The grid values of an array as an Exact (every value finite), on the grid of its
    smallest nonzero value, so the limbs span only the exponents present."""
    nz = g.sig != 0
    low = int(g.shift[nz].min()) if nz.any() else 0
    shift = np.where(nz, g.shift - low, 0)
    w = Wide.zeros((int(shift.max(initial=0)) + g.sig_bits + 1) // LIMB + 4, g.sig.shape)
    w.add(g.sig, shift)
    return Exact(w.normalised(), g.lsb + low)


def exact_matmul(
    a_bits: np.ndarray,
    a_fmt: Format,
    b_bits: np.ndarray,
    b_fmt: Format,
    c_bits: np.ndarray | None = None,
    c_fmt: Format | None = None,
) -> Exact:
    """A·B (+ C) exactly for (M, K) and (K, N) bit patterns (C: (M, N)); finite inputs
    only (ValueError otherwise: a NaN or Inf has no exact product)."""
    ex = Product(a_bits, a_fmt, b_bits, b_fmt).tile(slice(None), slice(None))
    if c_bits is not None:
        assert c_fmt is not None
        gc = grid_values(c_bits, c_fmt)
        if not gc.finite.all():
            raise ValueError("the exact product needs a finite C")
        ex = ex.plus(grid_exact(gc))
    return ex


def all_finite(bits: np.ndarray, fmt: Format, rows: int) -> bool:
    """Whether every value of `bits` is finite, decoded `rows` rows at a time."""
    return all(grid_values(bits[r : r + rows], fmt).finite.all() for r in range(0, len(bits), rows))


class Product:
    """A·B exactly, for any tile of it: B is decoded and cut into exponent slices once
    (ValueError here for a non-finite A or B, or products too wide for int64), then
    `tile(rows, cols)` decodes only those rows of A (kept for the next tile of the same
    rows), so the wide integers span one tile."""

    def __init__(self, a_bits: np.ndarray, a_fmt: Format, b_bits: np.ndarray, b_fmt: Format):
        gb = grid_values(b_bits, b_fmt)
        if not (gb.finite.all() and all_finite(a_bits, a_fmt, rows_per_block(a_bits, 1 << 20))):
            raise ValueError("the exact product needs finite A and B")
        K = gb.sig.shape[0]
        sa_bits = a_fmt.spec.mbits + 1
        kchunk, width = _chunking(K, FLOAT64_BITS - sa_bits - gb.sig_bits)
        dtype = np.float64  # BLAS: exact while every partial sum is an integer below 2^53
        if width < MIN_FLOAT64_WIDTH:
            kchunk, width = _chunking(K, INT64_BITS - sa_bits - gb.sig_bits)
            dtype = np.int64
        if width < 1:
            raise ValueError(f"{a_fmt.spec.name} x {b_fmt.spec.name}: products too wide for int64")
        self.a_bits, self.a_fmt = a_bits, a_fmt
        self.kchunk, self.width, self.dtype, self.b_lsb = kchunk, width, dtype, gb.lsb
        self.shape = (np.shape(a_bits)[0], gb.sig.shape[1])
        self.b_slices = [
            [(base, m.astype(dtype)) for base, m in _slices(_rows(gb, k0, k0 + kchunk), width)]
            for k0 in range(0, K, kchunk)
        ]
        self._a: tuple[tuple[int, int, int], int, list] | None = None  # the last rows' slices

    def _a_slices(self, rows: slice) -> tuple[int, list]:
        """(lsb, slices per K chunk) of the rows of A."""
        key = rows.indices(self.shape[0])
        if self._a is None or self._a[0] != key:
            ga = grid_values(self.a_bits[rows], self.a_fmt)
            k, K = self.kchunk, ga.sig.shape[1]
            sl = [
                [(b, m.astype(self.dtype)) for b, m in _slices(_cols(ga, k0, k0 + k), self.width)]
                for k0 in range(0, K, k)
            ]
            self._a = (key, ga.lsb, sl)
        return self._a[1], self._a[2]

    def tile(self, rows: slice, cols: slice) -> Exact:
        """A·B[rows, cols], exactly (on the grid of its smallest slice product)."""
        a_lsb, a_slices = self._a_slices(rows)
        shape = (len(range(*rows.indices(self.shape[0]))), len(range(*cols.indices(self.shape[1]))))
        chunks = list(zip(a_slices, self.b_slices))
        bases = [ba + bb for sa, sb in chunks for ba, _ in sa for bb, _ in sb] or [0]
        low = min(bases)  # the grid of the smallest slice product: limbs only where values are
        acc = Wide.zeros((max(bases) - low + 64) // LIMB + 4, shape)
        for sa, sb in chunks:
            for base_a, ma in sa:
                for base_b, mb in sb:
                    acc.add((ma @ mb[:, cols]).astype(np.int64), base_a + base_b - low)
        return Exact(acc.normalised(), a_lsb + self.b_lsb + low)


def rows_per_block(x: np.ndarray, outputs: int) -> int:
    """Rows of a block of about `outputs` elements of x (at least 1)."""
    per_row = int(np.prod(np.shape(x)[1:], dtype=np.int64))
    return max(1, outputs // max(per_row, 1))


def tiles(shape: tuple[int, int], outputs: int) -> list[tuple[slice, slice]]:
    """(rows, cols) tiles of about `outputs` elements (at least one) that cover a matrix
    of `shape` once, row by row; near square (matrix products of tiles stay efficient)
    unless the matrix is narrower."""
    M, N = shape
    cols = max(1, min(N, math.isqrt(max(outputs, 1))))
    rows = max(1, min(M, outputs // cols))
    if rows == M:  # a short matrix: widen the tiles instead
        cols = max(1, min(N, outputs // rows))
    return [
        (slice(r, min(r + rows, M)), slice(c, min(c + cols, N)))
        for r in range(0, M, rows)
        for c in range(0, N, cols)
    ]


def _chunking(K: int, budget: int) -> tuple[int, int]:
    """(k chunk, slice width): a K chunk and an exponent-slice width such that a chunk's
    sums of slice products stay within `budget` bits beyond the significands."""
    kchunk = max(K, 1)
    while kchunk > 1 and budget - _kbits(kchunk) < 2:
        kchunk = (kchunk + 1) // 2
    return kchunk, (budget - _kbits(kchunk)) // 2


def _kbits(n: int) -> int:
    """Bits a sum of n terms may add to the largest term."""
    return max(1, (n - 1).bit_length())


def _cols(g: GridValues, lo: int, hi: int) -> GridValues:
    return GridValues(g.sig[:, lo:hi], g.shift[:, lo:hi], g.lsb, g.sig_bits, g.finite[:, lo:hi])


def _rows(g: GridValues, lo: int, hi: int) -> GridValues:
    return GridValues(g.sig[lo:hi], g.shift[lo:hi], g.lsb, g.sig_bits, g.finite[lo:hi])


@dataclass(frozen=True)
class ErrorStats:
    """How far an output is from the exact product: per element `ulps` (error in ulps of
    the output format at the exact value; inf for a NaN or Inf output) and `rel`
    (|d - x| / |x|; 0 when both are 0, inf when only x is), and the normwise relative
    error ||D - X||_F / ||X||_F over the finite outputs."""

    ulps: np.ndarray
    rel: np.ndarray
    normwise: float
    nonfinite: int

    @property
    def max_ulps(self) -> float:
        return float(self.ulps.max())

    @property
    def median_ulps(self) -> float:
        return float(np.median(self.ulps))

    @property
    def max_rel(self) -> float:
        return float(self.rel.max())

    @property
    def median_rel(self) -> float:
        return float(np.median(self.rel))

    def as_dict(self) -> dict[str, float | int]:
        return {
            "max_ulps": self.max_ulps,
            "median_ulps": self.median_ulps,
            "max_rel": self.max_rel,
            "median_rel": self.median_rel,
            "normwise_rel": self.normwise,
            "nonfinite": self.nonfinite,
        }


def measure(d_bits: np.ndarray, d_fmt: Format, exact: Exact) -> ErrorStats:
    """The error of output D (bit patterns of `d_fmt`, same shape as the product)."""
    return measure_blocks(d_bits, d_fmt, [(..., exact)])


def measure_blocks(
    d_bits: np.ndarray, d_fmt: Format, blocks: Iterable[tuple[Any, Exact]]
) -> ErrorStats:
    """The error of output D, measured block by block: `blocks` yields (index, exact
    value of D[index]) for blocks that cover D once (tiles of D, say, each exact block
    made only when its turn comes), so only the wide integers of one block are alive at
    a time. The figures equal those of measuring all of D at once: ulps and relative
    errors are exact roundings of each element's own values, and the normwise sums are
    taken over the whole array once each block's terms are put on the common scale."""
    shape = np.shape(d_bits)
    ulps, rel = np.empty(shape), np.empty(shape)
    dn, xn = np.empty(shape), np.empty(shape)  # the normwise terms, on each block's scale
    tops: list[tuple[Any, int | None]] = []
    nonfinite = 0
    for index, exact in blocks:
        top, nf = _measure_block(d_bits[index], d_fmt, exact, ulps, rel, dn, xn, index)
        tops.append((index, top))
        nonfinite += nf
    high = max((t for _, t in tops if t is not None), default=None)
    for index, top in tops:  # onto the common scale 2^-high: exact down to fp64's normal
        if top is not None and top != high:  # range; below it a term squares to 0 anyway
            np.ldexp(dn[index], top - high, out=dn[index])
            np.ldexp(xn[index], top - high, out=xn[index])
    return ErrorStats(ulps, rel, normwise(dn, xn), nonfinite)


def normwise(dn: np.ndarray, xn: np.ndarray) -> float:
    """||D - X|| / ||X|| (Frobenius) from the terms |D - X| (`dn`) and |X| (`xn`) on one
    common scale; squares them in place."""
    sq_err = float(np.sum(np.multiply(dn, dn, out=dn)))
    sq_x = float(np.sum(np.multiply(xn, xn, out=xn)))
    if sq_x:
        return float(np.sqrt(sq_err / sq_x))
    return 0.0 if sq_err == 0 else float("inf")


def _measure_block(d_bits, d_fmt: Format, exact: Exact, ulps, rel, dn, xn, index):
    """One block's ulps, relative errors and normwise terms written into the arrays at
    `index`; the terms are |D - X| and |X| over 2^top, top = floor(log2) of the largest
    of them in the block (None: all 0). Returns (top, non-finite outputs)."""
    gd = grid_values(d_bits, d_fmt)
    s = d_fmt.spec
    lo = min(exact.lsb, gd.lsb)
    x = exact.aligned(lo)
    dw = grid_exact(gd)  # D on its grid (0 where not finite)
    d = dw.aligned(lo, len(x.limbs))
    x = _padded(x, len(d.limbs))
    diff, mag = (d - x).abs(), x.abs()
    del d, x, dw
    _, xbit = mag.msb()  # |X| in [2^(xbit + lo), 2^(xbit + lo + 1)); -1 for 0
    e = np.where(xbit >= 0, xbit + lo, s.emin)
    ulp_exp = np.maximum(e, s.emin) - s.mbits
    fin = gd.finite
    ulps[index] = np.where(fin, diff.to_float(lo - ulp_exp), np.inf)
    scale = -np.maximum(xbit, 0)  # |X| scaled into [1, 2)
    dx, mx = diff.to_float(scale), mag.to_float(scale)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(xbit >= 0, dx / mx, np.where(dx == 0, 0.0, np.inf))
    rel[index] = np.where(fin, r, np.inf)
    _, dbit = diff.msb()
    top = int(max(np.max(np.where(fin, dbit, -1), initial=-1), np.max(xbit, initial=-1), 0))
    dn[index] = np.where(fin, diff.to_float(-top), 0.0)  # every value over the largest
    xn[index] = np.where(fin, mag.to_float(-top), 0.0)
    nz = bool(np.any(fin & (dbit >= 0))) or bool(np.any(xbit >= 0))
    return (top + lo if nz else None), int((~fin).sum())
