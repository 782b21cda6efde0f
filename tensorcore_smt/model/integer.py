"""The integer multiply-add unit: d = c + sum_k a_k b_k on integers, the s32 accumulator
wrapping or saturating (PTX ISA, "Matrix multiply-accumulate operation using mma
instruction", integer and single-bit types; wgmma.mma_async and tcgen05.mma kind::i8;
AMD CDNA ISA v_mfma_i32_*i8).

 1. each a_k and b_k read as an integer of its format: two's complement s8 / s4, unsigned
    u8 / u4 / b1; mixed signedness (.s8.u8) is a signed times an unsigned integer;
 2. each term exact: the product a_k b_k, or for .b1 the bit operation a_k AND b_k /
    a_k XOR b_k, whose popc over the k bits is the sum of these one-bit terms (PTX ISA,
    mma: "multiplication is replaced by a sequence of logical operations ... then counts
    the number of set bits");
 3. the terms summed exactly in groups of L (`groups()`, index order) and the group sums
    and c added to the accumulator in `order` (c first, or c last);
 4. `int_clamp`: wrap keeps the sum modulo 2^32 (order and grouping do not matter);
    satfinite clamps the accumulator to [-2^31, 2^31 - 1] after every addition of step 3.
    The PTX ISA limits the accumulated value to MIN_INT32..MAX_INT32 (paraphrased) without
    saying whether partial sums inside one instruction are: L >= K (one group: the exact
    sum clamped once) is the plain reading, smaller L the hypotheses beside it, which
    differ only where a partial sum leaves the range and a later term brings it back.

Every value lives in a register wide enough for the exact sum (no intermediate wraps).
"""

from __future__ import annotations

from ..bv.core import BV
from ..formats import Format
from .params import BitOp, IntClamp, ModelParams, Order

S32_MIN = -(1 << 31)
S32_MAX = (1 << 31) - 1


def term_width(p: ModelParams) -> int:
    """Bits of a signed register that holds every term exactly."""
    if p.bit_op != BitOp.MUL:
        return 2
    return p.a_fmt.spec.storage + p.b_fmt.spec.storage + 1


def acc_width(p: ModelParams) -> int:
    """Bits of the signed register that holds c plus every term exactly."""
    return max(32, term_width(p) + p.K.bit_length()) + 2


def _extend(x: BV, fmt: Format, w: int) -> BV:
    return x.resize(w, signed=fmt.spec.signed)


def terms(a_bits: list[BV], b_bits: list[BV], p: ModelParams, w: int) -> list[BV]:
    """Step 1-2: the exact terms as signed `w`-bit values."""
    out = []
    for a, b in zip(a_bits, b_bits):
        if p.bit_op == BitOp.AND:
            out.append((a & b).zext(w - 1))
        elif p.bit_op == BitOp.XOR:
            out.append((a ^ b).zext(w - 1))
        else:
            out.append(_extend(a, p.a_fmt, w) * _extend(b, p.b_fmt, w))
    return out


def _clamp(x: BV) -> BV:
    """x limited to the s32 range (x signed, wider than 32 bits)."""
    hi = x.sgt(S32_MAX)
    lo = x.slt(S32_MIN)
    return hi.ite(BV.const(x.b, S32_MAX, x.w), lo.ite(BV.const(x.b, S32_MIN, x.w), x))


def integer_dot(a_bits: list[BV], b_bits: list[BV], c_bits: BV, p: ModelParams) -> BV:
    """d = c + sum_k a_k b_k as the integer unit `p` computes it (module docstring)."""
    W = acc_width(p)
    tw = term_width(p)
    t = terms(a_bits, b_bits, p, tw)
    group_w = tw + max(1, p.L).bit_length() + 1
    sums = []
    for lo, hi in p.groups():
        s = BV.const(c_bits.b, 0, group_w)
        for x in t[lo:hi]:
            s = s + x.sext(group_w - tw)
        sums.append(s.sext(W - group_w))
    c = c_bits.sext(W - 32)
    if p.int_clamp == IntClamp.WRAP:
        acc = c
        for s in sums:
            acc = acc + s
        return acc.extract(31, 0)
    addends = [c, *sums] if p.order == Order.C_FIRST else [*sums, c]
    acc = addends[0]
    for s in addends[1:]:
        acc = _clamp(acc + s)
    return _clamp(acc).extract(31, 0)


