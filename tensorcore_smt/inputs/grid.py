"""The fixed-point grid of a class: every input, product and exact sum of the class lies
on it, so an error query measures exactly on a grid narrower than the formats' own
(model/exact.py's `grid`) where the class narrows the operands' ranges."""

from __future__ import annotations

from ..formats import Format, value_of
from ..model.params import ModelParams
from .constraints import Constraint
from .kinds import ConstraintKind


def group_range(
    group: str, fmt: Format, constraints: tuple[Constraint, ...]
) -> tuple[int, int] | None:
    """(lsb, top) of operand group `group` ("a", "b" or "c") in the class: every value is a
    multiple of 2^lsb below 2^top; None when the class fixes the group to zero."""
    s = fmt.spec
    lsb, top = s.emin - s.mbits, s.emax + 1
    for cn in constraints:
        if cn.kind == ConstraintKind.FIX:
            if cn.operands != group:
                continue
            v = value_of(cn.bits, fmt)
            if isinstance(v, float):
                continue
            if v == 0:
                return None
            num, den = abs(v).numerator, abs(v).denominator
            low = (num & -num).bit_length() - den.bit_length()
            high = num.bit_length() - den.bit_length() + 1
            lsb, top = max(lsb, low), min(top, high)
        elif not cn.restricts_group(group):
            continue
        elif cn.kind == ConstraintKind.EXPONENT_WINDOW:
            lsb, top = max(lsb, cn.lo - s.mbits), min(top, cn.hi + 1)
        elif cn.kind == ConstraintKind.INTEGER:
            lsb, top = max(lsb, 0), min(top, cn.lo)
        elif cn.kind == ConstraintKind.REPRESENTABLE:
            t = cn.fmt.spec
            lsb, top = max(lsb, t.emin - t.mbits), min(top, t.emax + 1)
    return lsb, max(top, lsb + 1)


def class_grid(p: ModelParams, constraints: tuple[Constraint, ...]) -> tuple[int, int]:
    """(lsb, width): a grid that holds every input of the class, every product and their
    exact sum (model/exact.py's grid, narrowed by the class's exponent windows, integer
    and representable constraints and fixed inputs). Outputs may fall off it: an error
    query counts such an output as exceeding any threshold, so an unsat answer on the
    narrow grid is a proof for the class (and a witness is measured exactly)."""
    ra = group_range("a", p.a_fmt, constraints)
    rb = group_range("b", p.b_fmt, constraints)
    rc = group_range("c", p.c_fmt, constraints)
    lows, tops = [], []
    if ra is not None and rb is not None:
        lows.append(ra[0] + rb[0])
        tops.append(ra[1] + rb[1])
    if rc is not None:
        lows.append(rc[0])
        tops.append(rc[1])
    if not lows:
        return 0, 4
    lsb = min(lows)
    top = max(tops) + (p.K + 1).bit_length() + 1
    return lsb, top - lsb + 2


def no_overflow_implied(p: ModelParams, constraints: tuple[Constraint, ...]) -> bool:
    """Whether the class's own ranges keep |c| + sum |a_k b_k| within d's largest finite
    number, so that the no-overflow constraint adds nothing to a formula."""
    lsb, width = class_grid(p, constraints)
    return lsb + width - 2 <= p.d_fmt.spec.emax
