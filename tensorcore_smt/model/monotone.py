"""Monotonicity of a unit in c, by a stated argument over the model's own steps: the
question of properties/monotonicity.toml ("c-grows": raising c alone, every input
nonnegative, never lowers d) answered without a solver where the argument applies
(smt/arguments.py), as integer_sums.py answers the exactness question.

CDNA3's FDRDA (model/cdna3.py), one group: the products p_k >= 0 are truncated at their
largest exponent e and summed into D, which depends on a and b only. With X = max(e,
e_c), D is floored to 2^(X - F2 - 1) (D'), c to 2^(X - F) (C'), T = D' + C' is floored to
F2 + 1 significant bits and rounded into d's format. The last two steps are monotone
(a floor to a precision-p grid and a rounding to a format never reverse an order of
nonnegative values; flushes, overflow to Inf likewise). For c_1 <= c_2 (X_1 <= X_2):
 - X_1 = X_2: D' is the same, C' a floor on one grid: T_1 <= T_2.
 - X_1 < X_2: then X_2 = e_c2 > e_c1, so c_2 is normal and c_1 < 2^(e_c2): as a number
   of c's format, c_1 <= 2^(e_c2) - 2^(e_c2 - p_c) (p_c its precision), so c_2 - c_1 >=
   2^(e_c2 - p_c). C'_2 = c_2 exactly (its m_c fraction bits fit F when m_c <= F), and
   the floors lose less than one step each: T_2 > c_2 + D - 2^(e_c2 - F2 - 1) while
   T_1 <= c_1 + D. So T_2 - T_1 > 2^(e_c2 - p_c) - 2^(e_c2 - F2 - 1) >= 0 when
   p_c <= F2 + 1.
Non-finite values: with nonnegative inputs no product or sum is negative, so a NaN
comes only from the products (Inf times 0, NaN operands) and is the same for c_1 and
c_2; an infinite product or c_2 = +Inf gives d_2 = +Inf >= d_1. A chain of groups (K >
L) passes each group's result in fp32 as the next c: a composition of maps monotone in
c, each under the same condition for fp32. The argument needs the truncation or floor
(both agree on nonnegative values) and the conditions on every c format it meets."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

from ..formats import Format, round_fraction, value_of
from .params import Algorithm, ModelParams

MonotoneRow = tuple[list[int], list[int], list[int]]
"""(a bits, b bits, c bits in increasing order): one sweep of c with a and b fixed."""


def monotone_in_c(p: ModelParams) -> str | None:
    """Why raising c alone never lowers d for nonnegative inputs (module docstring), or
    None where the argument does not apply."""
    if p.algorithm != Algorithm.FDRDA or p.scale_fmt is not None:
        return None
    fmts = {p.c_fmt} | ({Format.FP32} if len(p.groups()) > 1 else set())
    for f in fmts:
        if f.spec.mbits > p.F or f.spec.precision > p.F2 + 1:
            return None
    names = ", ".join(sorted(f.spec.name for f in fmts))
    return (
        "FDRDA with nonnegative inputs: the products' sum does not depend on c, a larger "
        f"c moves the alignment to its own exponent only with a step 2^(e_c - p_c) above "
        f"the dot product's floor loss 2^(e_c - F2 - 1) (c in {names}: p_c <= F2 + 1 = "
        f"{p.F2 + 1}, m_c <= F = {p.F}), and the final floor and rounding are monotone "
        "(model/monotone.py)"
    )


def monotone_rows(p: ModelParams) -> Iterator[MonotoneRow]:
    """The sweeps of c on which the monotonicity argument is tightest: c just below and
    at a binade edge 2^E (where the alignment moves to c's own exponent and the dot
    product's floor coarsens by 2^(E - F2 - 1)), with one nonnegative product whose bits
    lie on every grid 2^(E - j) below E, and with every product equal; each sweep is
    five consecutive patterns of c around 2^E (nonnegative patterns are ordered as
    their values). A correct argument never sees d fall along a sweep."""
    one_b = round_fraction(Fraction(1), p.b_fmt)
    lo = p.c_fmt.spec.emin + 2
    hi = min(p.c_fmt.spec.emax, 20)
    for E in range(max(lo, -12), hi + 1, 4):
        edge = round_fraction(Fraction(2) ** E, p.c_fmt)
        cs = [edge + k for k in range(-2, 3)]
        for j in range(1, p.F2 + 8):
            D = Fraction(3) * Fraction(2) ** (E - j)
            a = round_fraction(D, p.a_fmt)
            if not isinstance(value_of(a, p.a_fmt), Fraction) or value_of(a, p.a_fmt) == 0:
                continue
            yield [a] + [0] * (p.K - 1), [one_b] + [0] * (p.K - 1), cs
            yield [a] * p.K, [one_b] * p.K, cs


__all__ = ["monotone_in_c", "monotone_rows"]
