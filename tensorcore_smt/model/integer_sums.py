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

from collections.abc import Callable

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


def _fused(p: ModelParams, m2: int, slice_bits: int) -> Argument:
    """FDA (model/fda.py): (1) the alignment to the largest exponent E keeps every bit
    when E <= F (an integer's lowest bit is 2^0, the grid's 2^(E - F)); (2) the register
    sums exactly when carry_bits >= least_carry_bits; (3) each group's rounding into its
    output format (precision p) is exact when |s| <= 2^p. B = 2^p - K m^2 (and 2^(F+1) - 1
    for the alignment of c itself) proves all three."""
    if p.carry_bits is not None and p.carry_bits < least_carry_bits(p):
        return f"carry_bits={p.carry_bits} below {least_carry_bits(p)}: the register can wrap"
    prec = min(p.out_fmt.spec.precision, p.d_fmt.spec.precision)
    if p.c_add == CAddend.AFTER:
        prec = min(prec, p.c_fmt.spec.precision)
    lines = []
    if p.align == AlignMode.EXACT:
        B = (1 << prec) - p.K * m2
        lines.append("alignment: exact (every bit kept)")
    else:
        F = p.F
        if 2 * (slice_bits - 1) + 2 > F + 1:
            return f"a product of two {slice_bits}-bit integers can exceed the alignment grid (F = {F})"
        B = min((1 << prec) - p.K * m2, (1 << (F + 1)) - 1)
        lines.append(
            f"alignment: integer terms below 2^(F+1) = 2^{F + 1} keep every bit (grid 2^(E-F))"
        )
    lines.append(
        f"rounding into {p.out_fmt.spec.name} (precision {prec}): integer sums up to 2^{prec}"
        " are exact"
    )
    lines.append(f"B = min(2^{prec} - K*(2^P-1)^2, 2^(F+1)-1) = {B} (K = {p.K}, P = {slice_bits})")
    return B, lines


def _round_down(p: ModelParams, m2: int, slice_bits: int) -> Argument:
    """FDRDA and GFDRDA (model/cdna3.py, certify/compose_cdna3.py's steps): (1) the
    products (each half's, for GFDRDA) are truncated to 2^(e - F) at their largest
    unnormalised exponent e <= 2(P - 1): no bit lost when 2(P - 1) <= F; (2) c is floored
    to that grid (e_c <= e): exact for an integer c by (1); when e_c > e the dot product is
    floored to 2^(e_c - F2 - 1) <= 1 while |c| < 2^(F2 + 1), and c keeps its own bits
    (mbits_c <= F); GFDRDA drops c only below 2^(e - F - 1) < 1, where an integer c is 0;
    (3) the sum T is floored to F2 + 1 significant bits, exact for |T| < 2^(F2 + 1), and
    (4) rounded to d (precision p), exact for |T| <= 2^p."""
    if 2 * (slice_bits - 1) > p.F:
        return f"a product of two {slice_bits}-bit integers lies above the grid 2^(e-F) = 1 (F = {p.F})"
    if p.c_fmt.spec.mbits > p.F:
        return f"c has {p.c_fmt.spec.mbits} fraction bits, more than F = {p.F}: floored"
    prec = p.d_fmt.spec.precision
    B = min((1 << prec) - p.K * m2, (1 << (p.F2 + 1)) - 1)
    return B, [
        f"products: exponents e <= 2(P-1) = {2 * (slice_bits - 1)} <= F = {p.F}, grid 2^(e-F) <= 1:"
        " integer products and an integer c are not truncated or floored",
        f"dot product beside a larger c: floored to 2^(e_c-F2-1) <= 1 while |c| < 2^(F2+1) = 2^{p.F2 + 1}",
        f"floor to F2+1 = {p.F2 + 1} significant bits and rounding into {p.d_fmt.spec.name}"
        f" (precision {prec}): integer sums up to 2^{prec} are exact",
        f"B = min(2^{prec} - K*(2^P-1)^2, 2^(F2+1)-1) = {B} (K = {p.K}, P = {slice_bits})",
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


__all__ = ["Argument", "argued_bound"]
