"""The error of a GEMM output against the exact product A·B (+ C), in integer arithmetic.

Every finite value of a binary format is (-1)^s · sig · 2^(exp - mbits) with an integer
significand (formats.decode), so the exact product of two matrices of such values is an
integer matrix on a grid of 2^lsb. `exact_matmul` computes it with int64 matrix products
over exponent slices, each slice small enough that no int64 partial sum can overflow
(K · 2^(bits_a + w) · 2^(bits_b + w) < 2^63 for slice width w), and joins the slices with
Python-int shifts: no floating-point operation touches a value, and the result is exact
in any summation order. `measure` compares an output D with it: the error of each element
in ulps of the output format at the exact value, and relative errors (elementwise and
normwise, ||D - X||_F / ||X||_F).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..bv.core import BV
from ..bv.vector import VECTOR
from ..spec.formats import EXP_W, Format, decode

INT64_BITS = 62
"""Magnitude bits an int64 accumulator may use (one bit of headroom below the sign)."""


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
    """An exact matrix: `ints` (object array of Python ints) times 2^lsb."""

    ints: np.ndarray
    lsb: int


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
    ga, gb = grid_values(a_bits, a_fmt), grid_values(b_bits, b_fmt)
    if not (ga.finite.all() and gb.finite.all()):
        raise ValueError("the exact product needs finite A and B")
    M, K = ga.sig.shape
    N = gb.sig.shape[1]
    budget = INT64_BITS - ga.sig_bits - gb.sig_bits
    kchunk = max(K, 1)
    while kchunk > 1 and budget - _kbits(kchunk) < 2:
        kchunk = (kchunk + 1) // 2
    width = (budget - _kbits(kchunk)) // 2
    if width < 1:
        raise ValueError(f"{a_fmt.spec.name} x {b_fmt.spec.name}: products too wide for int64")
    lsb = ga.lsb + gb.lsb
    acc = np.zeros((M, N), dtype=object)
    acc[...] = 0
    for k0 in range(0, K, kchunk):
        sa = _slices(_cols(ga, k0, k0 + kchunk), width)
        sb = _slices(_rows(gb, k0, k0 + kchunk), width)
        for base_a, ma in sa:
            for base_b, mb in sb:
                part = (ma @ mb).astype(object)
                acc += part * (1 << (base_a + base_b))
    if c_bits is not None:
        assert c_fmt is not None
        gc = grid_values(c_bits, c_fmt)
        if not gc.finite.all():
            raise ValueError("the exact product needs a finite C")
        lo = min(lsb, gc.lsb)
        c_int = gc.sig.astype(object) * _pow2(gc.shift)
        acc = acc * (1 << (lsb - lo)) + c_int * (1 << (gc.lsb - lo))
        lsb = lo
    return Exact(acc, lsb)


def _kbits(n: int) -> int:
    """Bits a sum of n terms may add to the largest term."""
    return max(1, (n - 1).bit_length())


def _pow2(shift: np.ndarray) -> np.ndarray:
    out = np.empty(shift.shape, dtype=object)
    out.reshape(-1)[:] = [1 << int(t) for t in shift.reshape(-1)]
    return out


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


def _ratio(num: int, den_exp: int) -> float:
    """num / 2^den_exp as a float (correctly rounded; Python int true division)."""
    if den_exp <= 0:
        return float(num << -den_exp)
    return num / (1 << den_exp)


def measure(d_bits: np.ndarray, d_fmt: Format, exact: Exact) -> ErrorStats:
    """The error of output D (bit patterns of `d_fmt`, same shape as the product)."""
    gd = grid_values(d_bits, d_fmt)
    s = d_fmt.spec
    lo = min(exact.lsb, gd.lsb)
    x_shift, d_shift = exact.lsb - lo, gd.lsb - lo
    xs = exact.ints.reshape(-1)
    dsig, dsh, dfin = gd.sig.reshape(-1), gd.shift.reshape(-1), gd.finite.reshape(-1)
    ulps = np.empty(xs.shape, dtype=np.float64)
    rel = np.empty(xs.shape, dtype=np.float64)
    sq_err = sq_x = 0
    for i, x in enumerate(xs):
        x = int(x) << x_shift
        if not dfin[i]:
            ulps[i] = rel[i] = math.inf
            continue
        d = (int(dsig[i]) << int(dsh[i])) << d_shift
        diff = abs(d - x)
        mag = abs(x)
        e = (mag.bit_length() - 1 + lo) if mag else s.emin
        ulp_exp = max(e, s.emin) - s.mbits
        ulps[i] = _ratio(diff, ulp_exp - lo)
        rel[i] = (diff / mag) if mag else (0.0 if diff == 0 else math.inf)
        sq_err += diff * diff
        sq_x += mag * mag
    normwise = math.sqrt(sq_err / sq_x) if sq_x else (0.0 if sq_err == 0 else math.inf)
    return ErrorStats(
        ulps.reshape(exact.ints.shape), rel.reshape(exact.ints.shape), normwise, int((~dfin).sum())
    )
