"""IEEE 754 operations (add, mul, fma, convert) written once on the BV interface.

They are the building blocks of the sequential references (Fasi's binary32 additions,
Valpey et al.'s (2025) properties), of SFMA (DMMA, fp32/fp64 MFMA) and of GPS (CDNA2). Each result
is exact and then rounded once by `round_to_format`; two-addend sums keep a window of
p+3 bits below the larger operand plus a sticky bit, which is enough for correct rounding.
`flush` asks the rounding for flush-to-zero: a subnormal result becomes a zero of its sign.
"""

from __future__ import annotations

from ..bv.core import BV, Bool
from ..formats import EXP_W, Format, Rounding, Specials, Unpacked, decode, default_nan_bits
from .rounding import Exact, Overflow, round_to_format, special_bits
from .terms import (
    EXP_MIN,
    Addend,
    ProductExponent,
    invalid_product,
    operand_addend,
    product_addend,
    product_is_nan,
)


def _zero_sign(mode: Rounding, terms: list[Addend]) -> Bool:
    """Sign of an exactly-zero sum: the common sign of all-zero terms, else -0 only in RTN."""
    b = terms[0].sign.b
    rtn = Bool.const(b, mode == Rounding.RTN)
    if len(terms) == 1:
        return terms[0].sign
    all_zero = terms[0].is_zero
    same = Bool.const(b, True)
    for t in terms[1:]:
        all_zero = all_zero & t.is_zero
        same = same & ~(t.sign ^ terms[0].sign)
    return (all_zero & same).ite(terms[0].sign, rtn)


def exact_sum(terms: list[Addend], p_out: int) -> Exact:
    """Sum one or two addends exactly enough to round to `p_out` bits correctly."""
    b = terms[0].sign.b
    nonzero = [t for t in terms if t.is_zero.known() is not True]
    if len(nonzero) == 1:  # the other addend is zero on every input: it adds nothing
        terms = nonzero
    if len(terms) == 1:
        t = terms[0]
        return Exact(t.sign, t.mag, t.exp - t.fb)
    assert len(terms) == 2
    fb = max(t.fb for t in terms)
    ib = max(t.int_bits for t in terms)
    g = fb + p_out + 3  # fraction bits kept below the larger exponent
    width = ib + g
    exps = [t.is_zero.ite(BV.const(b, EXP_MIN, EXP_W), t.exp) for t in terms]
    e_max = exps[0].smax(exps[1])
    acc_w = width + 3
    acc = BV.const(b, 0, acc_w)
    for t, e in zip(terms, exps):
        m = t.mag.zext(width - t.mag.w) << (g - t.fb)
        sh = (e_max - e).umin(width).resize(width)
        kept = m.lshr(sh)
        lost = (kept << sh).ne(m)
        v = (kept.zext(1).concat(lost.to_bv(1))).zext(acc_w - width - 2)
        acc = t.sign.ite(acc - v, acc + v)
    neg = acc.is_neg()
    return Exact(neg, acc.abs(), e_max - (g + 1))


def _finish(
    x: Exact,
    out: Format,
    mode: Rounding,
    zero_sign: Bool,
    nan: Bool,
    inf: Bool,
    inf_neg: Bool,
    nan_bits: int | None,
    flush: bool = False,
    overflow: Overflow = Overflow.IEEE,
) -> BV:
    b = x.mag.b
    finite = round_to_format(x, out, mode, zero_sign, overflow, flush)
    nb = default_nan_bits(out) if nan_bits is None else nan_bits
    s = out.spec
    if overflow == Overflow.SATURATE:
        # PTX ISA cvt .satfinite: an infinite operand gives MAX_NORM of its sign too
        top = ((1 << (s.ebits + s.mbits)) - (2 if s.specials == Specials.FN else 1)) - (
            (1 << s.mbits) if s.specials == Specials.IEEE else 0
        )
        big = inf_neg.ite(
            BV.const(b, top | (1 << (s.storage - 1)), s.storage), BV.const(b, top, s.storage)
        )
        finite = inf.ite(big, finite)
        inf = Bool.const(b, False)
    elif s.specials == Specials.FN:  # no infinity: an infinite result is NaN
        nan = nan | inf
        inf = Bool.const(b, False)
    return special_bits(b, out, nb, nan, inf, inf_neg, finite)


def add_unpacked(
    x: Unpacked,
    y: Unpacked,
    out: Format,
    mode: Rounding,
    nan_bits: int | None = None,
    flush: bool = False,
) -> BV:
    """x + y rounded into `out`."""
    tx, ty = operand_addend(x), operand_addend(y)
    nan = x.is_nan | y.is_nan | (x.is_inf & y.is_inf & (x.sign ^ y.sign))
    inf = x.is_inf | y.is_inf
    inf_neg = x.is_inf.ite(x.sign, y.sign)
    ex = exact_sum([tx, ty], out.spec.precision)
    zs = _zero_sign(mode, [tx, ty])
    return _finish(ex, out, mode, zs, nan, inf, inf_neg, nan_bits, flush)


def passes_zero_through(fmt: Format) -> bool:
    """Whether `add_known_zero` can add into `fmt`: Inf and NaN, a sign bit, no ignored
    bits (every pattern it returns is one the format reads back unchanged)."""
    s = fmt.spec
    return s.specials == Specials.IEEE and s.signed and not (s.ignored_low or s.ignored_high)


