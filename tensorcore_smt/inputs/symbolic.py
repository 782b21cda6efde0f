"""Each constraint kind's meaning as a term on a bit-vector interpreter.

`holds` is a constraint on one input, `class_holds` one on all inputs together (the
class-wide kinds). On the symbolic interpreter they are the SMT terms of a query's class
(smt/formula.py); on the concrete ones they re-check a witness. Their concrete twin,
written on numpy independently, is concrete.py; tests/test_input_classes.py holds the
two equal on every kind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..bv.core import BV, Bool
from ..formats import EXP_W, Format, Specials, Unpacked, decode, max_finite_bits
from ..model.exact import grid, value_on_grid
from ..model.measure import reference_terms
from ..model.params import ModelParams
from .kinds import ZERO_KINDS, ConstraintKind

if TYPE_CHECKING:
    from .constraints import Constraint


def holds(cn: Constraint, x: BV, fmt: Format) -> Bool:
    """Whether the input `x` (format `fmt`) satisfies the per-input constraint `cn`."""
    u = decode(x, fmt)
    finite = ~u.is_inf & ~u.is_nan
    kind = cn.kind
    if kind == ConstraintKind.POSITIVE:
        return ~u.sign
    if kind == ConstraintKind.NEGATIVE:
        return u.sign
    if kind in ZERO_KINDS:
        return x.eq(0)
    if kind == ConstraintKind.FINITE:
        return finite
    if kind == ConstraintKind.NONZERO:
        return ~u.is_zero
    if kind == ConstraintKind.NORMAL_ONLY:
        return finite & (u.is_zero | u.sig.bit(u.mbits))
    if kind == ConstraintKind.EXPONENT_WINDOW:
        return finite & (u.is_zero | lead_in(u, cn.lo, cn.hi))
    if kind == ConstraintKind.FIX:
        return x.eq(cn.bits)
    if kind == ConstraintKind.INTEGER:
        return finite & (u.is_zero | integer(u, cn.lo))
    if kind == ConstraintKind.REPRESENTABLE:
        return finite & (u.is_zero | representable(u, cn.fmt))
    raise AssertionError(kind)


def lead(u: Unpacked) -> BV:
    """The exponent of u's leading one, floor(log2 |u|) for a nonzero u: its exponent
    minus the significand's leading zeros (value = sig 2^(exp - mbits))."""
    return u.exp - u.sig.clz().resize(EXP_W)


def lead_in(u: Unpacked, lo: int, hi: int) -> Bool:
    """Whether 2^lo <= |u| < 2^(hi+1): the exponent of the leading one lies in [lo, hi]."""
    b = u.exp.b
    e = lead(u)
    return e.sge(BV.const(b, lo, EXP_W)) & e.sle(BV.const(b, hi, EXP_W))


def low_bits_zero(sig: BV, k: BV) -> Bool:
    """Whether the `k` low bits of `sig` are zero (k signed, EXP_W bits; none for k <= 0,
    all of them for k >= the width)."""
    b = sig.b
    w = sig.w
    kk = k.smax(0).smin(w).resize(w)
    return (sig << (BV.const(b, w, w) - kk)).eq(0) | kk.eq(0)


def integer(u: Unpacked, bits: int) -> Bool:
    """Whether a nonzero finite u is an integer with |u| <= 2^bits - 1: its leading one
    below 2^bits and no significand bit below 2^0 (the mbits - exp lowest)."""
    b = u.exp.b
    small = lead(u).slt(BV.const(b, bits, EXP_W))
    return small & low_bits_zero(u.sig, BV.const(b, u.mbits, EXP_W) - u.exp)


def representable(u: Unpacked, t: Format) -> Bool:
    """Whether a nonzero finite u is a normal number of the format `t`: its leading one
    in t's normal exponents, no significand bit below t's precision there (the bits more
    than t.mbits below the leading one are zero), not above t's largest finite value (an
    FN format spends its all-ones pattern on NaN), and not negative when t is unsigned."""
    b = u.exp.b
    s = t.spec
    e = lead(u)
    clz = u.sig.clz().resize(EXP_W)
    # the leading one is bit mbits - clz of sig: bits below mbits - clz - t.mbits must be 0
    fits = low_bits_zero(u.sig, BV.const(b, u.mbits - s.mbits, EXP_W) - clz)
    ok = lead_in(u, s.emin, s.emax) & fits
    if s.specials == Specials.FN and s.mbits:
        # above the largest finite: at e_max, the t.mbits bits after the leading one all 1
        w = u.sig.w
        top = u.sig << clz.resize(w)  # the leading one at bit w - 1
        if s.mbits <= w - 1:
            ones = top.extract(w - 2, w - 1 - s.mbits).eq((1 << s.mbits) - 1)
            ok = ok & ~(e.eq(BV.const(b, s.emax, EXP_W)) & ones)
    if not s.signed:
        ok = ok & ~u.sign
    return ok


def class_holds(cn: Constraint, a: list[BV], b: list[BV], c: BV, p: ModelParams) -> Bool:
    """Whether the inputs together satisfy a class-wide constraint (kinds.GLOBAL_KINDS),
    stated for M = |c| + sum |a_k b_k| in d's format. Read on finite inputs: the goals
    that carry these constraints ask for finite inputs beside them."""
    lsb, width = grid(p.a_fmt, p.b_fmt, p.c_fmt, p.d_fmt, p.K)
    _, norm = reference_terms(a, b, c, (p.a_fmt, p.b_fmt, p.c_fmt), lsb, width)
    if cn.kind == ConstraintKind.NO_OVERFLOW:
        top = value_on_grid(
            BV.const(c.b, max_finite_bits(p.d_fmt), p.d_fmt.spec.storage), p.d_fmt, lsb, width
        )
        return norm.ule(top)
    if cn.kind == ConstraintKind.NO_UNDERFLOW:
        s = p.d_fmt.spec
        smallest = BV.const(c.b, 1 << (s.emin - lsb), width)
        return norm.eq(0) | norm.uge(smallest)
    raise AssertionError(cn.kind)
