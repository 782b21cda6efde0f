"""Random rows of an input class, measured exactly: a lower bound before any solver.

A certificate's lower bound must be attained by a real input. Random rows are cheap
witnesses: they are drawn with mixed magnitudes and signs (each value +-m 2^e with e
uniform in a window around 1, a tenth of them zero), kept where the class's constraint
holds (its concrete meaning, inputs/concrete.py), run through the unit with
`tc.simulate`, and their error measured with exact rationals. The best row seeds the bisection, so the solvers
start above what sampling already shows (and the report can say how far random
testing is from the worst case).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..formats import Format, round_fraction, value_of
from ..inputs.concrete import rows_mask
from ..model.measure import exact_value, measure_value
from ..smt.formula import fixed_inputs
from ..smt.query import Query


@dataclass
class Sampled:
    """The best row of a sample: its inputs (bits), outputs and exact measure."""

    measure: Fraction | float
    inputs: dict[str, int]
    outputs: tuple[int, int]
    rows: int  # rows of the class that were measured


def _draw(rng: random.Random, fmt: Format, window: int) -> int:
    """A random value of `fmt` (10 % zeros) with an exponent in [-window, window], the
    window narrowed to the format's normal range (FP8 formats span only 2^-6..2^8)."""
    if rng.random() < 0.1:
        return 0
    window = max(1, min(window, fmt.spec.emax - 1, -fmt.spec.emin))
    m = Fraction(rng.getrandbits(24) | (1 << 24), 1 << 24)
    e = rng.randint(-window, window)
    v = m * Fraction(2) ** e * (1 if rng.random() < 0.5 else -1)
    return round_fraction(v, fmt)


def sample_best(q: Query, rows: int, seed: int = 0, window: int = 8) -> Sampled | None:
    """The row of largest measure among `rows` random rows that satisfy the class of the
    error query `q` (None when no drawn row does)."""
    rng = random.Random(seed)
    names = [o.name for o in q.operands]
    fmts = {o.name: o.fmt for o in q.operands}
    fixed = fixed_inputs(q)
    drawn = [
        {n: fixed[n] if n in fixed else _draw(rng, fmts[n], window) for n in names}
        for _ in range(rows)
    ]
    return best_of(q, drawn)


def in_class(q: Query, drawn: list[dict[str, int]]) -> np.ndarray:
    """Which rows (input name -> bits) lie in the class of `q`, by the class's concrete
    meaning (inputs/concrete.py)."""
    if not drawn:
        return np.zeros(0, dtype=bool)
    columns = {o.name: np.array([v[o.name] for v in drawn], dtype=np.uint64) for o in q.operands}
    return rows_mask(q.constraints, q.operands, q.p, columns)


def best_of(q: Query, drawn: list[dict[str, int]]) -> Sampled | None:
    """The row of largest exact measure among `drawn` (input name -> bits) that lie in
    the class of `q` (None when none does)."""
    from ..api import simulate_params

    p = q.p
    rows = len(drawn)
    if not rows:
        return None
    ok = in_class(q, drawn)
    kept = [v for v, keep in zip(drawn, ok) if keep]
    if not kept:
        return None
    A = np.array([q.unit_a([v[f"a{i}"] for i in range(p.K)]) for v in kept], dtype=np.uint64)
    B = np.array([[v[f"b{i}"] for i in range(p.K)] for v in kept], dtype=np.uint64)
    C = np.array([v["c"] for v in kept], dtype=np.uint64)
    meta = list(q.meta) if q.meta is not None else None
    X = simulate_params(q.params[0], A, B, C, meta=meta)
    Y = X if q.against_exact else simulate_params(q.params[1], A, B, C, meta=meta)
    best: Sampled | None = None
    for i, vals in enumerate(kept):
        a = [vals[f"a{k}"] for k in range(p.K)]
        b = [vals[f"b{k}"] for k in range(p.K)]
        e, n = exact_value(a, b, vals["c"], (p.a_fmt, p.b_fmt, p.c_fmt))
        ref = e if q.against_exact else value_of(int(Y[i]), p.d_fmt)
        m = measure_value(value_of(int(X[i]), p.d_fmt), ref, n, q.measure, p.d_fmt)
        if isinstance(ref, float):
            continue  # Y not finite: nothing to measure against
        if best is None or _above(m, best.measure):
            best = Sampled(m, dict(vals), (int(X[i]), int(Y[i])), len(kept))
    if best is not None:
        best.rows = len(kept)
    return best


def _above(x: Fraction | float, y: Fraction | float) -> bool:
    if isinstance(x, float) and math.isnan(x):
        return False
    return x > y
