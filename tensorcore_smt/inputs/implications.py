"""What a class implies for the composed bounds of certify/: which operand groups it
keeps normal, how small a nonzero operand's significand can be (rho), the largest
magnitudes, the class a running accumulator of a chain lies in, and the class a GEMM
element's bound is stated over."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from ..formats import Format, max_finite_bits, value_of
from ..model.params import ModelParams
from .constraints import Constraint, output_format
from .kinds import GLOBAL_KINDS, NORMAL_KINDS, ConstraintKind


def forced_normal(group: str, fmt: Format, constraints: tuple[Constraint, ...]) -> bool:
    """Whether the class keeps every nonzero operand of group `group` normal in `fmt`."""
    for c in constraints:
        if group not in c.operands:
            continue
        if c.kind in NORMAL_KINDS:
            return True
        if c.kind == ConstraintKind.REPRESENTABLE and c.fmt is not None:
            if c.fmt.spec.emin >= fmt.spec.emin:
                return True
        if c.kind == ConstraintKind.EXPONENT_WINDOW and c.lo is not None:
            if c.lo >= fmt.spec.emin:
                return True
    return False


def class_normal(p: ModelParams, constraints: tuple[Constraint, ...]) -> dict[str, bool]:
    """Which operand groups (a, b, c) the class keeps normal in their formats."""
    fmts = {"a": p.a_fmt, "b": p.b_fmt, "c": p.c_fmt}
    return {op: forced_normal(op, f, constraints) for op, f in fmts.items()}


def rho_bits(group: str, fmt: Format, unit_fmt: Format, constraints) -> int:
    """log2 of 1/rho for operand group `group`: 0 when its nonzero values are normal in
    the format the unit multiplies (`unit_fmt`: the unpacked one, else `fmt`), else
    mbits (a subnormal significand can be as small as 2^-mbits)."""
    if forced_normal(group, fmt, constraints):
        return 0
    if unit_fmt != fmt:
        # an exact unpacking into a wider format: subnormals of fmt may be normal there
        smallest = fmt.spec.emin - fmt.spec.mbits
        if smallest >= unit_fmt.spec.emin:
            return 0
    return unit_fmt.spec.mbits


def largest(fmt: Format, group: str, constraints) -> Fraction:
    """The largest magnitude of operand group `group` in the class (its format's largest
    finite value, or below 2^(hi+1) for an exponent window)."""
    top = value_of(max_finite_bits(fmt), fmt)
    for c in constraints:
        if c.kind == ConstraintKind.EXPONENT_WINDOW and group in c.operands and c.hi is not None:
            top = min(top, Fraction(2) ** (c.hi + 1))
    return top


def running_class(constraints: tuple[Constraint, ...]) -> tuple[Constraint, ...]:
    """The class as the c of a chain step after the first sees it: c is then the running
    accumulator, not the input C, so no constraint on c applies to it (a sum of normal
    inputs can be subnormal or zero: fp16 products 2^-15 + 2^-16 summed into an fp16
    accumulator). Constraints on a and b and the class-wide ones are kept."""
    out = []
    for cn in constraints:
        if cn.kind == ConstraintKind.FIX:
            if cn.operands != "c":
                out.append(cn)
            continue
        if cn.kind in (ConstraintKind.TERMS, *GLOBAL_KINDS) or "c" not in cn.operands:
            out.append(cn)
            continue
        ops = cn.operands.replace("c", "")
        if ops:
            out.append(replace(cn, operands=ops))
    return tuple(out)


def gemm_class(p: ModelParams, out: Format) -> tuple[Format, Fraction]:
    """The class of a GEMM element as its normwise bound states it: (T, high) with
    M = |c| + sum |a_k b_k| either 0 or 2^e_min(T) <= M <= high. T is the format, of the
    instruction's d and the schedule's output `out`, with the larger e_min (the format
    the result is finally rounded into, unless the chain's own format is narrower):
    below it the result's bits are lost whatever the unit does, and U is normalised by
    it. high is the smaller largest finite value of the two (the final conversion's
    overflow may lower it further: certify/compose.gemm_bound)."""
    low = output_format(p, out)
    high = min(value_of(max_finite_bits(f), f) for f in (out, p.d_fmt))
    return low, Fraction(high)


def product_rho_bits(
    p: ModelParams,
    constraints: tuple[Constraint, ...],
    unit_fmts: tuple[Format, Format] | None = None,
) -> tuple[int, int]:
    """log2 of 1/rho for a and b, each in the format the unit multiplies it in:
    `unit_fmts`, else the unpacked format where the unit unpacks, else its own."""
    af, bf = unit_fmts or (p.unpack or p.a_fmt, p.unpack or p.b_fmt)
    return rho_bits("a", p.a_fmt, af, constraints), rho_bits("b", p.b_fmt, bf, constraints)
