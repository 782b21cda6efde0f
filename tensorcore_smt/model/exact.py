"""Exact values on a fixed-point grid: the reference that `compare errors` measures against.

Every finite value of a format, and every exact product of two, is an integer multiple
of a smallest unit 2^lsb; on that grid the exact dot product c + sum a_k b_k and the
error |d - exact| of an output are plain (wide) integers, so comparing two variants'
errors needs no rounding at all.
"""

from __future__ import annotations

from ..bv.core import BV, Bool
from ..formats import Format, decode
from .terms import Addend, ProductExponent, operand_addend, product_addend


def grid(a_fmt: Format, b_fmt: Format, c_fmt: Format, d_fmt: Format, K: int) -> tuple[int, int]:
    """(lsb, width): a signed grid holding c, every product, their sum and any d exactly."""
    sa, sb, sc, sd = (f.spec for f in (a_fmt, b_fmt, c_fmt, d_fmt))
    lsb = min(
        sa.emin - sa.mbits + sb.emin - sb.mbits,
        sc.emin - sc.mbits,
        sd.emin - sd.mbits,
    )
    top = max(sa.emax + sb.emax + 2 + K.bit_length(), sc.emax + 1, sd.emax + 1) + 2
    return lsb, top - lsb + 1


def on_grid(t: Addend, lsb: int, width: int) -> BV:
    """The signed integer value of an addend in units of 2^lsb (zero terms give 0)."""
    mag = t.mag.resize(width)
    shift = (t.exp - t.fb - lsb).resize(width, signed=True)
    v = t.is_zero.ite(BV.const(mag.b, 0, width), mag << shift)
    return t.sign.ite(-v, v)


def exact_dot(a_bits: list[BV], b_bits: list[BV], c_bits: BV, fmts, lsb: int, width: int) -> BV:
    """c + sum a_k b_k exactly, in units of 2^lsb (finite inputs only)."""
    a_fmt, b_fmt, c_fmt = fmts
    acc = on_grid(operand_addend(decode(c_bits, c_fmt)), lsb, width)
    for x, y in zip(a_bits, b_bits):
        t = product_addend(decode(x, a_fmt), decode(y, b_fmt), ProductExponent.UNNORMALIZED)
        acc = acc + on_grid(t, lsb, width)
    return acc


def value_on_grid(bits: BV, fmt: Format, lsb: int, width: int) -> BV:
    """A finite value of `fmt` in units of 2^lsb."""
    return on_grid(operand_addend(decode(bits, fmt)), lsb, width)


def on_grid_checked(t: Addend, lsb: int, width: int) -> tuple[BV, Bool]:
    """(value, fits): the signed value of an addend in units of 2^lsb, and whether it is
    exactly that (no bit below 2^lsb, the magnitude within the grid's `width` - 2 bits).
    A grid narrowed to an input class holds every input and their exact sum, but an
    output may fall off it."""
    b = t.mag.b
    w = max(width, t.mag.w) + 2
    mag = t.mag.resize(w)
    s = (t.exp - t.fb - lsb).resize(w, signed=True)  # signed shift in w bits
    neg_s = s.is_neg()
    up = mag << s
    down = mag.lshr(-s)
    v = neg_s.ite(down, up)
    back = neg_s.ite(v << -s, v.lshr(s))
    fits = back.eq(mag) & v.lshr(BV.const(b, width - 2, w)).eq(0)
    v = t.is_zero.ite(BV.const(b, 0, w), v).resize(width)
    return t.sign.ite(-v, v), t.is_zero | fits
