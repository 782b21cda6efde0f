"""Rows on which a rounding to nearest inside the unit overflows although the exact
result is finite: the witnesses of an unbounded worst case.

A rounding to nearest can raise a magnitude by half an ulp, and a later addition can
then pass the overflow threshold max + ulp(max)/2 although every exact partial sum, and
the exact result, stay at or below max. With s the format of the rounding, ulp = 2^(emax
- m): c = max - 2 ulp (an odd significand); terms summing to ulp/2 in the first rounding
(a tie: rounded to the even max - ulp); terms summing to 3/2 ulp in the next one (max +
ulp/2, a tie again, to the even 2^(emax+1): Inf). The exact sum is max - 2 ulp + 2 ulp =
max, inside every class that only bounds exact magnitudes, and the output is Inf: the
normwise (and every other) error is infinite. The products must reach ulp/2 (2^103 for
fp32), so only wide input formats (bf16, tf32, fp32, fp64) can build the row; which
products share a rounding is the unit's business, so every placement of the two parts
(and both signs) is tried and each row is checked on the concrete model (sample.best_of:
class membership on the concrete interpreter, the unit run by tc.simulate, the measure
in exact rationals). compose.small_steps states when no such row exists."""

from __future__ import annotations

from fractions import Fraction
from itertools import permutations

from ..formats import Format, max_finite_bits, round_fraction, value_of
from ..smt.query import Query, fixed_inputs
from .sample import Sampled, best_of

MAX_PLACEMENTS = 4096
"""Rows tried at most (placements of the two parts over the K products, two signs)."""


def _factor(value: Fraction, fa: Format, fb: Format) -> tuple[int, int] | None:
    """Bits (a, b) with a * b == value exactly, a and b normal in their formats."""
    sign = -1 if value < 0 else 1
    mag = abs(value)
    # 3/2 * 2^e or 2^e: split the power between a and b, the 3/2 on a
    odd = Fraction(3, 2) if mag.numerator % 3 == 0 else Fraction(1)
    e = (mag / odd).numerator.bit_length() - (mag / odd).denominator.bit_length()
    for ea in range(fa.spec.emin, fa.spec.emax + 1):
        eb = e - ea
        if not fb.spec.emin <= eb <= fb.spec.emax:
            continue
        a = round_fraction(sign * odd * Fraction(2) ** ea, fa)
        b = round_fraction(Fraction(2) ** eb, fb)
        if value_of(a, fa) * value_of(b, fb) == value:
            return a, b
    return None


def overflow_rows(q: Query, fmt: Format) -> list[dict[str, int]]:
    """Candidate rows for the query `q` whose roundings are into `fmt` (module
    docstring): empty when the products cannot reach ulp(max)/2."""
    p = q.p
    top = value_of(max_finite_bits(fmt), fmt)
    ulp = Fraction(2) ** (fmt.spec.emax - fmt.spec.mbits)
    c_val = top - 2 * ulp
    c_bits = round_fraction(c_val, p.c_fmt)
    if value_of(c_bits, p.c_fmt) != c_val:
        return []
    half = _factor(ulp / 2, p.a_fmt, p.b_fmt)
    three_half = _factor(3 * ulp / 2, p.a_fmt, p.b_fmt)
    if half is None or three_half is None:
        return []
    fixed = fixed_inputs(q)
    rows: list[dict[str, int]] = []
    for i, j in permutations(range(p.K), 2):
        for sign in (1, -1):
            row = {f"a{k}": 0 for k in range(p.K)} | {f"b{k}": 0 for k in range(p.K)}
            neg = sign < 0
            for k, (a, b) in ((i, half), (j, three_half)):
                row[f"a{k}"] = a ^ (1 << (p.a_fmt.spec.storage - 1)) if neg else a
                row[f"b{k}"] = b
            row["c"] = c_bits ^ (1 << (p.c_fmt.spec.storage - 1)) if neg else c_bits
            if all(row.get(n) == v for n, v in fixed.items()):
                rows.append(row)
            if len(rows) >= MAX_PLACEMENTS:
                return rows
    return rows


def overflow_witness(q: Query) -> Sampled | None:
    """A row of the class of `q` with an infinite measure, checked on the concrete model
    (None when no candidate overflows)."""
    p = q.p
    fmts = [p.d_fmt, p.acc_fmt, p.out_fmt]
    seen: set[Format] = set()
    for f in fmts:
        if f in seen:
            continue
        seen.add(f)
        rows = overflow_rows(q, f)
        best = best_of(q, rows) if rows else None
        if best is not None and isinstance(best.measure, float):
            return best
    return None


__all__ = ["MAX_PLACEMENTS", "overflow_rows", "overflow_witness"]
