"""CDNA3 matrix cores: FDRDA (xf32/fp16/bf16) and GFDRDA (fp8), MMA-Sim §IV-F..I.

FDRDA: products may overflow to Inf (normalised exponent >= 128); zero products are
ignored; the products are aligned to their maximum e_dot keeping F bits (truncated) and
summed; that dot product (floored to F2+1 fraction bits) and c (floored to F bits) are
aligned to max(e_dot, e_c) and added exactly (on the finer of the two grids,
max(F2 + 1, F) fraction bits); the sum is floored to 31 fraction bits of its own
leading exponent (an E8M31 value, round toward -inf) and finally rounded to fp32 (RNE).
GFDRDA sums even and odd products separately (block-scaled: each product first times
its two scale factors, MMA-Sim §IV-C's "Scale factor" rule) (truncated), floors both to F bits at
their common maximum, and drops c entirely when e_c < e_max - F - 1.
Products are exact and a group has no intermediate sum, so the flushes that apply are
`flush_inputs` (a, b and c read as +0), `flush_outputs` (a subnormal fp32 result becomes a
zero of its sign) and, between chained groups, `flush_sums`. MMA-Sim §VI-B: CDNA3 keeps
subnormals, so the presets set none of them.
"""

from __future__ import annotations

from ..bv.core import BV, Backend, Bool, any_of
from ..formats import EXP_W, Format, Rounding, decode, default_nan_bits, flush_subnormal
from . import ieee
from .params import ModelParams
from .rounding import Exact, Overflow, round_to_format, special_bits
from .sequential import _fmt
from .terms import (
    EXP_MIN,
    Addend,
    AlignMode,
    ProductExponent,
    align,
    product_addend,
    product_is_nan,
    scale_term,
)


def _dot(terms: list[Addend], F: int, b: Backend) -> tuple[BV, BV]:
    """Truncated fused sum of products: signed fixed-point value with F fraction bits at
    the returned exponent (EXP_MIN when every product is zero or there is none)."""
    if not terms:
        # an empty half of a one-product GFDRDA group: the sum 0, below every exponent
        return BV.const(b, 0, 1), BV.const(b, EXP_MIN, EXP_W)
    exps = [t.is_zero.ite(BV.const(b, EXP_MIN, EXP_W), t.exp) for t in terms]
    e = exps[0]
    for x in exps[1:]:
        e = e.smax(x)
    win = max(max(F, t.fb) + t.int_bits for t in terms) + 1
    w = win + len(terms).bit_length() + 2
    acc = BV.const(b, 0, w)
    for t, ex in zip(terms, exps):
        kept, _ = align(Addend(t.sign, t.mag, ex, t.fb, t.is_zero), e, F, win, AlignMode.TRUNCATE)
        v = kept.resize(w)
        acc = t.sign.ite(acc - v, acc + v)
    return acc, e


def _floor_to(
    x: BV,
    frac_in: int,
    e_in: BV,
    frac_out: int,
    e_out: BV,
    w: int,
    mode: AlignMode = AlignMode.ROUND_DOWN,
) -> BV:
    """Signed `x` (frac_in fraction bits at e_in) moved onto frac_out bits at e_out >= e_in:
    floored (ROUND_DOWN, the hardware's rule), or truncated toward zero (TRUNCATE, the
    alternative hypothesis `cdna3[align=truncate]`)."""
    v = x.resize(w, signed=True)
    if frac_out > frac_in:
        v = v << (frac_out - frac_in)
        sh = (e_out - e_in).umin(w)
    else:
        sh = ((e_out - e_in).umin(w) + (frac_in - frac_out)).umin(w)
    if mode == AlignMode.TRUNCATE:
        mag = v.abs().lshr(sh.resize(w))
        return v.is_neg().ite(-mag, mag)
    return v.ashr(sh.resize(w))


def _finish(
    dot: BV,
    dot_frac: int,
    e_dot: BV,
    uc,
    p: ModelParams,
    nan: Bool,
    inf: Bool,
    inf_neg: Bool,
    gate_c: bool,
    flush: bool,
) -> BV:
    b = dot.b
    F, F2 = p.F, p.F2
    # the grid the two floored addends are added on: the finer of F2 + 1 (the dot
    # product's) and F (c's) fraction bits at e_max, so that neither loses a bit there
    G = max(F2 + 1, F)
    # room for either addend shifted onto that grid (|dot| < 2^(dot.w - F - 1) units of
    # 2^e_max, |c| < 2^(F + 1) after its floor) and for their sum's carry and sign
    w = max(max(dot.w, 24 + F2 + 4) + F2 + 8, dot.w + G + 4, uc.sig.w + G + 4)
    e_c = uc.exp
    e_max = e_dot.smax(e_c)
    d = _floor_to(dot, dot_frac, e_dot, F2 + 1, e_max, w, p.align)
    c_signed = uc.sign.ite(-(uc.sig.resize(w)), uc.sig.resize(w))
    c_fl = _floor_to(c_signed, uc.mbits, e_c, F, e_max, w, p.align)
    if gate_c:
        c_fl = e_c.slt(e_max - (F + 1)).ite(BV.const(b, 0, w), c_fl)
    total = (d << (G - (F2 + 1))) + (c_fl << (G - F))
    neg = total.is_neg()
    x = Exact(neg, total.abs(), e_max - G)
    # An exactly-zero fixed-point sum is +0, whatever the signs of c and of zero products
    # (MMA-Sim, bit-accurate on MI300X: the dot product's zero is +0 and +0 + -0 = +0).
    # A negative sum that underflows in the final RNE conversion still gives -0.
    zsign = Bool.const(b, False)
    mid = round_to_format(x, Format.E8M31, Rounding.RTN, zsign, Overflow.IEEE)
    out = ieee.convert_unpacked(decode(mid, Format.E8M31), Format.FP32, Rounding.RNE, flush=flush)
    nan_bits = default_nan_bits(Format.FP32) if p.nan_bits is None else p.nan_bits
    return special_bits(b, Format.FP32, nan_bits, nan, inf, inf_neg, out)


