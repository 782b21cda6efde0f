"""Fused dot-add (FDA) and its chain (CoFDA): every NVIDIA HMMA / QMMA / HGMMA.

One group of L products and c (MMA-Sim §IV-C, Valpey et al. 2025 Algorithm 1):
 1. special values: any NaN, 0*Inf, or Infs of both signs -> NaN; else an Inf wins;
 2. exact products (exponent e_a+e_b, significand in [0,4), or normalised);
 3. alignment to the maximum exponent e_max (zero terms count as e_zero, or are ignored),
    keeping F fractional bits; shifted-out bits are truncated, rounded down, or kept;
 4. fixed-point sum. With `carry_bits` headroom the accumulator holds magnitudes below
    2^(int_bits + carry_bits) units of 2^e_max, int_bits being the widest term's integer
    bits (2 for unnormalised products). Too small a register either loses its carry out
    (WRAP, the default: a two's complement sum modulo 2^(F + int_bits + carry_bits + 1),
    independent of the order) or (RENORMALIZE) runs c, p0, p1, ... in order and, when a
    partial sum reaches the bound, shifts it right one bit (truncating) and bumps its
    scale so later terms lose one more low bit. The register is built whenever
    `carry_bits` is set, even when it is wide enough for every input: that it never
    overflows is then a fact a solver proves (`tcsmt prove volta 'volta[carry_bits=4]'`).
    An ideal accumulator (align=exact) with at most two terms that can be nonzero sums
    them with the IEEE two-addend adder (ieee.exact_sum) instead of its full register;
 5. normalisation and one rounding into the output format (RZ to fp32 with overflow to
    Inf, RZ to E8M13 for FP8 on Ada/Hopper, RNE to fp16); `flush_outputs` turns a
    subnormal d into zero (+0 under the positive zero sign), `flush_inputs` reads
    subnormal a, b, c as +0. With opposing=ones the adder is sign-magnitude in the frame
    of c's sign: a term of the other sign enters as the bit flip of its truncated
    magnitude, one unit of 2^(e_max - F) short of its negation (rocm-systems #12056).
    Products are exact and the sum has no intermediate format, so `flush_products` has
    nothing to act on.
K > L chains groups: d = g(g(c, first L), next L), the intermediate in the output format;
the intermediate group results are the unit's only rounded sums (`flush_sums`). Which
products share a group is `group_map` (index order, or the byte pairs of Hopper's FP8
mma.sync); `c_add=after` runs the chain from +0 and adds c at the end in IEEE arithmetic
(round to nearest even), as Hopper's FP8 mma.sync does (an HMMA chain, then FADD).
Block scaling (`scale_fmt`; MMA-Sim §IV-C "Scale factor", mmasim's ST-FDPA: mxf8f6f4 on
sm_120a): each product is multiplied by the scale factors of its block before step 3
(their exponents add to the product's), and a NaN scale factor makes d NaN.
"""

from __future__ import annotations

from fractions import Fraction

from ..bv.core import BV, Bool, any_of
from ..formats import EXP_W, Format, Rounding, decode, default_nan_bits, flush_subnormal
from . import ieee
from .ieee import exact_sum
from .params import (
    CAddend,
    CarryOverflow,
    FlushSign,
    ModelParams,
    Opposing,
    Tf32Input,
    ZeroSign,
)
from .rounding import Exact, round_to_format, special_bits
from .terms import (
    EXP_MIN,
    Addend,
    AlignMode,
    ProductExponent,
    align,
    invalid_product,
    operand_addend,
    product_addend,
    scale_term,
)


def _operand_fmt(fmt: Format, p: ModelParams) -> Format:
    if fmt == Format.TF32 and p.tf32 == Tf32Input.FULL:
        return Format.FP32
    return fmt


