"""Witnesses built from the question instead of searched for: where the zero-exponent
floor argument (model/zero_exponent.py) does not prove two units equal, its separating
rows (tiny c, products whose bits lie between the two floors' grids, zero products
that raise e_max to e_zero) are run on both units, and the first row on which they
differ is re-run through the query's own formula on the concrete interpreter
(`recheck`), exactly as a solver's witness is."""

from __future__ import annotations

from ..model.zero_exponent import Row, equal_by_floor, only_e_zero_differs, separating_rows
from .argument_rows import separating_row
from .goals import EXACT, Goal
from .query import Query, Recheck, recheck


def _inputs(q: Query, row: Row) -> dict[str, int]:
    a, b, c = row
    K = q.p.K
    return {f"a{i}": a[i] for i in range(K)} | {f"b{i}": b[i] for i in range(K)} | {"c": c}


def floor_witness(q: Query) -> tuple[Recheck, int] | None:
    """A re-checked witness that two units equal but for e_zero differ, built from the
    separating rows, with how many rows were run; None where the question is another
    one, the argument proves them equal, or no row separates them in the class."""
    if not isinstance(q, Query):  # a GEMM query: the rows are one instruction's
        return None
    if q.goal not in (Goal.DIFFER, Goal.EQUIVALENT) or EXACT in q.variants or q.meta:
        return None
    if len(q.params) != 2 or q.p.scale_fmt is not None:
        return None
    p1, p2 = q.params
    if not only_e_zero_differs(p1, p2) or equal_by_floor(p1, p2) is not None:
        return None
    rows = separating_rows(p1, p2)
    found: list[Recheck] = []

    def accept(row: Row) -> bool:
        w = recheck(q, _inputs(q, row))
        if w.reproduces:
            found.append(w)
        return w.reproduces

    if separating_row(p1, p2, rows, accept) is None:
        return None
    return found[-1], len(rows)


__all__ = ["floor_witness"]
