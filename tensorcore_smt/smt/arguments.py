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

Two fused units equal but for the zero-exponent threshold e_zero (do they ever
differ?) compute the same d on every input when no term can lie below the higher
threshold, or when those that can keep every bit on the floor's grid and fit the carry
bits (model/zero_exponent.py): unsat for every input of any class.

An argument is a proof on paper about the model's steps, and a proof on paper can be
wrong. Each one therefore comes with its extreme rows at its own bound (`Argued.check`:
the rows run through the concrete model, model/integer_sums.extreme_rows,
model/integer.no_clamp_rows, model/monotone.monotone_rows); smt/solve.answer() uses an
argument only when none of them contradicts it, and then still asks the solvers within
the query's budget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from .query import EXACT, ConstraintKind, Goal, Query


class ArgumentKind(Enum):
    """The stated arguments that answer a query without a solver."""

    MONOTONE = "monotone-in-c"  # model/monotone.py
    NO_CLAMP = "integer-range"  # model/integer.no_clamp_bound
    INTEGER_SUMS = "integer-sums"  # model/integer_sums.py
    ZERO_FLOOR = "zero-exponent-floor"  # model/zero_exponent.py

    @property
    def title(self) -> str:
        """The argument's name in reports."""
        return {
            ArgumentKind.MONOTONE: "the monotonicity argument",
            ArgumentKind.NO_CLAMP: "the integer range argument",
            ArgumentKind.INTEGER_SUMS: "the integer-sum argument",
            ArgumentKind.ZERO_FLOOR: "the zero-exponent floor argument",
        }[self]


class ExtremeRows:
    """What every stated argument carries: `run_check` (run its extreme rows: how many
    ran, and the row that contradicts the argument in words, or None) run once by
    `check`, its answer kept in `rows` and `contradiction`."""

    run_check: Callable[[], tuple[int, str | None]]
    rows: int
    contradiction: str | None
    checked: bool

    def check(self) -> str | None:
        """Run the extreme rows (once): the contradicting row in words, or None."""
        if not self.checked:
            self.rows, self.contradiction = self.run_check()
            self.checked = True
        return self.contradiction


@dataclass
class Argued(ExtremeRows):
    """An argument that proves a query unsat: which one, its steps in words, the note an
    answer carries, and the check of its extreme rows at its bound on the concrete
    model (`run_check`: how many rows ran, and the row that contradicts the argument
    in words, or None)."""

    kind: ArgumentKind
    steps: list[str]
    note: str
    run_check: Callable[[], tuple[int, str | None]] = field(repr=False)
    rows: int = 0
    contradiction: str | None = None
    checked: bool = False

    def to_json(self) -> dict:
        """The argument's part of a JSON report."""
        return {
            "kind": self.kind.value,
            "steps": list(self.steps),
            "rows_checked": self.rows,
            "contradiction": self.contradiction,
        }


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


def monotone_argument(q: Query) -> Argued | None:
    """The monotonicity argument (model/monotone.py) for `q` ("raising c never lowers
    d", nonnegative inputs), or None where it does not apply."""
    from ..model.monotone import monotone_in_c
    from .argument_rows import monotone_counterexample, monotone_rows_count

    if q.goal != Goal.NON_MONOTONE or q.grows != "c":
        return None
    if not all(_nonnegative(q, g) for g in "abc"):
        return None
    p = q.p
    why = monotone_in_c(p)
    if why is None:
        return None

    def run_check() -> tuple[int, str | None]:
        ce = monotone_counterexample(p)
        if ce is None:
            return monotone_rows_count(p), None
        (a, b, cs), k = ce
        return monotone_rows_count(p), (
            f"c = {cs[k - 1]:#x} -> {cs[k]:#x} lowers d (a = {[hex(x) for x in a]}, "
            f"b = {[hex(x) for x in b]})"
        )

    return Argued(
        ArgumentKind.MONOTONE, [why], f"proved by the monotonicity argument: {why}", run_check
    )


def argued_monotone(q: Query) -> str | None:
    """Why `q` is unsat by the monotonicity argument (its note), or None."""
    got = monotone_argument(q)
    return None if got is None else got.note


