"""Structured search for large errors: inputs shaped like the worst case the composed
argument (compose.py) describes, then improved by local search, all measured exactly.

The argument's worst case for a fused unit has c at the largest exponent E (its low bits
chosen so the final rounding loses most) and products of one sign just above the grid
2^(E - F), with significands full of ones, so that every cut loses almost a grid step
and every cut errs the same way. Random rows almost never look like that. This module
draws rows of that shape (products at E - F + j for small j, operand exponents split
between a and b within their formats' normal ranges), keeps those in the class
(sample.best_of checks the class on the concrete interpreter and measures with exact
rationals), and then climbs: each round mutates the best row (a low significand bit, an
exponent step, a sign) in a batch and keeps the best mutant when it is better. What it
returns is a witness like any other: real inputs, re-run on the model, measured exactly.
"""

from __future__ import annotations

import random
import time
from fractions import Fraction

from ..formats import Format, round_fraction
from ..inputs.implications import class_normal
from ..model.params import Algorithm
from ..smt.query import Query, fixed_inputs
from .aligned_rows import aligned_rows, unit_groups
from .extremal_cdna3 import fdrda_rows
from .sample import Sampled, best_of

BATCH = 256
"""Rows per evaluation (structured draws and mutants alike)."""


def _value(fmt: Format, sig: Fraction, e: int, negative: bool) -> int:
    """The bits of +-sig 2^e in `fmt` (sig in [1, 2) with the format's fraction bits)."""
    v = sig * Fraction(2) ** e
    return round_fraction(-v if negative else v, fmt)


def _sig(fmt: Format, rng: random.Random, one: float = 0.0) -> Fraction:
    """A significand of `fmt`: 1 with probability `one` (c at exactly 2^E makes the
    denominator smallest), else all ones half the time, else random fraction bits."""
    m = fmt.spec.mbits
    if rng.random() < one:
        return Fraction(1)
    frac = (1 << m) - 1 if rng.random() < 0.5 else rng.getrandbits(m) if m else 0
    return 1 + Fraction(frac, 1 << m) if m else Fraction(1)


def _grid_bits(q: Query) -> int:
    """F of the unit (fraction bits of the alignment grid), or the accumulator's
    precision for units without a fused alignment."""
    p = q.p
    if p.algorithm == Algorithm.FDA and p.F is not None:
        return p.F
    return p.out_fmt.spec.precision


def structured_row(q: Query, rng: random.Random, fixed: dict[str, int]) -> dict[str, int]:
    """One row of the worst-case shape (see the module docstring)."""
    p = q.p
    F = _grid_bits(q)
    af, bf, cf = p.a_fmt, p.b_fmt, p.c_fmt
    lo = af.spec.emin + bf.spec.emin
    hi = af.spec.emax + bf.spec.emax
    E = rng.choice([0, 0, 2, 4, min(8, cf.spec.emax - 1)])
    neg = rng.random() < 0.1
    row = _zero_row(p.K)
    row["c"] = 0 if rng.random() < 0.15 else _value(cf, _sig(cf, rng, one=0.4), E, neg)
    for k in q.product_positions():
        j = rng.choice([0, 1, 1, 2, 2, 3, rng.randint(-2, F)])
        t = max(lo, min(hi, E - F + j))
        ea_lo = max(af.spec.emin, t - bf.spec.emax)
        ea_hi = min(af.spec.emax, t - bf.spec.emin)
        if ea_lo > ea_hi:
            ea_lo, ea_hi = af.spec.emin, af.spec.emax
        ea = rng.randint(ea_lo, ea_hi)
        eb = max(bf.spec.emin, min(bf.spec.emax, t - ea))
        s = neg if rng.random() < 0.9 else not neg
        row[f"a{k}"] = _value(af, _sig(af, rng), ea, s)
        row[f"b{k}"] = _value(bf, _sig(bf, rng), eb, False)
    row.update(fixed)
    return row


def _zero_row(K: int) -> dict[str, int]:
    """Every a_k and b_k +0 (the products a row leaves out) and c +0."""
    return {f"a{k}": 0 for k in range(K)} | {f"b{k}": 0 for k in range(K)} | {"c": 0}