def _products(a_bits, b_bits, p: ModelParams, overflow: bool, scales=None):
    ua = [decode(x, _fmt(p.a_fmt, p)) for x in a_bits]
    ub = [decode(x, _fmt(p.b_fmt, p)) for x in b_bits]
    if p.flush_inputs:
        ua = [flush_subnormal(u, _fmt(p.a_fmt, p), keep_sign=False) for u in ua]
        ub = [flush_subnormal(u, _fmt(p.b_fmt, p), keep_sign=False) for u in ub]
    terms = [product_addend(x, y, ProductExponent.UNNORMALIZED) for x, y in zip(ua, ub)]
    nan_terms = [product_is_nan(x, y) for x, y in zip(ua, ub)]
    if scales is not None:
        # block scales (CDNA4 scaled MFMA): each product times its two scale factors,
        # their exponents added to its own; a NaN scale makes the product NaN
        us = [[decode(x, p.scale_fmt) for x in xs] for xs in scales]
        terms = [scale_term(t, s, u) for t, s, u in zip(terms, us[0], us[1])]
        nan_terms = [
            n | s.is_nan | u.is_nan | ((x.is_inf | y.is_inf) & (s.is_zero | u.is_zero))
            for n, s, u, x, y in zip(nan_terms, us[0], us[1], ua, ub)
        ]
    infs = []
    for x, y, t in zip(ua, ub, terms):
        inf = x.is_inf | y.is_inf
        if overflow:
            big = t.mag.uge(1 << (t.fb + 1))  # significand >= 2
            inf = inf | (~t.is_zero & (t.exp + big.to_bv(EXP_W)).sge(128))
        infs.append(inf)
    return terms, nan_terms, infs


def _c_operand(c_bits: BV, c_fmt: Format, p: ModelParams):
    uc = decode(c_bits, c_fmt)
    return flush_subnormal(uc, c_fmt, keep_sign=False) if p.flush_inputs else uc


def _specials(b, terms, nan_terms, infs, uc):
    pos = any_of(b, [i & ~t.sign for i, t in zip(infs, terms)] + [uc.is_inf & ~uc.sign])
    neg = any_of(b, [i & t.sign for i, t in zip(infs, terms)] + [uc.is_inf & uc.sign])
    nan = any_of(b, nan_terms + [uc.is_nan]) | (pos & neg)
    return nan, pos | neg, neg


def fdrda_group(a_bits, b_bits, c_bits, c_fmt, p: ModelParams, flush: bool) -> BV:
    b = c_bits.b
    terms, nan_terms, infs = _products(a_bits, b_bits, p, overflow=True)
    uc = _c_operand(c_bits, c_fmt, p)
    nan, inf, inf_neg = _specials(b, terms, nan_terms, infs, uc)
    dot, e_dot = _dot(terms, p.F, b)
    return _finish(dot, p.F, e_dot, uc, p, nan, inf, inf_neg, gate_c=False, flush=flush)


def gfdrda_group(a_bits, b_bits, c_bits, c_fmt, p: ModelParams, flush: bool, scales=None) -> BV:
    b = c_bits.b
    terms, nan_terms, infs = _products(a_bits, b_bits, p, overflow=False, scales=scales)
    uc = _c_operand(c_bits, c_fmt, p)
    nan, inf, inf_neg = _specials(b, terms, nan_terms, infs, uc)
    s_even, e_even = _dot(terms[0::2], p.F, b)
    s_odd, e_odd = _dot(terms[1::2], p.F, b)
    e_dot = e_even.smax(e_odd)
    w = max(s_even.w, s_odd.w) + 2
    dot = _floor_to(s_even, p.F, e_even, p.F, e_dot, w, p.align) + _floor_to(
        s_odd, p.F, e_odd, p.F, e_dot, w, p.align
    )
    return _finish(dot, p.F, e_dot, uc, p, nan, inf, inf_neg, gate_c=True, flush=flush)


def _chain(group, a_bits, b_bits, c_bits, p: ModelParams, scales=None) -> BV:
    c, c_fmt = c_bits, p.c_fmt
    groups = p.groups()
    per_k = None
    if scales is not None:
        per_k = tuple([xs[p.scale_of(k)] for k in range(p.K)] for xs in scales)
    for i, (lo, hi) in enumerate(groups):
        flush = p.flush_outputs if i == len(groups) - 1 else p.flush_sums
        if per_k is None:
            c = group(a_bits[lo:hi], b_bits[lo:hi], c, c_fmt, p, flush)
        else:
            sc = (per_k[0][lo:hi], per_k[1][lo:hi])
            c = group(a_bits[lo:hi], b_bits[lo:hi], c, c_fmt, p, flush, sc)
        c_fmt = Format.FP32
    return c


def fdrda(a_bits, b_bits, c_bits, p: ModelParams) -> BV:
    """FDRDA, chained (CoFDRDA) when K > L."""
    return _chain(fdrda_group, a_bits, b_bits, c_bits, p)


def gfdrda(a_bits, b_bits, c_bits, p: ModelParams, scales=None) -> BV:
    """GFDRDA, chained (CoGFDRDA) when K > L; `scales`: the block scale factors
    (`p.n_scales` of a, of b) when `p.scale_fmt` is set (CDNA4's scaled MFMA, a
    hypothesis: the ISA gives no arithmetic)."""
    return _chain(gfdrda_group, a_bits, b_bits, c_bits, p, scales)