def no_clamp_argument(q: Query) -> Argued | None:
    """The integer range argument for `q` (do two integer units ever differ?): no sum
    leaves the s32 range on its class, |c| <= 2^b - 1 with 2^b - 1 <= the bound of
    model/integer.no_clamp_bound for both units, where each computes the exact sum;
    None where it does not apply."""
    from ..model.integer import no_clamp_bound
    from ..model.params import Algorithm
    from .argument_rows import no_clamp_counterexample

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
    steps = bounds[0][1] + [f"the class has |c| <= 2^{pc} - 1 <= B for both units"]

    def run_check() -> tuple[int, str | None]:
        n = 0
        for p, (B, _) in zip(ps, bounds):
            n += 4
            row = no_clamp_counterexample(p, B)
            if row is not None:
                a, b, c = row
                return n, f"c = {c}, a = {a}, b = {b} (|c| = B = {B}) is not the exact sum"
        return n, None

    return Argued(
        ArgumentKind.NO_CLAMP,
        steps,
        f"proved by the integer range argument (model/integer.py): {'; '.join(steps)}",
        run_check,
    )


def argued_no_clamp(q: Query) -> str | None:
    """Why `q` is unsat by the integer range argument (its note), or None."""
    got = no_clamp_argument(q)
    return None if got is None else got.note


def integer_sums_argument(q: Query) -> Argued | None:
    """The integer-sum argument (model/integer_sums.py) for `q` (is the unit ever
    inexact on P-bit integer slices with an integer c of at most b bits?), or None."""
    from ..model.integer_sums import argued_bound
    from .argument_rows import counterexample, rows_checked

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
    steps = lines + [f"the class has |c| <= 2^{pc} - 1 <= B"]
    p = q.p

    def run_check() -> tuple[int, str | None]:
        n = rows_checked(p, P, B)
        ce = counterexample(p, P, B)
        if ce is None:
            return n, None
        (a, b, c), d = ce
        exact = c + sum(x * y for x, y in zip(a, b))
        return n, f"c = {c}, a = {a}, b = {b} gives d = {d}, not the exact {exact} (B = {B})"

    return Argued(
        ArgumentKind.INTEGER_SUMS,
        steps,
        f"proved by the integer-sum argument (model/integer_sums.py): {'; '.join(steps)}",
        run_check,
    )


def zero_floor_argument(q: Query) -> Argued | None:
    """The zero-exponent floor argument (model/zero_exponent.py) for `q` (do two fused
    units that differ only in e_zero ever differ?), or None where it does not apply."""
    from ..model.zero_exponent import equal_by_floor, floor_rows
    from .argument_rows import separating_row

    if not isinstance(q, Query):  # a GEMM query: the argument is about one instruction
        return None
    if q.goal not in (Goal.DIFFER, Goal.EQUIVALENT) or EXACT in q.variants or q.meta:
        return None
    if len(q.params) != 2:
        return None
    p1, p2 = q.params
    steps = equal_by_floor(p1, p2)
    if steps is None:
        return None

    def run_check() -> tuple[int, str | None]:
        rows = list(floor_rows(p1, p2))
        got = separating_row(p1, p2, rows)
        if got is None:
            return len(rows), None
        (a, b, c), d1, d2 = got
        return len(rows), (
            f"a = {[hex(x) for x in a]}, b = {[hex(x) for x in b]}, c = {c:#x} gives "
            f"{d1:#x} and {d2:#x}"
        )

    return Argued(
        ArgumentKind.ZERO_FLOOR,
        steps,
        f"proved by the zero-exponent floor argument (model/zero_exponent.py): {'; '.join(steps)}",
        run_check,
    )


ARGUMENTS: tuple[str, ...] = (
    "monotone_argument",
    "no_clamp_argument",
    "integer_sums_argument",
    "zero_floor_argument",
)
"""Every stated argument (the functions of this module by name), tried in this order."""


def stated_argument(q: Query) -> Argued | None:
    """The first argument that proves `q` unsat (unchecked: see `Argued.check`), or None."""
    for name in ARGUMENTS:
        got = globals()[name](q)
        if got is not None:
            return got
    return None


def argued_unsat(q: Query) -> str | None:
    """Why an argument proves `q` unsat (the note of the answer), or None."""
    got = stated_argument(q)
    return None if got is None else got.note


__all__ = [
    "ARGUMENTS",
    "ArgumentKind",
    "Argued",
    "argued_monotone",
    "argued_no_clamp",
    "argued_unsat",
    "integer_sums_argument",
    "monotone_argument",
    "no_clamp_argument",
    "stated_argument",
    "zero_floor_argument",
]