def _full_product(row: dict, k: int, t: int, neg: bool, af: Format, bf: Format) -> None:
    """Product k of the row: a and b with all-ones significands, their exponents summing
    to t (split within each format's normal range), of sign `neg`."""
    ea = max(af.spec.emin, min(af.spec.emax, t - t // 2))
    eb = max(bf.spec.emin, min(bf.spec.emax, t - ea))
    row[f"a{k}"] = _value(af, _top(af), ea, neg)
    row[f"b{k}"] = _value(bf, _top(bf), eb, False)


def _top(fmt: Format) -> Fraction:
    """The largest significand of `fmt` (all fraction bits one)."""
    return 2 - Fraction(1, 1 << fmt.spec.mbits) if fmt.spec.mbits else Fraction(1)


def argument_rows(q: Query, fixed: dict[str, int]) -> list[dict[str, int]]:
    """The argument's worst case, built directly: c = +-2^E exactly, every product of
    largest significands just below 2 grid steps (keeps one step, loses almost one) or,
    for the first n_low of them, just below 1 step (keeps none), n_low chosen over all
    values so that the kept sum's low bits make the final rounding lose most."""
    p = q.p
    F = _grid_bits(q)
    af, bf, cf = p.a_fmt, p.b_fmt, p.c_fmt
    rows = []
    c_sigs = [Fraction(1)]
    if cf.spec.mbits > F:  # c's own bits below the grid: it loses almost a step too
        c_sigs.append(1 + Fraction(1, 1 << F) - Fraction(1, 1 << cf.spec.mbits))
    # the place of each product in its fused group: the first n_low of every group keep
    # nothing, so that every group's kept sum ends between two ulps of the running sum
    # (the groups of the dense unit X runs: a sparse query's products are its entries)
    place = {k: i for group in unit_groups(q)[1] for i, k in enumerate(group)}
    positions = q.product_positions()
    for E in (0, 1, 2, 4):
        for n_low in range(min(len(positions), 8) + 1):
            for neg, c_sig in ((n, c) for n in (False, True) for c in c_sigs):
                row = _zero_row(p.K) | {"c": _value(cf, c_sig, E, neg)}
                for k in positions:
                    low = place[k] < n_low
                    _full_product(row, k, E - F - (2 if low else 1), neg, af, bf)
                row.update(fixed)
                rows.append(row)
    # A subnormal factor: the largest exponent E belongs to a product whose value is
    # far below 2^E (rho of the argument), c = 0, the other products just below two grid
    # steps of that E: every cut is then large against the denominator.
    if af.spec.mbits:
        for frac_bits in (0, 1, 2):
            sig_a = Fraction(1 + frac_bits, 1 << af.spec.mbits)  # a subnormal significand
            for E in range(af.spec.emin + bf.spec.emin + F + 1, af.spec.emin + bf.spec.emax + 1):
                eb = E - af.spec.emin
                if not bf.spec.emin <= eb <= bf.spec.emax:
                    continue
                for neg in (False, True):
                    row = _zero_row(p.K)
                    k0 = positions[0]
                    row[f"a{k0}"] = round_fraction(
                        (-1 if neg else 1) * sig_a * Fraction(2) ** af.spec.emin, af
                    )
                    row[f"b{k0}"] = _value(bf, _top(bf), eb, False)
                    for k in positions[1:]:
                        _full_product(row, k, E - F - 1, neg, af, bf)
                    row.update(fixed)
                    rows.append(row)
                break  # the lowest E that fits is enough
    return rows + aligned_rows(q, fixed, class_normal(q.p, q.constraints))


def _mutate(row: dict[str, int], q: Query, rng: random.Random, fixed) -> dict[str, int]:
    """The row with one input changed: a low significand bit flipped, the exponent moved
    by one (a and b in opposite directions keep the product's place), or a sign flipped."""
    out = dict(row)
    fmts = {o.name: o.fmt for o in q.operands}
    names = [n for n in fmts if n not in fixed]
    n = rng.choice(names)
    s = fmts[n].spec
    r = rng.random()
    if r < 0.6 and s.mbits:
        out[n] ^= 1 << rng.randrange(s.mbits)
    elif r < 0.9:
        step = 1 << s.mbits
        e_field = (out[n] >> s.mbits) & ((1 << s.ebits) - 1)
        delta = rng.choice([-1, 1])
        if 1 <= e_field + delta <= (1 << s.ebits) - 2:
            out[n] += delta * step
            if n.startswith("a") and f"b{n[1:]}" in out and f"b{n[1:]}" not in fixed:
                bs = fmts[f"b{n[1:]}"].spec
                be = (out[f"b{n[1:]}"] >> bs.mbits) & ((1 << bs.ebits) - 1)
                if 1 <= be - delta <= (1 << bs.ebits) - 2:
                    out[f"b{n[1:]}"] -= delta * (1 << bs.mbits)
    else:
        out[n] ^= 1 << (s.storage - 1)
    return out


def structured_best(
    q: Query, seconds: float, seed: int = 0, stop_at: Fraction | None = None
) -> Sampled | None:
    """The largest exact measure found by structured draws and local search within
    `seconds` (None when no row of the class was found); it ends early once a row
    reaches `stop_at` (the lower end that closes the interval)."""
    rng = random.Random(seed)
    fixed = fixed_inputs(q)
    t_end = time.monotonic() + seconds
    best = best_of(q, argument_rows(q, fixed) + fdrda_rows(q, fixed))
    first = best_of(q, [structured_row(q, rng, fixed) for _ in range(BATCH)])
    if first is not None and (
        best is None or (not isinstance(first.measure, float) and first.measure > best.measure)
    ):
        best = first
    rows = (best.rows if best else 0) + (first.rows if first else 0)

    def reached() -> bool:
        return (
            stop_at is not None
            and best is not None
            and not isinstance(best.measure, float)
            and best.measure >= stop_at
        )

    while time.monotonic() < t_end and not reached():
        if best is None or rng.random() < 0.2:
            cand = best_of(q, [structured_row(q, rng, fixed) for _ in range(BATCH)])
        else:
            cand = best_of(q, [_mutate(best.inputs, q, rng, fixed) for _ in range(BATCH)])
        if cand is not None:
            rows += cand.rows
            if best is None or (
                not isinstance(cand.measure, float) and cand.measure > best.measure
            ):
                best = cand
    if best is not None:
        best.rows = rows
    return best


__all__ = ["argument_rows", "structured_best", "structured_row"]
