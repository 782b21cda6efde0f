"""Addends: exact signed terms (operands, products) and their alignment to a common scale."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..bv.core import BV, Bool
from ..formats import EXP_W, Unpacked

EXP_MIN = -(1 << (EXP_W - 1)) + 1
"""Exponent given to terms that must never win a maximum (ignored zeros)."""


class AlignMode(Enum):
    """What happens to bits shifted out below the F fractional bits during alignment."""

    TRUNCATE = "truncate"  # drop them from the magnitude (round toward zero; NVIDIA)
    ROUND_DOWN = "round-down"  # floor of the signed value (two's complement; CDNA3)
    EXACT = "exact"  # keep every bit (an ideal accumulator)


class ProductExponent(Enum):
    """Exponent attributed to an exact product before alignment."""

    UNNORMALIZED = "unnormalized"  # e_a + e_b, significand in [0, 4) (MMA-Sim §IV-C step 2)
    NORMALIZED = "normalized"  # exponent of the product's leading one (an exact fp32 product)


@dataclass
class Addend:
    """(-1)^sign * mag * 2^(exp - fb): `fb` fraction bits of `mag` below exponent `exp`."""

    sign: Bool
    mag: BV
    exp: BV
    fb: int
    is_zero: Bool

    @property
    def int_bits(self) -> int:
        """Bits of `mag` at or above the 2^exp position (its integer part's width)."""
        return self.mag.w - self.fb


def operand_addend(u: Unpacked) -> Addend:
    """An operand as an addend (its significand has `mbits` fraction bits)."""
    return Addend(u.sign, u.sig, u.exp, u.mbits, u.is_zero)


def product_addend(ua: Unpacked, ub: Unpacked, mode: ProductExponent) -> Addend:
    """The exact product of two operands (no rounding, no overflow)."""
    wa, wb = ua.sig.w, ub.sig.w
    mag = ua.sig.zext(wb) * ub.sig.zext(wa)
    fb = ua.mbits + ub.mbits
    exp = ua.exp + ub.exp
    is_zero = ua.is_zero | ub.is_zero | mag.eq(0)
    sign = ua.sign ^ ub.sign
    if mode == ProductExponent.NORMALIZED:
        w = mag.w
        lz = mag.clz()
        exp = exp + (w - 1 - fb) - lz.resize(EXP_W)
        mag = mag << lz
        fb = w - 1
    return Addend(sign, mag, exp, fb, is_zero)


def invalid_product(ua: Unpacked, ub: Unpacked) -> Bool:
    """0 * Inf or Inf * 0: the product is NaN although neither operand is."""
    return (ua.is_inf & ub.is_zero) | (ua.is_zero & ub.is_inf)


def product_is_nan(ua: Unpacked, ub: Unpacked) -> Bool:
    """The product of two operands is NaN: a NaN operand, or 0 * Inf."""
    return ua.is_nan | ub.is_nan | invalid_product(ua, ub)


def max_exponent(terms: list[BV]) -> BV:
    """Signed maximum of exponents."""
    out = terms[0]
    for e in terms[1:]:
        out = out.smax(e)
    return out


def align(t: Addend, e_max: BV, frac: int, width: int, mode: AlignMode) -> tuple[BV, Bool]:
    """Magnitude of `t` on the grid 2^(e_max - frac), in `width` bits, and whether bits
    were lost. ROUND_DOWN returns the magnitude of the floored signed value."""
    up = max(0, frac - t.fb)
    extra = max(0, t.fb - frac)
    if t.mag.w + up > width:
        raise ValueError(f"alignment window of {width} bits is narrower than the term")
    m = t.mag.zext(width - t.mag.w) << up
    sh = ((e_max - t.exp).umin(width) + extra).umin(width)
    sh_w = sh.resize(width)
    kept = m.lshr(sh_w)
    lost = (kept << sh_w).ne(m)
    if mode == AlignMode.ROUND_DOWN:
        kept = (t.sign & lost).ite(kept + 1, kept)
    return kept, lost & ~t.is_zero


def scale_term(t: Addend, sa: Unpacked, sb: Unpacked) -> Addend:
    """`t` times the scale factors sa * sb (MMA-Sim §IV-C, §IV-E step 4: the significands
    multiply the term, their exponents add to the term's alignment exponent). A zero
    scale (ue4m3 0) makes the term a zero; NaN scales are the caller's special values.
    UE8M0 scales are powers of two, so only the exponent moves."""
    is_zero = t.is_zero | sa.is_zero | sb.is_zero
    exp = t.exp + sa.exp + sb.exp
    if sa.mbits == 0 and sb.mbits == 0 and sa.sig.w == 1 and sb.sig.w == 1:
        return Addend(t.sign, t.mag, exp, t.fb, is_zero)
    s = sa.sig.zext(sb.sig.w) * sb.sig.zext(sa.sig.w)
    mag = t.mag.zext(s.w) * s.zext(t.mag.w)
    return Addend(t.sign, mag, exp, t.fb + sa.mbits + sb.mbits, is_zero)