def _exact_frac_bits(terms: list[Addend], p: ModelParams) -> int:
    """F for AlignMode.EXACT: enough fraction bits that no alignment ever drops a bit."""
    span = 0
    for f in (p.a_fmt, p.b_fmt, p.c_fmt, p.d_fmt):
        s = f.spec
        span = max(span, s.emax - s.emin + s.mbits + 2)
    prod_span = 2 * span + 8
    if p.e_zero is not None and p.e_zero > 0:
        # a zero term raises e_max to e_zero, above every term's own exponent: the
        # register reaches down from there to the lowest bit of the smallest term
        prod_span += p.e_zero
    return max(t.fb for t in terms) + prod_span


def decode_operands(
    a_bits: list[BV], b_bits: list[BV], c_bits: BV, c_fmt: Format, p: ModelParams
) -> tuple[list, list, object]:
    """a, b and c unpacked in the unit's operand formats, subnormals read as +0 (zeros of
    their sign under flush_sign=keep) under `flush_inputs` (MMA-Sim §IV-B step 1); c
    only when `flush_c`."""
    fa, fb_ = _operand_fmt(p.a_fmt, p), _operand_fmt(p.b_fmt, p)
    ua = [decode(x, fa) for x in a_bits]
    ub = [decode(x, fb_) for x in b_bits]
    uc = decode(c_bits, c_fmt)
    if p.flush_inputs:
        keep = p.flush_sign == FlushSign.KEEP
        ua = [flush_subnormal(u, fa, keep_sign=keep) for u in ua]
        ub = [flush_subnormal(u, fb_, keep_sign=keep) for u in ub]
        if p.flush_c:
            uc = flush_subnormal(uc, c_fmt, keep_sign=keep)
    return ua, ub, uc


def special_values(b: object, ua: list, ub: list, uc, scales: list | None = None):
    """Step 1 of every fused unit: (is_nan, is_inf, neg_inf) of the result from NaN and Inf
    operands and invalid products; `scales`, one (scale of a, scale of b) per product: a
    NaN scale, or a zero scale times an Inf, makes the product NaN."""
    prod_nan = [invalid_product(x, y) for x, y in zip(ua, ub)]
    prod_inf = [x.is_inf | y.is_inf for x, y in zip(ua, ub)]
    prod_sign = [x.sign ^ y.sign for x, y in zip(ua, ub)]
    if scales is not None:
        prod_nan = [
            n | s.is_nan | t.is_nan | (i & (s.is_zero | t.is_zero))
            for n, i, (s, t) in zip(prod_nan, prod_inf, scales)
        ]
    nan_in = any_of(b, [u.is_nan for u in ua + ub + [uc]] + prod_nan)
    pos_inf = any_of(b, [i & ~s for i, s in zip(prod_inf, prod_sign)] + [uc.is_inf & ~uc.sign])
    neg_inf = any_of(b, [i & s for i, s in zip(prod_inf, prod_sign)] + [uc.is_inf & uc.sign])
    return nan_in | (pos_inf & neg_inf), pos_inf | neg_inf, neg_inf


def fda_group(
    a_bits: list[BV],
    b_bits: list[BV],
    c_bits: BV,
    c_fmt: Format,
    p: ModelParams,
    flush: bool | None = None,
    scales: tuple[list[BV], list[BV]] | None = None,
) -> BV:
    """One fused group: c + sum a_k b_k with the unit's alignment, carry and rounding.
    `flush`: flush a subnormal result to zero (None: as `p.flush_outputs`, the last group).
    `scales`: the scale factors of a_k and b_k, one per product, in `p.scale_fmt`
    (MMA-Sim §IV-C "Scale factor": each product is multiplied by both before alignment)."""
    b = c_bits.b
    ua, ub, uc = decode_operands(a_bits, b_bits, c_bits, c_fmt, p)
    us = [[decode(x, p.scale_fmt) for x in xs] for xs in scales] if scales else None

    # Step 1: special values.
    is_nan, is_inf, neg_inf = special_values(b, ua, ub, uc, list(zip(*us)) if us else None)

    # Step 2: exact products; c joins as a term.
    terms = [product_addend(x, y, p.product_exponent) for x, y in zip(ua, ub)]
    if us is not None:
        terms = [scale_term(t, s, u) for t, s, u in zip(terms, us[0], us[1])]
    terms = [operand_addend(uc)] + terms

    return fused_sum(terms, p, flush, is_nan, is_inf, neg_inf)


