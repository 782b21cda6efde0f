"""Integer sums a unit adds exactly: the largest accumulator for which every sum of
P-bit integer slices is exact, by a stated argument over the model's own steps (the
question Ozaki-scheme emulation depends on; certify/exact.py builds the chain induction
and the witnesses on it, smt/arguments.py answers solver queries with it).

The common step: with integer a_k, b_k (|a_k|, |b_k| <= m = 2^P - 1) and an integer c,
every value the unit forms (a product, a partial sum over any subset of the terms, a
group's fixed-point register) is an integer of magnitude at most |c| + K m^2. An
integer of magnitude at most 2^p is representable with precision p, so a rounding into
a format of precision p leaves it unchanged, whatever the rounding mode; an alignment
to a grid 2^(E - F) <= 1 (E <= F) drops no bit of it, whether it truncates or floors;
nonzero integers are normal in every format the units round into, so no flush acts.
Each algorithm family adds the conditions of its own steps (_ARGUMENTS below)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from fractions import Fraction

from ..formats import Format
from .fda import least_carry_bits
from .params import Algorithm, CAddend, ModelParams, Opposing, Split
from .terms import AlignMode

Argument = tuple[int, list[str]] | str
"""(B, the steps in words) or why the argument does not apply."""


def _ieee_operations(p: ModelParams, m2: int, slice_bits: int) -> Argument:
    """SFMA, SEQUENTIAL and GPS: a sequence of IEEE operations (FMAs, rounded products,
    additions in any order or tree) in acc_fmt, the last into d_fmt: each result is an
    integer of magnitude at most |c| + K m^2 (step 3 of the module docstring)."""
    prec = min(p.acc_fmt.spec.precision, p.d_fmt.spec.precision)
    if p.algorithm == Algorithm.SFMA:
        prec = p.d_fmt.spec.precision
        what = f"{p.K} FMAs into {p.d_fmt.spec.name}"
    else:
        what = f"{p.algorithm.value} operations rounded into {p.acc_fmt.spec.name}"
        rounded_products = p.algorithm == Algorithm.GPS or not p.fused_products
        if rounded_products and m2 > (1 << prec):
            return f"a product of two {slice_bits}-bit integers exceeds 2^{prec}"
    B = (1 << prec) - p.K * m2
    return B, [
        f"{what}: integers up to 2^{prec} are exact",
        f"B = 2^{prec} - K*(2^P-1)^2 = {B} (K = {p.K}, P = {slice_bits})",
    ]


def _carried(p: ModelParams, m2: int) -> int:
    """The most the products of every group but the last add to the c of a later group:
    a chained group's c is the previous group's result, |c| plus every product of the
    groups before it (exact by induction), largest at the last group."""
    sizes = [hi - lo for lo, hi in p.groups()]
    return (sum(sizes) - sizes[-1]) * m2


def _fused(p: ModelParams, m2: int, slice_bits: int) -> Argument:
    """FDA (model/fda.py fda, fused_sum): (1) each group aligns its terms to their largest
    exponent E keeping F fraction bits: no bit of an integer term is lost when E <= F
    (an integer's lowest bit is 2^0, the grid's 2^(E - F)); a product's E is at most
    2(P - 1) and the group's c (the instruction's c in the first group, the running sum
    c + every product of the previous groups in the others; with c_add=after the sum of
    the previous groups' products alone) has E <= F while |c_g| < 2^(F+1); zero terms
    count as e_zero, which must be <= F too; (2) the register sums exactly when
    carry_bits >= least_carry_bits (a bound in units of 2^E that holds for every c);
    (3) each group's rounding into its output format (precision p), and with c_add=after
    the final addition of c, is exact when |s| <= 2^p. B = min(2^p - K m^2,
    2^(F+1) - 1 - (K - L_last) m^2) proves all three."""
    if p.carry_bits is not None and p.carry_bits < least_carry_bits(p):
        return f"carry_bits={p.carry_bits} below {least_carry_bits(p)}: the register can wrap"
    prec = min(p.out_fmt.spec.precision, p.d_fmt.spec.precision)
    after = p.c_add == CAddend.AFTER
    if after:
        prec = min(prec, p.c_fmt.spec.precision)
    lines = []
    B = (1 << prec) - p.K * m2
    if p.align == AlignMode.EXACT:
        lines.append("alignment: exact (every bit kept)")
        lines.append(f"B = 2^{prec} - K*(2^P-1)^2 = {B} (K = {p.K}, P = {slice_bits})")
    else:
        F = p.F
        if 2 * (slice_bits - 1) + 2 > F + 1:
            return f"a product of two {slice_bits}-bit integers can exceed the alignment grid (F = {F})"
        if p.e_zero is not None and p.e_zero > F:
            return f"zero terms count as exponent e_zero = {p.e_zero} > F = {F}: the grid exceeds 1"
        carried = _carried(p, m2)
        limit = (1 << (F + 1)) - 1
        lines.append(
            f"alignment: every group's terms below 2^(F+1) = 2^{F + 1} keep every bit (grid 2^(E-F))"
        )
        if after:
            if carried > limit:
                return (
                    f"a later group's c (the previous groups' products, up to {carried}) can "
                    f"reach 2^(F+1) = 2^{F + 1}: its low bits are cut"
                )
            lines.append(
                f"c_add=after: a later group's c is the previous groups' products, at most "
                f"(K - L_last)*(2^P-1)^2 = {carried} <= 2^(F+1) - 1; c is added last in IEEE "
                "arithmetic"
            )
        else:
            B = min(B, limit - carried)
            lines.append(
                f"a later group's c is |c| + the previous groups' products, at most |c| + "
                f"(K - L_last)*(2^P-1)^2 = |c| + {carried}"
            )
        lines.append(
            f"rounding into {p.out_fmt.spec.name} (precision {prec}): integer sums up to 2^{prec}"
            " are exact"
        )
        if after:
            lines.append(f"B = 2^{prec} - K*(2^P-1)^2 = {B} (K = {p.K}, P = {slice_bits})")
        else:
            lines.append(
                f"B = min(2^{prec} - K*(2^P-1)^2, 2^(F+1) - 1 - (K - L_last)*(2^P-1)^2) = {B}"
                f" (K = {p.K}, L = {min(p.L, p.K)}, P = {slice_bits})"
            )
        return B, lines
    lines.insert(
        1,
        f"rounding into {p.out_fmt.spec.name} (precision {prec}): integer sums up to 2^{prec}"
        " are exact",
    )
    return B, lines


def _round_down(p: ModelParams, m2: int, slice_bits: int) -> Argument:
    """FDRDA and GFDRDA (model/cdna3.py, certify/compose_cdna3.py's steps), for every
    chained group g (c_g: the instruction's c in the first group, the running sum c +
    every product of the previous groups, an fp32 value, in the others): (1) the
    products (each half's, for GFDRDA) are truncated to 2^(e - F) at their largest
    unnormalised exponent e <= 2(P - 1): no bit lost when 2(P - 1) <= F; (2) c_g is
    floored to that grid (e_c <= e): exact for an integer c_g by (1); when e_c > e the
    dot product is floored to 2^(e_c - F2 - 1) <= 1 while |c_g| < 2^(F2 + 1), and c_g
    keeps its own bits (mbits <= F); GFDRDA drops c_g only below 2^(e - F - 1) < 1, where
    an integer c_g is 0; (3) the sum T is floored to F2 + 1 significant bits, exact for
    |T| < 2^(F2 + 1), and (4) rounded to d (precision p), exact for |T| <= 2^p. With
    |c_g| <= |c| + (K - L_last) m^2: B = min(2^p - K m^2, 2^(F2+1) - 1 - (K - L_last) m^2)."""
    if 2 * (slice_bits - 1) > p.F:
        return f"a product of two {slice_bits}-bit integers lies above the grid 2^(e-F) = 1 (F = {p.F})"
    if p.c_fmt.spec.mbits > p.F:
        return f"c has {p.c_fmt.spec.mbits} fraction bits, more than F = {p.F}: floored"
    chained = len(p.groups()) > 1
    if chained and Format.FP32.spec.mbits > p.F:
        return (
            f"a chained group's c (fp32) has {Format.FP32.spec.mbits} fraction bits, more than "
            f"F = {p.F}: floored"
        )
    prec = p.d_fmt.spec.precision
    carried = _carried(p, m2)
    B = min((1 << prec) - p.K * m2, (1 << (p.F2 + 1)) - 1 - carried)
    return B, [
        f"products: exponents e <= 2(P-1) = {2 * (slice_bits - 1)} <= F = {p.F}, grid 2^(e-F) <= 1:"
        " integer products and an integer c are not truncated or floored",
        f"dot product beside a larger c: floored to 2^(e_c-F2-1) <= 1 while |c| < 2^(F2+1) = "
        f"2^{p.F2 + 1}, for every group's c: |c| + (K - L_last)*(2^P-1)^2 = |c| + {carried}",
        f"floor to F2+1 = {p.F2 + 1} significant bits and rounding into {p.d_fmt.spec.name}"
        f" (precision {prec}): integer sums up to 2^{prec} are exact",
        f"B = min(2^{prec} - K*(2^P-1)^2, 2^(F2+1) - 1 - (K - L_last)*(2^P-1)^2) = {B}"
        f" (K = {p.K}, L = {min(p.L, p.K)}, P = {slice_bits})",
    ]


_ARGUMENTS: dict[Algorithm, Callable[[ModelParams, int, int], Argument]] = {
    Algorithm.SFMA: _ieee_operations,
    Algorithm.SEQUENTIAL: _ieee_operations,
    Algorithm.GPS: _ieee_operations,
    Algorithm.FDA: _fused,
    Algorithm.FDRDA: _round_down,
    Algorithm.GFDRDA: _round_down,
}


def argued_bound(p: ModelParams, slice_bits: int) -> Argument:
    """The largest B for which the composed argument proves the instruction exact on
    P-bit integer slices with an integer |c| <= B, with its steps in words; or why the
    argument does not apply (block-scaled, split and GDFS units)."""
    if p.scale_fmt is not None or p.split != Split.NONE:
        return "block-scaled and split units scale or split the slices: no argument"
    if p.opposing != Opposing.EXACT and p.algorithm == Algorithm.FDA:
        return (
            "opposing=ones loses a unit per opposing term (no end-around carry): an exact "
            "cancellation of integer slices need not give zero, no argument"
        )
    step = _ARGUMENTS.get(p.algorithm)
    if step is None:
        return f"no argument for the {p.algorithm.value} algorithm"
    m2 = ((1 << slice_bits) - 1) ** 2
    got = step(p, m2, slice_bits)
    if isinstance(got, str):
        return got
    B, lines = got
    if B < 0:
        return f"{p.K} products of {slice_bits}-bit slices already exceed the exact range"
    return B, lines


Row = tuple[list[int], list[int], int]
"""(a, b, c) as integer values, a and b in the instruction's k order (index k)."""


def largest_integer(fmt: Format, bound: int) -> int:
    """The largest integer v <= bound (bound >= 0) that `fmt` represents exactly: the
    extreme of an integer class stated as |x| <= bound in that format."""
    from ..formats import round_fraction, value_of

    v = bound
    while v > 0 and value_of(round_fraction(Fraction(v), fmt), fmt) != v:
        v -= 1
    return v


def extreme_rows(p: ModelParams, slice_bits: int, B: int, *, seed: int = 0) -> Iterator[Row]:
    """The rows on which the integer-sum argument is tightest, at the bound B itself:
    c = +-B (and B - 1, 0) with every slice at its largest magnitude and one sign, so
    every group's running c reaches its maximum; per group g, the groups before it at
    their largest and g's products small (1 x 1, m x 1, m x (m - 1): low bits an
    alignment to a coarse grid would cut), the later groups at their largest or zero;
    then seeded random rows with c = +-B. A correct argument leaves every row exact;
    one inexact row refutes it (`counterexample`)."""
    import random

    ma = largest_integer(p.a_fmt, (1 << slice_bits) - 1)
    mb = largest_integer(p.b_fmt, (1 << slice_bits) - 1)
    cb = largest_integer(p.c_fmt, max(B, 0))
    K = p.K
    order = p.k_order() if p.algorithm == Algorithm.FDA else list(range(K))
    members = [[order[k] for k in range(lo, hi)] for lo, hi in p.groups()]
    cs = sorted({cb, max(cb - 1, 0), 0}, reverse=True)
    small = [(1, 1), (ma, 1), (ma, max(mb - 1, 0))]
    for s in (1, -1):
        for c in cs:
            yield [s * ma] * K, [mb] * K, s * c
            for g in range(len(members)):
                for x, y in small:
                    for later in (ma, 0):
                        a, b = [s * ma] * K, [mb] * K
                        for h, ks in enumerate(members):
                            for j, k in enumerate(ks):
                                if h == g:
                                    a[k], b[k] = s * (x if j else ma), (y if j else mb)
                                    if (x, y) == (1, 1):
                                        a[k], b[k] = s, 1
                                elif h > g:
                                    a[k] = s * later
                        yield a, b, s * c
    rng = random.Random(seed)
    for i in range(256):
        s = 1 if i % 2 else -1
        yield (
            [rng.choice([s * ma, rng.randint(-ma, ma)]) for _ in range(K)],
            [rng.choice([mb, rng.randint(-mb, mb)]) for _ in range(K)],
            s * cb,
        )


__all__ = [
    "Argument",
    "Row",
    "argued_bound",
    "extreme_rows",
    "largest_integer",
]
