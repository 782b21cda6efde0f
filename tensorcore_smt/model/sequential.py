"""Algorithms built from IEEE operations: sequential sums (references), SFMA and GPS.

- SEQUENTIAL: products rounded (or fused) into `acc_fmt`, then added one at a time in a
  chosen order, each addition rounded with `acc_rounding`; the result is converted to
  the output format with `rounding` (Valpey et al. 2025 properties 1-4, Fasi §III's binary32 model).
- SFMA (MMA-Sim §IV-A): d = c; d = fma(a_k, b_k, d) for k = 0..K-1.
- GPS (MMA-Sim §IV-B, CDNA2): subnormal and zero inputs flushed to +0; fp32 products with
  sign-preserving flush; groups of G summed pairwise, then added to c in order; every
  addition flushes subnormal results keeping their sign.

Flush-to-zero is four independent switches, each a flag of the one rounding routine
(a subnormal rounded result becomes a zero of its sign) or of the operand decoding:
`flush_inputs` (a, b, c), `flush_products` (each rounded product), `flush_sums` (every
addition or FMA but the one that produces d) and `flush_outputs` (d, in d's format).
GPS applies exactly the flushes its parameters ask for; the CDNA2 presets set all four.
"""

from __future__ import annotations

from ..bv.core import BV, Bool
from ..formats import Format, Rounding, Unpacked, decode, flush_subnormal
from . import ieee
from .nan import first_nan
from .params import FlushSign, ModelParams, NanRule, Order, Tf32Input


def _fmt(fmt: Format, p: ModelParams) -> Format:
    return Format.FP32 if fmt == Format.TF32 and p.tf32 == Tf32Input.FULL else fmt


def _operands(a_bits, b_bits, c_bits, p: ModelParams) -> tuple[list, list, Unpacked]:
    ua = [decode(x, _fmt(p.a_fmt, p)) for x in a_bits]
    ub = [decode(x, _fmt(p.b_fmt, p)) for x in b_bits]
    uc = decode(c_bits, p.c_fmt)
    if p.flush_inputs:
        keep = p.flush_sign == FlushSign.KEEP
        ua = [flush_subnormal(u, p.a_fmt, keep_sign=keep) for u in ua]
        ub = [flush_subnormal(u, p.b_fmt, keep_sign=keep) for u in ub]
        uc = flush_subnormal(uc, p.c_fmt, keep_sign=keep)
    return ua, ub, uc


def _pairwise(vals: list[BV], add) -> BV:
    if len(vals) == 1:
        return vals[0]
    mid = len(vals) // 2
    return add(_pairwise(vals[:mid], add), _pairwise(vals[mid:], add))


SKIP_EXACT_STEPS = True
"""`sequential` leaves out the steps that cannot change a value (tests turn it off to
compare the two paths)."""


def sequential(a_bits: list[BV], b_bits: list[BV], c_bits: BV, p: ModelParams) -> BV:
    """IEEE sum of c and the K products in `p.order`, rounded after every operation.

    Steps that cannot change a value are left out: c already in the accumulator's
    format is not converted, products that the format always holds exactly
    (`ieee.products_exact_in`, e.g. fp16 x fp16 in fp32) go to the additions unrounded,
    adding a term that is zero on every input (`--terms`, a fixed zero) returns the
    other addend without rounding it again (`ieee.add_known_zero`), and a result
    already in d's format is not converted again. Each of them would only pack a value
    and decode it again (NaNs become the default NaN either way)."""
    acc, mode = p.acc_fmt, p.acc_rounding
    ua, ub, uc = _operands(a_bits, b_bits, c_bits, p)
    fa, fb = _fmt(p.a_fmt, p), _fmt(p.b_fmt, p)
    skip = SKIP_EXACT_STEPS

    def unpacked(x: BV | Unpacked) -> Unpacked:
        return x if isinstance(x, Unpacked) else decode(x, acc)

    plain_acc = ieee.passes_zero_through(acc)

    def add(x: BV | Unpacked, y: BV | Unpacked, last: bool = False) -> BV:
        # the last addition's result is d before its conversion, where flush_outputs acts
        flush = p.flush_sums and not last
        if skip and plain_acc and not flush:
            for u, v in ((x, y), (y, x)):
                if isinstance(u, BV) and unpacked(v).is_zero.known() is True:
                    return ieee.add_known_zero(u, unpacked(v), acc, mode)
        return ieee.add_unpacked(unpacked(x), unpacked(y), acc, mode, flush=flush)

    c: BV | Unpacked = uc if skip and p.c_fmt == acc else ieee.convert_unpacked(uc, acc, mode)
    # the order the products enter the sum (the fused chain knows c-first and reverse)
    reverse = p.order == Order.REVERSE
    idx = list(range(p.K - 1, -1, -1) if reverse else range(p.K))
    if p.fused_products:
        d = c
        for k in idx:
            flush = p.flush_sums and k != idx[-1]
            d = ieee.fma_unpacked(ua[k], ub[k], unpacked(d), acc, mode, flush=flush)
    else:
        if skip and ieee.products_exact_in(fa, fb, acc) and not p.flush_products:
            prods = [ieee.exact_product(x, y) for x, y in zip(ua, ub)]
        else:
            prods = [
                ieee.mul_unpacked(x, y, acc, mode, flush=p.flush_products) for x, y in zip(ua, ub)
            ]
        if p.order in (Order.C_FIRST, Order.REVERSE):
            d = c
            seq = prods if p.order == Order.C_FIRST else prods[::-1]
            for i, q in enumerate(seq):
                d = add(d, q, last=i == len(seq) - 1)
        elif p.order == Order.C_LAST:
            d = prods[0]
            for q in prods[1:]:
                d = add(d, q)
            d = add(d, c, last=True)
        else:  # PAIRWISE
            d = add(c, _pairwise(prods, add), last=True)
    if skip and p.d_fmt == acc and p.nan_bits is None and not p.flush_outputs:
        out = d
    else:
        out = ieee.convert_unpacked(unpacked(d), p.d_fmt, p.rounding, p.nan_bits, p.flush_outputs)
    if p.nan_rule in (NanRule.A_B_ACC, NanRule.B_A_ACC):
        swap = p.nan_rule == NanRule.B_A_ACC  # each product's b before its a
        operands = [
            (t, u, f)
            for k in idx[::-1]
            for t, u, f in (
                ((b_bits[k], ub[k], fb), (a_bits[k], ua[k], fa))
                if swap
                else ((a_bits[k], ua[k], fa), (b_bits[k], ub[k], fb))
            )
        ]
        out = first_nan([*operands, (c_bits, uc, p.c_fmt)], out, p.d_fmt)
    return out


