"""Normalise an exact magnitude and round it into a floating-point format.

This is the single rounding rule of the project: the fused units' final step, every IEEE
reference operation (add, mul, fma, convert) and the chained intermediate results all
call `round_to_format`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..bv.core import BV, Bool
from ..formats import EXP_W, Format, Rounding, Specials


class Overflow(Enum):
    """What a result too large for the format becomes."""

    IEEE = "ieee"  # Inf or the largest finite number, by rounding direction
    TO_INF = "inf"  # always Inf (NVIDIA's final RZ step: |x| >= 2^128 -> Inf, MMA-Sim §IV-C)
    # always the largest finite number of the result's sign, whatever the rounding
    # direction (PTX ISA cvt `.satfinite`: |x| > MAX_NORM gives sign-preserved MAX_NORM;
    # cuBLASLt FP8 outputs)
    SATURATE = "saturate"


@dataclass
class Exact:
    """An exact signed value (-1)^sign * mag * 2^q; `mag` is unsigned, `q` signed EXP_W."""

    sign: Bool
    mag: BV
    q: BV


def _increment(mode: Rounding, sign: Bool, lsb: Bool, rnd: Bool, sticky: Bool) -> Bool:
    if mode == Rounding.RNE:
        return rnd & (sticky | lsb)
    if mode == Rounding.RNA:
        return rnd
    if mode == Rounding.RZ:
        return Bool.const(sign.b, False)
    if mode == Rounding.RTP:
        return ~sign & (rnd | sticky)
    if mode == Rounding.RTN:
        return sign & (rnd | sticky)
    raise ValueError(mode)


def round_to_format(
    x: Exact,
    fmt: Format,
    mode: Rounding,
    zero_sign: Bool,
    overflow: Overflow = Overflow.IEEE,
    flush: bool = False,
) -> BV:
    """Bits of `x` rounded into `fmt` (storage width). A zero magnitude gives a zero
    whose sign is `zero_sign`. Subnormal results are produced exactly as IEEE 754 asks,
    or, with `flush`, replaced by a zero of the result's sign: flush-to-zero decided on
    the rounded value (MMA-Sim Algorithm 3 tests |x| < 2^emin after each FP32 operation),
    so a value that rounds up to the smallest normal number is kept. Formats without
    infinities whose all-ones pattern is NaN (E4M3, `Specials.FN`) overflow to that NaN,
    or under `Overflow.SATURATE` to their largest finite number."""
    s = fmt.spec
    if s.specials not in (Specials.IEEE, Specials.FN) or s.ignored_high:
        raise ValueError(f"rounding into {s.name} is not supported")
    b = x.mag.b
    p = s.mbits + 1
    mag, q = x.mag, x.q
    if mag.w < p + 2:  # make room for the round bit and one sticky bit
        pad = p + 2 - mag.w
        mag = mag.concat(BV.const(b, 0, pad))
        q = q - pad
    w = mag.w
    lz = mag.clz()
    e_lead = q + (w - 1) - lz.resize(EXP_W)  # exponent of the leading one
    norm = mag << lz
    below = BV.const(b, s.emin, EXP_W) - e_lead  # > 0 when the result is subnormal
    sub_shift = below.sgt(0).ite(below, BV.const(b, 0, EXP_W)).umin(w)
    dw = (2 * w).bit_length() + 1
    drop = sub_shift.resize(dw) + (w - p)  # low bits of `norm` that do not survive
    drop = drop.umin(w).resize(w) if dw > w else drop.zext(w - dw)
    kept = norm.lshr(drop)
    rnd = norm.lshr(drop - 1).bit(0)
    sticky = (norm & ((BV.const(b, 1, w) << (drop - 1)) - 1)).ne(0)
    inc = _increment(mode, x.sign, kept.bit(0), rnd, sticky)
    e_clamped = e_lead.smax(BV.const(b, s.emin, EXP_W))
    enc_w = EXP_W + s.mbits + 2
    # Biased exponent minus one, shifted over the mantissa: the hidden bit of `kept`
    # adds the missing one, and a rounding carry moves into the exponent on its own.
    field = (e_clamped + (s.bias - 1)).resize(enc_w) << s.mbits
    mag_bits = field + kept.resize(enc_w) + inc.to_bv(enc_w)
    inf_mag = ((1 << s.ebits) - 1) << s.mbits
    if s.specials == Specials.FN:  # the all-ones magnitude is NaN, the one below it the top
        inf_mag = (1 << (s.ebits + s.mbits)) - 1
    max_mag = inf_mag - 1
    overflowed = mag_bits.uge(inf_mag)
    if overflow == Overflow.SATURATE:
        to_inf = Bool.const(b, False)
    elif overflow == Overflow.TO_INF:
        to_inf = Bool.const(b, True)
    elif mode in (Rounding.RNE, Rounding.RNA):
        to_inf = Bool.const(b, True)
    elif mode == Rounding.RZ:
        to_inf = Bool.const(b, False)
    elif mode == Rounding.RTP:
        to_inf = ~x.sign
    else:
        to_inf = x.sign
    big = to_inf.ite(BV.const(b, inf_mag, enc_w), BV.const(b, max_mag, enc_w))
    mag_bits = overflowed.ite(big, mag_bits)
    if flush:  # a zero exponent field after rounding: subnormal, becomes a signed zero
        mag_bits = mag_bits.ult(1 << s.mbits).ite(BV.const(b, 0, enc_w), mag_bits)
    body_w = s.ebits + s.mbits
    is_zero = x.mag.eq(0)
    sign = is_zero.ite(zero_sign, x.sign)
    mag_bits = is_zero.ite(BV.const(b, 0, enc_w), mag_bits)
    out = sign.to_bv(1).concat(mag_bits.extract(body_w - 1, 0))
    if s.ignored_low:
        out = out.concat(BV.const(b, 0, s.ignored_low))
    return out


def special_bits(
    b, fmt: Format, nan_bits: int, is_nan: Bool, is_inf: Bool, inf_neg: Bool, finite: BV
) -> BV:
    """Select NaN / signed Inf / the finite result, as storage-width bits of `fmt`."""
    s = fmt.spec
    inf_mag = (((1 << s.ebits) - 1) << s.mbits) << s.ignored_low
    sign_bit = 1 << (s.storage - 1)
    inf = inf_neg.ite(BV.const(b, inf_mag | sign_bit, s.storage), BV.const(b, inf_mag, s.storage))
    return is_nan.ite(BV.const(b, nan_bits, s.storage), is_inf.ite(inf, finite))