def fused_sum(
    terms: list[Addend],
    p: ModelParams,
    flush: bool | None,
    is_nan: Bool,
    is_inf: Bool,
    neg_inf: Bool,
) -> BV:
    """Steps 3-5 of a fused group on its exact terms (c first): alignment to e_max with
    F fraction bits, the fixed-point sum, normalisation and rounding; the special values
    decided by the caller override the finite result."""
    b = is_nan.b
    live = [t for t in terms if t.is_zero.known() is not True]
    fits = p.carry_bits is None or len(live) <= 1 << p.carry_bits
    exact_two = p.align == AlignMode.EXACT and p.opposing == Opposing.EXACT
    if exact_two and fits and 1 <= len(live) <= 2:
        # Steps 3-4 of an ideal accumulator when at most two terms can be nonzero (the
        # others are zero on every input): the sum of two addends, kept to the output's
        # precision plus guard, round and sticky bits, rounds exactly as the full exact
        # register would, in a few dozen bits instead of hundreds. n terms, each below
        # 2^int_bits units of 2^e_max, never outgrow carry_bits >= log2(n) bits of
        # headroom, so a limited register cannot overflow either.
        exact = exact_sum(live, p.out_fmt.spec.precision)
        return _finish(exact, terms, p, flush, is_nan, is_inf, neg_inf)

    # Step 3: alignment to e_max with F fraction bits.
    zero_e = BV.const(b, EXP_MIN if p.e_zero is None else p.e_zero, EXP_W)
    exps = [t.is_zero.ite(zero_e, t.exp) for t in terms]
    e_max = exps[0]
    for e in exps[1:]:
        e_max = e_max.smax(e)
    frac = _exact_frac_bits(terms, p) if p.align == AlignMode.EXACT else p.F
    int_bits = max(t.int_bits for t in terms)
    win = max(max(frac, t.fb) + t.int_bits for t in terms) + 1
    aligned = []
    for t, e in zip(terms, exps):
        t_eff = Addend(t.sign, t.mag, e, t.fb, t.is_zero)
        kept, _ = align(t_eff, e_max, frac, win, p.align)
        aligned.append((t.sign, kept))

    # Step 4: fixed-point sum, with a finite accumulator when carry bits are limited.
    n = len(terms)
    limited = p.carry_bits is not None
    scale = BV.const(b, 0, EXP_W)
    ones = p.opposing == Opposing.ONES
    if ones:
        # Sign-magnitude adder in the frame of c's sign (terms[0] is c): an opposing
        # nonzero term adds the bit flip of its magnitude, -(v + 1) (no end-around
        # carry); a sum below zero is read back by a bit flip, -(acc + 1). A limited
        # register (WRAP) keeps the sum modulo its size, as the two's complement one.
        frame = terms[0].sign
        if limited:
            acc_w = frac + int_bits + p.carry_bits + 1
        else:
            acc_w = max(frac + int_bits + max(0, (n - 1).bit_length()) + 3, win + 2)
        acc = BV.const(b, 0, acc_w)
        for t, (sign, kept) in zip(terms, aligned):
            v = kept.resize(acc_w)
            opp = (sign ^ frame) & ~t.is_zero
            acc = opp.ite(acc - v - 1, acc + v)
        acc = acc.sext(1)
        below = acc.is_neg()
        exact = Exact(frame ^ below, below.ite(-acc - 1, acc), e_max - frac + scale)
        return _finish(exact, terms, p, flush, is_nan, is_inf, neg_inf)
    if not limited:
        acc_w = max(frac + int_bits + max(0, (n - 1).bit_length()) + 3, win + 2)
        acc = BV.const(b, 0, acc_w)
        for sign, kept in aligned:
            v = kept.resize(acc_w)
            acc = sign.ite(acc - v, acc + v)
    elif p.carry_overflow == CarryOverflow.WRAP:
        # Two's complement register of sign + int_bits + carry_bits + F bits: the sum
        # is taken modulo its size, so the order of the additions does not matter.
        reg_w = frac + int_bits + p.carry_bits + 1
        reg = BV.const(b, 0, reg_w)
        for sign, kept in aligned:
            v = kept.resize(reg_w)
            reg = sign.ite(reg - v, reg + v)
        acc_w = reg_w + 1
        acc = reg.sext(1)
    else:
        acc_w = frac + int_bits + p.carry_bits + 3
        acc = BV.const(b, 0, acc_w)
        cap = 1 << (frac + int_bits + p.carry_bits)
        for sign, kept in aligned:
            sh = scale.resize(acc_w)
            v = kept.resize(acc_w)
            if p.align == AlignMode.ROUND_DOWN:
                acc = acc + sign.ite(-v, v).ashr(sh)
                halved = acc.ashr(1)
            else:
                acc = sign.ite(acc - v.lshr(sh), acc + v.lshr(sh))
                mag = acc.abs().lshr(1)
                halved = acc.is_neg().ite(-mag, mag)
            over = acc.abs().uge(cap)
            acc = over.ite(halved, acc)
            scale = scale + over.to_bv(EXP_W)

    # Step 5: normalise and round.
    neg = acc.is_neg()
    exact = Exact(neg, acc.abs(), e_max - frac + scale)
    return _finish(exact, terms, p, flush, is_nan, is_inf, neg_inf)