def term_range(p: ModelParams) -> tuple[int, int]:
    """The least and the largest term a_k b_k (or bit operation) the formats allow: a
    product of two intervals takes its extremes at their ends (-128 x -128 = 16384 is
    the largest s8 product, -128 x 127 the least)."""
    if p.bit_op != BitOp.MUL:
        return 0, 1
    (a0, a1), (b0, b1) = p.a_fmt.spec.int_range, p.b_fmt.spec.int_range
    corners = [a0 * b0, a0 * b1, a1 * b0, a1 * b1]
    return min(corners), max(corners)


def chain_bound(tmin: int, tmax: int) -> int:
    """The largest K for which no sum of K terms in [tmin, tmax] leaves the s32 range:
    K tmax <= 2^31 - 1 and K tmin >= -2^31 (every partial sum of fewer terms lies
    between K tmin and K tmax when tmin <= 0 <= tmax)."""
    up = S32_MAX // tmax if tmax > 0 else None
    down = (-S32_MIN) // (-tmin) if tmin < 0 else None
    return min(k for k in (up, down) if k is not None)


def no_clamp_bound(p: ModelParams) -> tuple[int, list[str]]:
    """The largest B for which the stated argument proves that no sum the unit forms
    leaves the s32 range when |c| <= B, so that wrap-around, every clamp (any L, either
    order) and the exact sum agree: every partial sum is c (or 0, c last) plus a sum of
    at most K terms in [tmin, tmax] (tmin <= 0 <= tmax), hence within
    [-B + K tmin, B + K tmax]; B = min(2^31 - 1 - K tmax, 2^31 + K tmin)."""
    tmin, tmax = term_range(p)
    B = min(S32_MAX - p.K * tmax, -S32_MIN + p.K * tmin)
    return B, [
        f"each term a_k b_k lies in [{tmin}, {tmax}] ({p.a_fmt.spec.name} x {p.b_fmt.spec.name})",
        f"every partial sum lies in [c + {p.K} * {tmin}, c + {p.K} * {tmax}] (K = {p.K})",
        f"B = min(2^31 - 1 - K tmax, 2^31 + K tmin) = {B}: no clamp, no wrap, the exact sum",
    ]


def exact_value(a: list[int], b: list[int], c: int, p: ModelParams) -> int:
    """c + sum a_k b_k on the integers (values, not patterns), with no clamp or wrap:
    the reference the unit's result is compared with."""
    if p.bit_op == BitOp.AND:
        return c + sum(x & y for x, y in zip(a, b))
    if p.bit_op == BitOp.XOR:
        return c + sum(x ^ y for x, y in zip(a, b))
    return c + sum(x * y for x, y in zip(a, b))


def _corner(p: ModelParams, want: int) -> tuple[int, int]:
    """An (a, b) pair of the formats' ranges whose term is `want` (tmin or tmax)."""
    (a0, a1), (b0, b1) = p.a_fmt.spec.int_range, p.b_fmt.spec.int_range
    for x in sorted({a0, a1, 0, 1}):
        for y in sorted({b0, b1, 0, 1}):
            if a0 <= x <= a1 and b0 <= y <= b1 and exact_value([x], [y], 0, p) == want:
                return x, y
    return 0, 0


def no_clamp_rows(p: ModelParams, B: int) -> list[tuple[list[int], list[int], int]]:
    """The rows on which the no-clamp argument is tightest, at its bound B itself:
    c = B with every term at its largest, c = -B with every term at its least, and
    the same with the terms' extremes in either half (a partial sum that peaks before
    the end). Each must give the exact sum (`exact_value`) on a correct argument."""
    tmin, tmax = term_range(p)
    hi, lo = _corner(p, tmax), _corner(p, tmin)
    K, h = p.K, p.K // 2
    rows = []
    for c, first, second in ((B, hi, hi), (-B, lo, lo), (B, hi, lo), (-B, lo, hi)):
        a = [first[0]] * h + [second[0]] * (K - h)
        b = [first[1]] * h + [second[1]] * (K - h)
        rows.append((a, b, c))
    return rows


__all__ = [
    "S32_MAX",
    "S32_MIN",
    "acc_width",
    "chain_bound",
    "exact_value",
    "integer_dot",
    "no_clamp_bound",
    "no_clamp_rows",
    "term_range",
    "term_width",
]
