"""Error measures of an output against a reference, on the exact grid of model/exact.py.

A certificate bounds how far a unit's output d can be from a reference r: the exact
result e = c + sum a_k b_k, or a second unit's output. Four measures (Blanchard, Higham,
Lopez, Mary, Pranesh, "Mixed precision block fused multiply-add: error analysis and
application to GPU tensor cores", SIAM J. Sci. Comput. 42(3), 2020, for the normwise
denominator of block-FMA analysis):

  abs       |d - r|
  rel       |d - r| / |r|                    (infinite where r = 0 and d != r)
  normwise  |d - r| / (|c| + sum |a_k b_k|)  (infinite where that is 0 and d != r)
  ulp       |d - r| / ulp(r), ulp(r) the unit in the last place of r in d's format
            (2^(max(E, e_min) - m), E the exponent of |r|, clamped to e_max; ulp(0) is
            the smallest subnormal)

Every value involved is an integer multiple of 2^lsb, so "measure > T" for a rational
threshold T = p/q is a comparison of wide integers: err * q > p * den, with den the
measure's denominator in grid units (2^-lsb for abs). The same function builds it on
the symbolic interpreter (the solvers' question) and on the concrete one (the witness
re-check); `measure_value` computes the measure with Python fractions, independently
of the grid, for reports and tests.
"""

from __future__ import annotations

import math
from enum import Enum
from fractions import Fraction

from ..bv.core import BV, Bool
from ..formats import Format, decode, value_of
from .exact import on_grid_checked
from .terms import ProductExponent, operand_addend, product_addend


class Measure(Enum):
    """How the distance of an output from its reference is measured."""

    ABS = "abs"
    REL = "rel"
    NORMWISE = "normwise"
    ULP = "ulp"

    @property
    def formula(self) -> str:
        return {
            Measure.ABS: "|d - r|",
            Measure.REL: "|d - r| / |r|",
            Measure.NORMWISE: "|d - r| / (|c| + sum |a_k b_k|)",
            Measure.ULP: "|d - r| / ulp(r)",
        }[self]

    @classmethod
    def parse(cls, text: str) -> Measure:
        for m in cls:
            if m.value == text:
                return m
        raise ValueError(f"unknown measure {text!r}; known: {', '.join(m.value for m in cls)}")


def _bitlen(x: int) -> int:
    return max(1, abs(x).bit_length())


def ulp_exponent_range(fmt: Format) -> tuple[int, int]:
    """(smallest, largest) exponent of ulp(r) in `fmt`: 2^(e_min - m) .. 2^(e_max - m)."""
    s = fmt.spec
    return s.emin - s.mbits, s.emax - s.mbits