def _finish(
    exact: Exact,
    terms: list[Addend],
    p: ModelParams,
    flush: bool | None,
    is_nan: Bool,
    is_inf: Bool,
    neg_inf: Bool,
) -> BV:
    """Step 5 and the special values: `exact` (the group's sum) rounded into the output."""
    b = exact.mag.b
    if p.zero_sign == ZeroSign.POSITIVE:
        zsign = Bool.const(b, False)
    else:
        zsign = _all_neg_zero(terms)
    flush = p.flush_outputs if flush is None else flush
    finite = round_to_format(exact, p.out_fmt, p.rounding, zsign, p.overflow, flush)
    finite = finite if p.out_fmt == p.d_fmt else finite.resize(p.d_fmt.spec.storage)
    if p.zero_sign == ZeroSign.POSITIVE:
        # A result that rounds to zero is +0 as well (MMA-Sim §IV-C: -0.0 becomes +0.0).
        body = (1 << (p.d_fmt.spec.storage - 1)) - 1
        finite = (finite & body).eq(0).ite(BV.const(b, 0, finite.w), finite)
    nan_bits = default_nan_bits(p.d_fmt) if p.nan_bits is None else p.nan_bits
    return special_bits(b, p.d_fmt, nan_bits, is_nan, is_inf, neg_inf, finite)


def _all_neg_zero(terms: list[Addend]) -> Bool:
    out = terms[0].is_zero & terms[0].sign
    for t in terms[1:]:
        out = out & t.is_zero & t.sign
    return out


def fda(
    a_bits: list[BV],
    b_bits: list[BV],
    c_bits: BV,
    p: ModelParams,
    scales: tuple[list[BV], list[BV]] | None = None,
) -> BV:
    """Chained FDA over all K products (one group when K <= L), the products taken in
    `p.k_order()`; with `c_add=after` the chain starts from +0 and c is added to its
    result by one IEEE addition in d's format, round to nearest even. `scales`: the
    block scale factors (`p.n_scales` of a, of b) when `p.scale_fmt` is set."""
    order = p.k_order()
    a_bits = [a_bits[k] for k in order]
    b_bits = [b_bits[k] for k in order]
    per_k = None
    if scales is not None:
        per_k = tuple([xs[p.scale_of(k)] for k in order] for xs in scales)
    c_bits_in = c_bits
    if p.unpack is not None:
        # exact conversions (every operand format here fits in the unpacked one), so the
        # rounding mode never acts; the unit then sees only `unpack` operands
        a_bits = [ieee.convert(x, p.a_fmt, p.unpack, Rounding.RNE) for x in a_bits]
        b_bits = [ieee.convert(x, p.b_fmt, p.unpack, Rounding.RNE) for x in b_bits]
        p = p.with_(a_fmt=p.unpack, b_fmt=p.unpack, unpack=None)
    after = p.c_add == CAddend.AFTER
    c, c_fmt = (BV.const(c_bits.b, 0, p.c_fmt.spec.storage) if after else c_bits), p.c_fmt
    groups = p.groups()
    for i, (lo, hi) in enumerate(groups):
        last = i == len(groups) - 1 and not after
        flush = p.flush_outputs if last else p.flush_sums
        sc = None if per_k is None else (per_k[0][lo:hi], per_k[1][lo:hi])
        c = fda_group(a_bits[lo:hi], b_bits[lo:hi], c, c_fmt, p, flush, sc)
        c_fmt = p.d_fmt
    if after:
        c = ieee.add_unpacked(
            decode(c, p.d_fmt),
            decode(c_bits_in, p.c_fmt),
            p.d_fmt,
            Rounding.RNE,
            default_nan_bits(p.d_fmt) if p.nan_bits is None else p.nan_bits,
            p.flush_outputs,
        )
    return c


