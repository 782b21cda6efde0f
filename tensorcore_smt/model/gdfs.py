"""Group-scaled fused dot-add (GDFS): block-scaled FP4 on Blackwell.

MMA-Sim §IV-E (GST-FDPA; mmasim 2.1.1 `MMA_GST_FDPA`, used for the K = 64 forms of
`mma.sync ... kind::mxf4 / kind::mxf4nvf4 .block_scale` and their tcgen05 twins):
 1. special values as in FDA (§IV-C step 1), plus a NaN scale factor (ue8m0 0xFF,
    ue4m3 0x7F) making the result NaN;
 2. the products are summed exactly in groups of G (16) consecutive products;
 3. each group sum is multiplied by the scale factors of its block, sa * sb: their
    significands multiply the sum, their exponents e_sa + e_sb are the exponent the group
    enters the alignment with (the group sum itself is not normalised); a group whose
    products are all zero, or whose scale is zero, enters with e_zero instead (a group
    sum that cancels to zero keeps e_sa + e_sb); c enters with its own exponent, e_zero
    when c is zero;
 4. alignment to the maximum exponent keeping F (35) fraction bits, shifted-out bits
    truncated; fixed-point sum; one rounding into the output (RZ to fp32).
Steps 4-5 are FDA's (`fda.fused_sum`). K > L chains steps as FDA does, the intermediate in
d's format. Without scale factors every scale is 1.
"""

from __future__ import annotations

from ..bv.core import BV, all_of
from ..formats import EXP_W, Format, Unpacked, decode
from .fda import _operand_fmt, decode_operands, fused_sum, special_values
from .params import ModelParams
from .terms import Addend, operand_addend, scale_term


def group_sum(ua: list[Unpacked], ub: list[Unpacked], fa: Format, fb: Format) -> Addend:
    """The exact sum of the products a_k b_k as one addend whose exponent field is 0,
    standing for 2^(emin_a + emin_b) (MMA-Sim §IV-E step 2: the group sum is exact and
    has no exponent of its own). `is_zero`: every product is zero (not: the sum is)."""
    b = ua[0].sign.b
    sa, sb = fa.spec, fb.spec
    base = sa.emin + sb.emin
    span = sa.emax + sb.emax - base
    wprod = ua[0].sig.w + ub[0].sig.w
    w = wprod + span + max(1, (len(ua) - 1).bit_length()) + 1
    acc = BV.const(b, 0, w)
    zeros = []
    for x, y in zip(ua, ub):
        mag = x.sig.zext(y.sig.w) * y.sig.zext(x.sig.w)
        sh = (x.exp + y.exp - base).resize(w)
        zero = x.is_zero | y.is_zero
        v = zero.ite(BV.const(b, 0, w), mag.zext(w - wprod) << sh)
        acc = (x.sign ^ y.sign).ite(acc - v, acc + v)
        zeros.append(zero)
    # value = acc * 2^(base - mbits_a - mbits_b): fraction bits counted from exponent 0
    frac = ua[0].mbits + ub[0].mbits - base
    return Addend(acc.is_neg(), acc.abs(), BV.const(b, 0, EXP_W), frac, all_of(b, zeros))


def gdfs_step(
    a_bits: list[BV],
    b_bits: list[BV],
    c_bits: BV,
    c_fmt: Format,
    p: ModelParams,
    scales: tuple[list[BV], list[BV]],
    flush: bool | None = None,
) -> BV:
    """One fused step: c plus the scaled group sums of a_k b_k (`scales`: one scale factor
    of a and one of b per group of G products)."""
    b = c_bits.b
    fa, fb_ = _operand_fmt(p.a_fmt, p), _operand_fmt(p.b_fmt, p)
    ua, ub, uc = decode_operands(a_bits, b_bits, c_bits, c_fmt, p)
    assert p.scale_fmt is not None
    sa = [decode(x, p.scale_fmt) for x in scales[0]]
    sb = [decode(x, p.scale_fmt) for x in scales[1]]
    G = p.G
    n_groups = len(ua) // G

    # Step 1: special values (an Inf times a zero scale is NaN, as Inf * 0).
    per_product = [(sa[k // G], sb[k // G]) for k in range(len(ua))]
    is_nan, is_inf, neg_inf = special_values(b, ua, ub, uc, per_product)

    # Steps 2-3: exact group sums, scaled; c joins as a term.
    terms = [operand_addend(uc)]
    for g in range(n_groups):
        lo, hi = g * G, (g + 1) * G
        t = group_sum(ua[lo:hi], ub[lo:hi], fa, fb_)
        terms.append(scale_term(t, sa[g], sb[g]))
    return fused_sum(terms, p, flush, is_nan, is_inf, neg_inf)


def gdfs(
    a_bits: list[BV],
    b_bits: list[BV],
    c_bits: BV,
    p: ModelParams,
    scales: tuple[list[BV], list[BV]] | None = None,
) -> BV:
    """Chained GDFS over all K products: steps of L products, each made of groups of G
    that take the scale factors of their block (`p.scale_of`)."""
    if scales is None:
        scales = unit_scales(c_bits.b, p)
    c, c_fmt = c_bits, p.c_fmt
    steps = p.groups()
    for i, (lo, hi) in enumerate(steps):
        last = i == len(steps) - 1
        flush = p.flush_outputs if last else p.flush_sums
        per_group = tuple([xs[p.scale_of(k)] for k in range(lo, hi, p.G)] for xs in scales)
        c = gdfs_step(a_bits[lo:hi], b_bits[lo:hi], c, c_fmt, p, per_group, flush)
        c_fmt = p.d_fmt
    return c


def unit_scales(backend: object, p: ModelParams) -> tuple[list[BV], list[BV]]:
    """Scale factors of 1 for a unit called without any (`p.n_scales` of a and of b)."""
    assert p.scale_fmt is not None
    s = p.scale_fmt.spec
    one = s.bias << s.mbits
    ones = [BV.const(backend, one, s.storage) for _ in range(p.n_scales)]  # type: ignore[arg-type]
    return ones, list(ones)


__all__ = ["gdfs", "gdfs_step", "group_sum", "unit_scales"]
