"""The argument's extreme rows run through the concrete model: the check every argued
answer passes before it is trusted (smt/arguments.py, certify/exact.py, exact_gemm.py).

The rows themselves are model facts (model/integer_sums.extreme_rows,
model/integer.no_clamp_rows, model/monotone.monotone_rows); running them needs the
simulator (api.simulate_params), which sits above model/, so the runners live here."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np

from ..api import simulate_params
from ..formats import Format, int_bits, int_value, round_fraction, value_of
from ..model.integer import exact_value, no_clamp_rows
from ..model.integer_sums import Row, extreme_rows
from ..model.monotone import MonotoneRow, monotone_rows
from ..model.params import ModelParams
from ..model.zero_exponent import Row as FloorRow


def counterexample(p: ModelParams, slice_bits: int, B: int) -> tuple[Row, object] | None:
    """The first row of `extreme_rows(p, slice_bits, B)` on which the concrete model
    (api.simulate_params) is not exact, with the value it gives (None: every row exact,
    the argument stands on them). Rows whose operands a format cannot hold are left out."""
    rows = list(extreme_rows(p, slice_bits, B))

    def enc(v: int, f: Format) -> int:
        return round_fraction(Fraction(v), f)

    A = np.array([[enc(x, p.a_fmt) for x in r[0]] for r in rows], dtype=np.uint64)
    Bm = np.array([[enc(x, p.b_fmt) for x in r[1]] for r in rows], dtype=np.uint64)
    C = np.array([enc(r[2], p.c_fmt) for r in rows], dtype=np.uint64)
    D = simulate_params(p, A, Bm, C)
    for i, (a, b, c) in enumerate(rows):
        d = value_of(int(D[i]), p.d_fmt)
        if d != c + sum(x * y for x, y in zip(a, b)):
            return (a, b, c), d
    return None


def rows_checked(p: ModelParams, slice_bits: int, B: int) -> int:
    """How many rows `counterexample` runs (for reports)."""
    return sum(1 for _ in extreme_rows(p, slice_bits, B))


def no_clamp_counterexample(p: ModelParams, B: int) -> tuple[list[int], list[int], int] | None:
    """The first row of `no_clamp_rows(p, B)` on which the concrete model does not give
    the exact sum (None: every row exact)."""
    return first_inexact_integer_row(p, no_clamp_rows(p, B))


def first_inexact_integer_row(
    p: ModelParams, rows: list[tuple[list[int], list[int], int]]
) -> tuple[list[int], list[int], int] | None:
    """The first of the integer unit's rows (a, b, c as integers) on which the concrete
    model does not give the exact sum a . b + c (None: every row exact)."""
    A = np.array([[int_bits(x, p.a_fmt) for x in r[0]] for r in rows], dtype=np.uint64)
    Bm = np.array([[int_bits(x, p.b_fmt) for x in r[1]] for r in rows], dtype=np.uint64)
    C = np.array([int_bits(r[2], p.c_fmt) for r in rows], dtype=np.uint64)
    D = simulate_params(p, A, Bm, C)
    for i, r in enumerate(rows):
        if int_value(int(D[i]), p.d_fmt) != exact_value(*r, p):
            return r
    return None


def monotone_counterexample(p: ModelParams) -> tuple[MonotoneRow, int] | None:
    """The first sweep of `monotone_rows(p)` along which the concrete model's d falls,
    with the index of the c where it falls (None: d never falls on the sweeps)."""

    sweeps = list(monotone_rows(p))
    if not sweeps:
        return None
    A = np.array([a for a, _, cs in sweeps for _ in cs], dtype=np.uint64)
    B = np.array([b for _, b, cs in sweeps for _ in cs], dtype=np.uint64)
    C = np.array([c for _, _, cs in sweeps for c in cs], dtype=np.uint64)
    D = simulate_params(p, A, B, C)
    i = 0
    for row in sweeps:
        ds = [value_of(int(D[i + k]), p.d_fmt) for k in range(len(row[2]))]
        i += len(row[2])
        for k in range(1, len(ds)):
            if ds[k] < ds[k - 1]:
                return row, k
    return None


def monotone_rows_count(p: ModelParams) -> int:
    """How many rows `monotone_counterexample` runs (for reports)."""
    return sum(len(cs) for _, _, cs in monotone_rows(p))


def separating_row(
    p1: ModelParams,
    p2: ModelParams,
    rows: list[FloorRow],
    accept: Callable[[FloorRow], bool] | None = None,
    tries: int = 8,
) -> tuple[FloorRow, int, int] | None:
    """The first of `rows` (model/zero_exponent.py) on which the concrete units `p1` and
    `p2` give different bits and that `accept` takes (at most `tries` of the differing
    rows are offered to it), with both outputs (None: no such row)."""
    if not rows:
        return None
    A = np.array([r[0] for r in rows], dtype=np.uint64)
    B = np.array([r[1] for r in rows], dtype=np.uint64)
    C = np.array([r[2] for r in rows], dtype=np.uint64)
    d1 = simulate_params(p1, A, B, C, engine="numpy")
    d2 = simulate_params(p2, A, B, C, engine="numpy")
    for i in [int(i) for i in np.nonzero(d1 != d2)[0][:tries]]:
        if accept is None or accept(rows[i]):
            return rows[i], int(d1[i]), int(d2[i])
    return None


__all__ = [
    "counterexample",
    "monotone_counterexample",
    "monotone_rows_count",
    "no_clamp_counterexample",
    "rows_checked",
    "separating_row",
]
