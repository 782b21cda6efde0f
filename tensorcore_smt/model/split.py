"""Single-precision products on a half-precision unit by operand splitting (Valpey et al. 2025 §6).

Each single-precision input x is split into x_hi = RN(x) in the unit's operand format
and a residual x_lo = RN((x - x_hi) * 2^s), so that x ~ x_hi + x_lo * 2^-s; the unit
(any preset's dot-add model, chained groups included) computes the cross products.

- Markidis et al. (s = 0): the four products are accumulated in the unit, c included,
  smallest first: d = hi*hi + (lo*hi + (hi*lo + (lo*lo + c))), each `+` one unit call.
- Ootomo-Yokota (s = split_scale, 11 in their paper): the unit runs with c = 0 on
  hi*hi, on hi*lo + lo*hi (one chained call) and on lo*lo; the three partial results
  are scaled back and added outside the unit in round-to-nearest, c last:
  d = RN(RN(main + RN(corr * 2^-s + rr * 2^-2s)) + c).

Valpey et al. 2025 §6 writes both with all four products (equation for A_f32 B_f32) and the
Ootomo-Yokota sum as D = RN(A_f32 B_f32 + C); the order of the outside additions
above is the one that equation reads in. Everything is built from the IEEE operations
of `ieee` and the unit's own model, so it runs on every interpreter.
"""

from __future__ import annotations

from collections.abc import Callable

from ..bv.core import BV
from ..formats import Format, Rounding
from . import ieee
from .params import ModelParams, Split

RNE = Rounding.RNE

Unit = Callable[[list[BV], list[BV], BV, ModelParams], BV]


def power_of_two(fmt: Format, e: int) -> int:
    """Bit pattern of 2^e in `fmt` (a normal number)."""
    spec = fmt.spec
    if not spec.emin <= e <= spec.emax:
        raise ValueError(f"2^{e} is not a normal {spec.name} number")
    return (e + spec.bias) << spec.mbits


def split_operand(x: BV, outer: Format, inner: Format, scale: int) -> tuple[BV, BV]:
    """(x_hi, x_lo): x rounded to `inner`, and the residual x - x_hi scaled by 2^scale
    and rounded to `inner`. The subtraction is exact in `outer` for finite x."""
    hi = ieee.convert(x, outer, inner, RNE)
    hi_wide = ieee.convert(hi, inner, outer, RNE)
    sign = 1 << (outer.spec.storage - 1)
    r = ieee.add(x, outer, hi_wide ^ sign, outer, outer, RNE)
    if scale:
        two_s = BV.const(x.b, power_of_two(outer, scale), outer.spec.storage)
        r = ieee.mul(r, outer, two_s, outer, outer, RNE)
    return hi, ieee.convert(r, outer, inner, RNE)


def unit_params(p: ModelParams) -> ModelParams:
    """The unit under the split: its own operand format, no split."""
    return p.with_(split=Split.NONE, a_fmt=p.split_fmt, b_fmt=p.split_fmt)


def split_dot(a_bits: list[BV], b_bits: list[BV], c_bits: BV, p: ModelParams, unit: Unit) -> BV:
    """d = c + sum a_k b_k for single-precision a, b by the split algorithm `p.split`,
    with `unit` (the dot-add dispatcher) computing each product sum on the unit `p`."""
    if p.c_fmt != p.d_fmt:
        raise ValueError("a split algorithm chains the unit, so c and d need the same format")
    q = unit_params(p)
    scale = p.split_scale if p.split == Split.OOTOMO_YOKOTA else 0
    a = [split_operand(x, p.a_fmt, q.a_fmt, scale) for x in a_bits]
    b = [split_operand(y, p.b_fmt, q.b_fmt, scale) for y in b_bits]
    a_hi, a_lo = [t[0] for t in a], [t[1] for t in a]
    b_hi, b_lo = [t[0] for t in b], [t[1] for t in b]
    if p.split == Split.MARKIDIS:
        acc = unit(a_lo, b_lo, c_bits, q)
        acc = unit(a_hi, b_lo, acc, q)
        acc = unit(a_lo, b_hi, acc, q)
        return unit(a_hi, b_hi, acc, q)
    if p.split == Split.OOTOMO_YOKOTA:
        fmt = p.d_fmt
        w = fmt.spec.storage
        zero = BV.const(c_bits.b, 0, w)
        main = unit(a_hi, b_hi, zero, q)
        corr = unit(a_lo, b_hi, unit(a_hi, b_lo, zero, q), q)
        rr = unit(a_lo, b_lo, zero, q)
        down1 = BV.const(c_bits.b, power_of_two(fmt, -scale), w)
        down2 = BV.const(c_bits.b, power_of_two(fmt, -2 * scale), w)
        small = ieee.add(
            ieee.mul(corr, fmt, down1, fmt, fmt, RNE),
            fmt,
            ieee.mul(rr, fmt, down2, fmt, fmt, RNE),
            fmt,
            fmt,
            RNE,
        )
        total = ieee.add(main, fmt, small, fmt, fmt, RNE)
        return ieee.add(total, fmt, c_bits, p.c_fmt, fmt, RNE)
    raise AssertionError(p.split)