def least_carry_bits(p: ModelParams) -> int:
    """The least carry bits with which no fused group of `p` can overflow: the carry
    bits a unit needs follow from the bound on its terms, not from the number of terms.

    Derivation. A group's terms are aligned to e_max, its largest exponent, by
    truncation (or exactly), so no term grows; in units of 2^e_max:
     - an unnormalised product (MMA-Sim §IV-C step 2) is at most the product of the
       largest significands, P = (2 - 2^-m_a)(2 - 2^-m_b) (m: fraction bits of a's and
       b's own formats, also when they are unpacked exactly into a wider one), times
       (2 - 2^-m_s)^2 with block scale factors that have fraction bits (UE8M0 ones are
       powers of two and only move the exponent); its integer part takes int_bits = 2
       bits (4 with such scale factors);
     - c is at most C = 2 - 2^-m_c; a chained group's c is the previous group's result
       in d's format (C = 2 - 2^-m_d); with c_add=after the first group runs on c = +0.
    A group of n products therefore sums to at most B = n P + C in magnitude, and the
    two's complement register of sign, int_bits + carry_bits integer bits and F
    fraction bits (see fused_sum) holds every sum below 2^(int_bits + carry_bits). The
    least carry bits are the least k >= 0 with max over the groups of B < 2^(int_bits +
    k). With k - 1 bits the register wraps when every term of the largest group is at
    its largest with one sign (the sum then reaches 2^(int_bits + k - 1)), so the unit
    needs all k; a further bit never changes a result.

    Examples: Volta's 4 fp16 products and c, B = 4 (2 - 2^-10)^2 + 2 - 2^-23 = 17.98
    < 2^5: 3 (Valpey et al. 2025 §4.3), Ampere's 8: 33.97 < 2^6: 4, as ceil(log2(L + 1)). FP8
    products stay below 3.52: Hopper's FP8 wgmma, 32 products and c, B = 114.5 < 2^7:
    5, not ceil(log2 33) = 6.
    """
    if p.product_exponent != ProductExponent.UNNORMALIZED or p.align == AlignMode.ROUND_DOWN:
        raise ValueError(
            "least_carry_bits bounds unnormalised products aligned by truncation or exactly; "
            f"not product_exponent={p.product_exponent.value}, align={p.align.value}"
        )

    def largest_sig(fmt: Format) -> Fraction:
        return 2 - Fraction(1, 1 << _operand_fmt(fmt, p).spec.mbits)

    product = largest_sig(p.a_fmt) * largest_sig(p.b_fmt)
    int_bits = 2
    if p.scale_fmt is not None and p.scale_fmt.spec.mbits > 0:
        product *= largest_sig(p.scale_fmt) ** 2
        int_bits += 2
    bound = Fraction(0)
    for i, (lo, hi) in enumerate(p.groups()):
        if i > 0:
            c = largest_sig(p.d_fmt)
        else:
            c = Fraction(0) if p.c_add == CAddend.AFTER else largest_sig(p.c_fmt)
        bound = max(bound, (hi - lo) * product + c)
    k = 0
    while bound >= 1 << (int_bits + k):
        k += 1
    return k