def add_known_zero(x_bits: BV, zero: Unpacked, out: Format, mode: Rounding) -> BV:
    """x + z for `x_bits` a value of `out` and `zero` an addend that is zero on every
    input: what `add_unpacked` returns, without rounding anything. The sum is x itself,
    except that a zero x takes IEEE's sign of a sum of two zeros and a NaN becomes the
    default NaN. Formats with Inf, a sign bit and no ignored bits only."""
    s = out.spec
    assert passes_zero_through(out), s.name
    b = x_bits.b
    x = decode(x_bits, out)
    zs = _zero_sign(mode, [operand_addend(x), operand_addend(zero)])
    signed_zero = zs.ite(BV.const(b, 1 << (s.storage - 1), s.storage), BV.const(b, 0, s.storage))
    nan = BV.const(b, default_nan_bits(out), s.storage)
    return x.is_nan.ite(nan, x.is_zero.ite(signed_zero, x_bits))


def mul_unpacked(
    x: Unpacked,
    y: Unpacked,
    out: Format,
    mode: Rounding,
    nan_bits: int | None = None,
    flush: bool = False,
) -> BV:
    """x * y rounded into `out`."""
    p = product_addend(x, y, ProductExponent.UNNORMALIZED)
    nan = product_is_nan(x, y)
    inf = x.is_inf | y.is_inf
    ex = exact_sum([p], out.spec.precision)
    return _finish(ex, out, mode, p.sign, nan, inf, p.sign, nan_bits, flush)


def products_exact_in(fx: Format, fy: Format, out: Format) -> bool:
    """Whether every product of a number of `fx` and one of `fy` is a number of `out`:
    its significand fits out's precision, its magnitude stays below out's overflow
    threshold and its lowest bit on out's subnormal grid (fp16 x fp16 in fp32, not bf16
    x bf16), and `out` has Inf and NaN for the products that are not finite."""
    sx, sy, so = fx.spec, fy.spec, out.spec
    return (
        so.specials == Specials.IEEE
        and sx.precision + sy.precision <= so.precision
        and sx.emax + sy.emax + 1 <= so.emax
        and (sx.emin - sx.mbits) + (sy.emin - sy.mbits) >= so.emin - so.mbits
    )


def exact_product(x: Unpacked, y: Unpacked) -> Unpacked:
    """x * y unrounded, as an unpacked value with a two-integer-bit significand: what
    `mul_unpacked` returns when `products_exact_in` holds, without packing it into the
    output format and decoding it again."""
    p = product_addend(x, y, ProductExponent.UNNORMALIZED)
    nan = product_is_nan(x, y)
    return Unpacked(p.sign, p.exp, p.mag, p.fb, p.is_zero & ~nan, x.is_inf | y.is_inf, nan)


def fma_unpacked(
    a: Unpacked,
    bb: Unpacked,
    c: Unpacked,
    out: Format,
    mode: Rounding,
    nan_bits: int | None = None,
    flush: bool = False,
) -> BV:
    """a * b + c with a single rounding into `out`."""
    p = product_addend(a, bb, ProductExponent.UNNORMALIZED)
    tc = operand_addend(c)
    p_nan = invalid_product(a, bb)
    p_inf = a.is_inf | bb.is_inf
    nan = a.is_nan | bb.is_nan | c.is_nan | p_nan | (p_inf & c.is_inf & (p.sign ^ c.sign))
    inf = p_inf | c.is_inf
    inf_neg = p_inf.ite(p.sign, c.sign)
    ex = exact_sum([p, tc], out.spec.precision)
    zs = _zero_sign(mode, [p, tc])
    return _finish(ex, out, mode, zs, nan, inf, inf_neg, nan_bits, flush)


def convert_unpacked(
    x: Unpacked,
    out: Format,
    mode: Rounding,
    nan_bits: int | None = None,
    flush: bool = False,
    overflow: Overflow = Overflow.IEEE,
) -> BV:
    """x rounded into `out` (an IEEE format, or E4M3-like `Specials.FN`, where an
    overflow is NaN); `overflow` SATURATE: PTX cvt `.satfinite`, every value beyond the
    largest finite number, infinities included, becomes it with its sign."""
    t = operand_addend(x)
    ex = exact_sum([t], out.spec.precision)
    return _finish(ex, out, mode, x.sign, x.is_nan, x.is_inf, x.sign, nan_bits, flush, overflow)


def add(x: BV, fx: Format, y: BV, fy: Format, out: Format, mode: Rounding) -> BV:
    """IEEE addition on bit patterns."""
    return add_unpacked(decode(x, fx), decode(y, fy), out, mode)


def mul(x: BV, fx: Format, y: BV, fy: Format, out: Format, mode: Rounding) -> BV:
    """IEEE multiplication on bit patterns."""
    return mul_unpacked(decode(x, fx), decode(y, fy), out, mode)


def fma(
    a: BV, fa: Format, bb: BV, fb: Format, c: BV, fc: Format, out: Format, mode: Rounding
) -> BV:
    """IEEE fused multiply-add on bit patterns."""
    return fma_unpacked(decode(a, fa), decode(bb, fb), decode(c, fc), out, mode)


def convert(x: BV, fx: Format, out: Format, mode: Rounding) -> BV:
    """IEEE format conversion on bit patterns."""
    return convert_unpacked(decode(x, fx), out, mode)
