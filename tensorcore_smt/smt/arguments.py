"""Solver questions a stated argument answers before any solver runs.

Monotonicity in c (properties/monotonicity.toml, "c-grows": every input nonnegative,
c alone grows): model/monotone.py proves it for CDNA3's FDRDA units under conditions
on the formats it checks; the query is then unsat for every input of the class.

An error-exceeds query with threshold 0 against the exact result asks whether the unit
is ever inexact on its class. When the class is P-bit integer slices (a and b) with an
integer accumulator c of at most b bits, model/integer_sums.py proves the unit exact for
every |c| <= B; if 2^b - 1 <= B the query is unsat for every input of the class (any
further constraint only narrows it). The answer names the argument instead of a solver.

Two integer units (wrap-around, `.satfinite` clamps) asked to differ on a class whose
accumulator |c| <= 2^b - 1 keeps every partial sum inside the s32 range
(model/integer.no_clamp_bound) compute the same exact sum: unsat for every input.
"""

from __future__ import annotations

from .query import EXACT, ConstraintKind, Goal, Query


def _integer_bits(q: Query, group: str) -> int | None:
    """The fewest integer bits a constraint of the class gives every input of `group`."""
    bits = [
        c.lo
        for c in q.constraints
        if c.kind == ConstraintKind.INTEGER and group in c.operands and c.lo is not None
    ]
    return min(bits) if bits else None


def _nonnegative(q: Query, group: str) -> bool:
    """Whether a constraint of the class keeps every input of `group` nonnegative."""
    return any(c.kind == ConstraintKind.POSITIVE and group in c.operands for c in q.constraints)


def argued_monotone(q: Query) -> str | None:
    """Why `q` ("raising c never lowers d", nonnegative inputs) is unsat by the
    monotonicity argument (model/monotone.py), or None."""
    from ..model.monotone import monotone_in_c

    if q.goal != Goal.NON_MONOTONE or q.grows != "c":
        return None
    if not all(_nonnegative(q, g) for g in "abc"):
        return None
    why = monotone_in_c(q.p)
    if why is None:
        return None
    return f"proved by the monotonicity argument, no solver asked: {why}"


def argued_no_clamp(q: Query) -> str | None:
    """Why `q` (do two integer units ever differ?) is unsat because no sum leaves the
    s32 range on its class: |c| <= 2^b - 1 with 2^b - 1 <= the bound of
    model/integer.no_clamp_bound for both units, where each computes the exact sum."""
    from ..model.integer import no_clamp_bound
    from ..model.params import Algorithm

    if q.goal not in (Goal.DIFFER, Goal.EQUIVALENT) or EXACT in q.variants:
        return None
    ps = list(q.params)
    if any(p.algorithm != Algorithm.INTEGER for p in ps):
        return None
    pc = _integer_bits(q, "c")
    if pc is None:
        return None
    bounds = [no_clamp_bound(p) for p in ps]
    if any((1 << pc) - 1 > B for B, _ in bounds):
        return None
    return (
        "proved by the integer range argument (model/integer.py), no solver asked: "
        f"{'; '.join(bounds[0][1])}; the class has |c| <= 2^{pc} - 1 <= B for both units"
    )


def argued_unsat(q: Query) -> str | None:
    """Why an argument proves `q` unsat (the note of the answer), or None."""
    from ..model.integer_sums import argued_bound

    monotone = argued_monotone(q)
    if monotone is not None:
        return monotone
    no_clamp = argued_no_clamp(q)
    if no_clamp is not None:
        return no_clamp
    if q.goal != Goal.ERROR_EXCEEDS or q.variants[1] != EXACT:
        return None
    if q.threshold is None or q.threshold != 0:
        return None
    pa, pb, pc = (_integer_bits(q, g) for g in "abc")
    if pa is None or pb is None or pc is None:
        return None
    P = max(pa, pb)
    got = argued_bound(q.p, P)
    if isinstance(got, str):
        return None
    B, lines = got
    if (1 << pc) - 1 > B:
        return None
    return (
        f"proved by the integer-sum argument (model/integer_sums.py), no solver asked: "
        f"{'; '.join(lines)}; the class has |c| <= 2^{pc} - 1 <= B"
    )


__all__ = ["argued_monotone", "argued_unsat"]