def sfma(a_bits: list[BV], b_bits: list[BV], c_bits: BV, p: ModelParams) -> BV:
    """Sequential fused multiply-adds in the output format, round to nearest even."""
    ua, ub, uc = _operands(a_bits, b_bits, c_bits, p)
    out = p.d_fmt
    if p.nan_rule == NanRule.B_ACC_A and p.c_fmt == out:
        d = c_bits  # a NaN c reaches the first FMA with its payload
    else:
        d = ieee.convert_unpacked(uc, out, p.rounding, p.nan_bits)
    for k, (x, y) in enumerate(zip(ua, ub)):
        flush = p.flush_outputs if k == p.K - 1 else p.flush_sums
        acc = decode(d, out)
        r = ieee.fma_unpacked(x, y, acc, out, p.rounding, p.nan_bits, flush)
        if p.nan_rule == NanRule.B_ACC_A:
            r = first_nan([(b_bits[k], y, p.b_fmt), (d, acc, out), (a_bits[k], x, p.a_fmt)], r, out)
        d = r
    return d


def _flush_to_plus_zero(u: Unpacked, fmt: Format) -> Unpacked:
    """MMA-Sim Algorithm 3, step 1: `x <- +0.0 if |x| < 2^emin`. Subnormals and both
    zeros become +0 (a -0 input is +0 too: GPS never sees a negative zero operand)."""
    f = flush_subnormal(u, fmt, keep_sign=False)
    sign = f.is_zero.ite(Bool.const(f.sign.b, False), f.sign)
    return Unpacked(sign, f.exp, f.sig, f.mbits, f.is_zero, f.is_inf, f.is_nan)


def gps(a_bits: list[BV], b_bits: list[BV], c_bits: BV, p: ModelParams) -> BV:
    """CDNA2 group-pairwise-sum (MMA-Sim Algorithm 3), with the flushes `p` asks for:
    inputs to +0 (a -0 too), products, pairwise and running sums and d to signed zeros."""
    acc, mode = Format.FP32, Rounding.RNE

    def operand(x: BV, fmt: Format) -> Unpacked:
        u = decode(x, fmt)
        return _flush_to_plus_zero(u, fmt) if p.flush_inputs else u

    ua = [operand(x, p.a_fmt) for x in a_bits]
    ub = [operand(x, p.b_fmt) for x in b_bits]
    uc = operand(c_bits, p.c_fmt)

    def add(x: BV, y: BV, flush: bool = p.flush_sums) -> BV:
        return ieee.add_unpacked(decode(x, acc), decode(y, acc), acc, mode, p.nan_bits, flush)

    prods = [
        ieee.mul_unpacked(x, y, acc, mode, p.nan_bits, p.flush_products) for x, y in zip(ua, ub)
    ]
    d = ieee.convert_unpacked(uc, acc, mode, p.nan_bits)
    starts = range(0, p.K, p.G)
    for lo in starts:
        flush = p.flush_outputs if lo == starts[-1] else p.flush_sums
        d = add(d, _pairwise(prods[lo : lo + p.G], add), flush)
    return d