def exceeds(
    dv: BV,
    ref: BV,
    norm: BV,
    d_fmt: Format,
    measure: Measure,
    threshold: Fraction,
    lsb: int,
    width: int,
) -> Bool:
    """Whether the measure of an output against `ref` exceeds `threshold`: `dv` (the
    output's value) and `ref` are signed, `norm` (|c| + sum |a_k b_k|) unsigned grid
    integers of `width` bits in units of 2^lsb."""
    if threshold < 0:
        raise ValueError(f"threshold {threshold} is negative")
    b = dv.b
    p, q = threshold.numerator, threshold.denominator
    lo_u, hi_u = ulp_exponent_range(d_fmt)
    # ulp(r) may lie below the grid's unit: both sides are then scaled by 2^k0
    k0 = max(0, lsb - lo_u) if measure == Measure.ULP else 0
    extra = _bitlen(q) + _bitlen(p) + 4 + k0
    if measure == Measure.ABS:
        extra += abs(lsb)
    elif measure == Measure.ULP:
        extra += max(0, hi_u - lsb)
    w = width + 2 + extra
    err = (dv.resize(w, signed=True) - ref.resize(w, signed=True)).abs()
    lhs = err * BV.const(b, q, w)
    pc = BV.const(b, p, w)
    if measure == Measure.ABS:
        rhs = pc << BV.const(b, -lsb, w) if lsb < 0 else pc
        if lsb > 0:
            lhs = lhs << BV.const(b, lsb, w)
    elif measure == Measure.REL:
        rhs = pc * ref.resize(w, signed=True).abs()
    elif measure == Measure.NORMWISE:
        rhs = pc * norm.resize(w)
    else:
        # ulp exponent u = clamp(exponent of |ref|, e_min, e_max) - m; in grid units
        # (plus k0) the right side is p 2^(u - lsb + k0)
        lhs = lhs << BV.const(b, k0, w) if k0 else lhs
        mag = ref.resize(w, signed=True).abs()
        lead = BV.const(b, w - 1, w) - mag.clz().resize(w)
        s = d_fmt.spec
        lo = BV.const(b, (s.emin - lsb) % (1 << w), w)
        hi = BV.const(b, (s.emax - lsb) % (1 << w), w)
        e = mag.eq(0).ite(lo, lead.smax(lo).smin(hi))
        rhs = pc << (e + BV.const(b, (k0 - s.mbits) % (1 << w), w))
    return lhs.ugt(rhs)


def reference_terms(
    a: list[BV], b: list[BV], c: BV, fmts: tuple[Format, Format, Format], lsb: int, width: int
) -> tuple[BV, BV]:
    """(e, n): the exact c + sum a_k b_k and |c| + sum |a_k b_k| on the grid (finite
    inputs), the reference and the normwise denominator. The grid may be one narrowed
    to an input class (smt.query.class_grid), whose inputs and products lie on it, so
    terms are placed by a shift either way (on_grid_checked)."""
    a_fmt, b_fmt, c_fmt = fmts
    tc = on_grid_checked(operand_addend(decode(c, c_fmt)), lsb, width)[0]
    e, n = tc, tc.abs()
    for x, y in zip(a, b):
        t = product_addend(decode(x, a_fmt), decode(y, b_fmt), ProductExponent.UNNORMALIZED)
        g = on_grid_checked(t, lsb, width)[0]
        e, n = e + g, n + g.abs()
    return e, n


def exact_value(
    a: list[int], b: list[int], c: int, fmts: tuple[Format, Format, Format]
) -> tuple[Fraction, Fraction]:
    """(e, n) with Python fractions: c + sum a_k b_k and |c| + sum |a_k b_k|."""
    a_fmt, b_fmt, c_fmt = fmts
    vc = value_of(c, c_fmt)
    e, n = vc, abs(vc)
    for x, y in zip(a, b):
        t = value_of(x, a_fmt) * value_of(y, b_fmt)
        e, n = e + t, n + abs(t)
    return e, n


def ulp_of(r: Fraction, fmt: Format) -> Fraction:
    """The unit in the last place of r in `fmt` (clamped to the format's exponent range)."""
    lo_u, hi_u = ulp_exponent_range(fmt)
    if r == 0:
        return Fraction(2) ** lo_u
    a = abs(r)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    u = min(max(e, fmt.spec.emin), fmt.spec.emax) - fmt.spec.mbits
    return Fraction(2) ** u


def measure_value(
    d: Fraction | float,
    ref: Fraction | float,
    norm: Fraction,
    measure: Measure,
    d_fmt: Format,
) -> Fraction | float:
    """The measure with exact rationals (math.inf where d or ref is not finite, or the
    denominator is zero while d != ref)."""
    if isinstance(d, float) or isinstance(ref, float):
        return math.inf
    err = abs(d - ref)
    if measure == Measure.ABS:
        return err
    if measure == Measure.ULP:
        return err / ulp_of(ref, d_fmt)
    den = abs(ref) if measure == Measure.REL else norm
    if den == 0:
        return Fraction(0) if err == 0 else math.inf
    return err / den
