"""Exact values on a fixed-point grid: the reference that `compare errors` measures against.

Every finite value of a format, and every exact product of two, is an integer multiple
of a smallest unit 2^lsb; on that grid the exact dot product c + sum a_k b_k and the
error |d - exact| of an output are plain (wide) integers, so comparing two variants'
errors needs no rounding at all.
"""

from __future__ import annotations

from ..bv.core import BV
from ..spec.formats import Format, decode
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
