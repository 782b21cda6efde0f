"""Integer sums a unit adds exactly: the largest accumulator for which every sum of
P-bit integer slices is exact, by a stated argument over the model's own steps (the
question Ozaki-scheme emulation depends on; certify/exact.py builds the chain induction
and the witnesses on it, smt/arguments.py answers solver queries with it)."""

from __future__ import annotations

from .fda import least_carry_bits
from .params import Algorithm, CAddend, ModelParams, Split


def argued_bound(p: ModelParams, slice_bits: int) -> tuple[int, list[str]] | str:
    """The largest B for which the composed argument proves the instruction exact on
    P-bit integer slices with an integer |c| <= B, with its steps in words; or why the
    argument does not apply. For a fused unit (model/fda.py) every term is an integer,
    so (1) the alignment to the largest exponent E keeps every bit when E <= F (an
    integer's lowest bit is 2^0, the grid's 2^(E - F)); (2) the register sums exactly
    when carry_bits >= least_carry_bits; (3) each group's rounding into its output
    format (precision p) is exact when the integer sum has |s| <= 2^p. Every running
    sum is at most |c| + K (2^P - 1)^2, so B = 2^p - K (2^P - 1)^2 (and 2^(F+1) - 1 for
    the alignment of c itself) proves all three. An SFMA chain (IEEE FMAs) needs only (3)."""
    if p.scale_fmt is not None or p.split != Split.NONE:
        return "block-scaled and split units scale or split the slices: no argument"
    m = (1 << slice_bits) - 1
    m2 = m * m
    lines: list[str] = []
    if p.algorithm == Algorithm.SFMA:
        prec = p.d_fmt.spec.precision
        B = (1 << prec) - p.K * m2
        lines.append(f"{p.K} FMAs into {p.d_fmt.spec.name}: integers up to 2^{prec} are exact")
    elif p.algorithm == Algorithm.FDA:
        if p.carry_bits is not None and p.carry_bits < least_carry_bits(p):
            return f"carry_bits={p.carry_bits} below {least_carry_bits(p)}: the register can wrap"
        if p.flush_inputs and slice_bits < 1:
            return "flushed inputs"
        prec = min(p.out_fmt.spec.precision, p.d_fmt.spec.precision)
        if p.c_add == CAddend.AFTER:
            prec = min(prec, p.c_fmt.spec.precision)
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
    else:
        return f"no argument for the {p.algorithm.value} algorithm"
    if B < 0:
        return f"{p.K} products of {slice_bits}-bit slices already exceed 2^{prec}"
    lines.append(f"B = min(2^{prec} - K*(2^P-1)^2, 2^(F+1)-1) = {B} (K = {p.K}, P = {slice_bits})")
    return B, lines


__all__ = ["argued_bound"]
