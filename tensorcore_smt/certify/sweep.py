"""Millions of random rows of an input class through the compiled engine, the largest
normwise error measured exactly: how far random testing gets, at scale.

certify/sample.py measures every row with exact rationals (thousands of rows a second).
Here the rows are drawn and run in blocks (the compiled engine, engine/; numpy where it
cannot be built), every normwise error |d - e| / (|c| + sum |a_k b_k|) is computed in
fp64 with a compensated sum (products of the narrow input formats are exact in fp64;
the sum's error is far below 2^-90 of the denominator), and only the `top` largest are
measured again with exact rationals by sample.best_of, which also decides their class
membership with the class's own constraints on the concrete interpreter and runs them
again through the unit (zeros are drawn as +0, so FNUZ formats see no NaN from them).
The result is therefore exact and attained, like any witness; the fp64 pass only picks
which rows to measure exactly.

Rows: half from the validation mix (validation/rows.py: normal, cancel, wide,
subnormal, zeros, special, bits kinds), half of mixed magnitudes as sample.py draws
them (exponents uniform within +-8 binades, narrowed to the format's normal range, a
tenth zeros, random significands and signs), a quarter of which carry subnormal a and
b operands (one in ten), so the default class meets subnormal factors. Rows are kept
where they lie in the class, decided in fp64: finite inputs, normal operands where the
class says so, and |c| + sum |a_k b_k| within the output format's normal range with a
margin of 2^-40 (the few rows that close to the edge are left out). One draw serves
every class asked for (the normal-only class is a subset of the default).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ..errors import UserError
from ..formats import Format
from ..model.measure import Measure
from ..smt.query import Constraint, ConstraintKind

CHUNK = 1 << 18
"""Rows per block (memory stays near 100 MB at K = 32)."""

TOP = 256
"""Rows per class measured again exactly."""

WINDOW = 8
"""Exponent window (binades either side of 1) of the mixed-magnitude rows."""

MARGIN = 2.0**-40
"""Relative margin of the fp64 class decision at the edges of the output's range."""

_SUPPORTED = {
    ConstraintKind.FINITE,
    ConstraintKind.NO_OVERFLOW,
    ConstraintKind.NO_UNDERFLOW,
    ConstraintKind.NORMAL_ONLY,
}


@dataclass
class Swept:
    """The largest exact normwise error found in one class (`measure` None: no drawn
    row lay in the class)."""

    measure: Fraction | float | None
    inputs: dict[str, int] | None
    drawn: int  # rows drawn (for every class alike)
    in_class: int  # rows of the class, decided in fp64
    remeasured: int  # rows measured again exactly
    approx: float  # the fp64 estimate of the largest error
    engine: str  # "compiled", or "numpy (...why...)"
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def _values_table(fmt: Format):
    """fp64 value of every bit pattern of a narrow format (a lookup table), or None
    for formats of 32 bits and more (converted directly)."""
    from ..gemm.measure import _as_f64

    if fmt.spec.storage > 16:
        return None
    with np.errstate(invalid="ignore", over="ignore"):
        return _as_f64(np.arange(1 << fmt.spec.storage, dtype=np.uint64), fmt)


def _as_values(bits: np.ndarray, fmt: Format, table) -> np.ndarray:
    from ..gemm.measure import _as_f64

    if table is not None:
        return table[bits.astype(np.intp)]
    with np.errstate(invalid="ignore", over="ignore"):
        return _as_f64(bits, fmt)


def _mixed(fmt: Format, shape, rng: np.random.Generator, subnormal=None) -> np.ndarray:
    """Bit patterns of mixed magnitudes (module docstring); `subnormal`: a boolean mask
    of `shape` (where true and the format has subnormals, a subnormal instead)."""
    s = fmt.spec
    w = max(1, min(WINDOW, s.emax - 1, -s.emin))
    e = rng.integers(-w, w + 1, size=shape)
    field_ = (e + s.bias).astype(np.uint64)
    mant = rng.integers(0, 1 << s.mbits, size=shape, dtype=np.uint64) if s.mbits else 0
    if subnormal is not None and s.mbits:
        field_ = np.where(subnormal, np.uint64(0), field_)
        mant = np.where(subnormal & (mant == 0), np.uint64(1), mant)
    sign = rng.integers(0, 2, size=shape, dtype=np.uint64)
    low = np.uint64(s.ignored_low)
    bits = (
        (sign << np.uint64(s.storage - 1 - s.ignored_high))
        | (field_ << np.uint64(s.mbits) << low)
        | (np.asarray(mant, dtype=np.uint64) << low)
    )
    zero = rng.random(size=shape) < 0.1
    return np.where(zero, np.uint64(0), bits)


def draw(p, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n rows (a (n, K), b (n, K), c (n,) as uint64 bits) of the module's mix."""
    from ..validation.rows import random_rows

    h = n // 2
    a1, b1, c1, _ = random_rows(p.a_fmt, p.b_fmt, p.c_fmt, p.K, h, seed)
    rng = np.random.default_rng([seed, 2])
    m = n - h
    sub_row = rng.random(size=(m, 1)) < 0.25
    sub_a = sub_row & (rng.random(size=(m, p.K)) < 0.1)
    sub_b = sub_row & (rng.random(size=(m, p.K)) < 0.1)
    a2 = _mixed(p.a_fmt, (m, p.K), rng, sub_a)
    b2 = _mixed(p.b_fmt, (m, p.K), rng, sub_b)
    c2 = _mixed(p.c_fmt, (m,), rng)
    return np.concatenate([a1, a2]), np.concatenate([b1, b2]), np.concatenate([c1, c2])


def _normal_ops(cons: tuple[Constraint, ...]) -> str:
    """The operand groups the class keeps normal (letters of abc); ValueError for a
    class this module cannot decide in fp64."""
    ops = ""
    kinds = {c.kind for c in cons}
    for need in (ConstraintKind.FINITE, ConstraintKind.NO_OVERFLOW, ConstraintKind.NO_UNDERFLOW):
        if need not in kinds:
            raise UserError(f"the sweep needs the class to include {need.value}")
    for c in cons:
        if c.kind not in _SUPPORTED:
            raise UserError(
                f"the sweep decides only finite, no-overflow, no-underflow and normal-only "
                f"in fp64, not {c.kind.value}"
            )
        if c.kind == ConstraintKind.NORMAL_ONLY:
            ops += c.operands
    return ops


def _run(p, a, b, c, engine: str) -> tuple[np.ndarray, str]:
    from ..api import simulate_params

    if engine == "compiled":
        try:
            return simulate_params(p, a, b, c, engine="compiled"), "compiled"
        except (ImportError, OSError, RuntimeError, UserError) as e:
            why = f"numpy (compiled engine unavailable: {type(e).__name__}: {e})"
            return simulate_params(p, a, b, c, engine="numpy"), why
    return simulate_params(p, a, b, c, engine="numpy"), engine


def sweep(
    arch: str,
    instr: str | None,
    classes: dict[str, tuple[Constraint, ...]],
    rows: int,
    seed: int = 1,
    top: int = TOP,
    engine: str = "compiled",
    chunk: int = CHUNK,
) -> dict[str, Swept]:
    """The largest exact normwise error (against the exact result) over `rows` random
    rows of each class (name -> constraints) of `arch` / `instr` (module docstring)."""
    from ..certify.bound import make_bound_query
    from .sample import best_of

    t0 = time.monotonic()
    queries = {
        name: make_bound_query(arch, None, instr, Measure.NORMWISE, cons)
        for name, cons in classes.items()
    }
    p = next(iter(queries.values())).p
    normal = {name: _normal_ops(cons) for name, cons in classes.items()}
    tables = {f: _values_table(f) for f in {p.a_fmt, p.b_fmt, p.c_fmt, p.d_fmt}}
    d_spec = p.d_fmt.spec
    lo = 2.0**d_spec.emin * (1 + MARGIN)
    hi = _largest(p.d_fmt) * (1 - MARGIN)
    best = {name: None for name in classes}  # (err, a, b, c) arrays of the candidates
    counts = dict.fromkeys(classes, 0)
    used = "compiled"
    done = 0
    block = 0
    while done < rows:
        n = min(chunk, rows - done)
        a, b, c = draw(p, n, seed * 1_000_003 + block)
        block += 1
        done += n
        with np.errstate(invalid="ignore", over="ignore"):
            A = _as_values(a, p.a_fmt, tables[p.a_fmt])
            B = _as_values(b, p.b_fmt, tables[p.b_fmt])
            C = _as_values(c, p.c_fmt, tables[p.c_fmt])
            P = A * B
            den = np.abs(C) + np.abs(P).sum(axis=1)
            base = np.isfinite(A).all(axis=1) & np.isfinite(B).all(axis=1) & np.isfinite(C)
            base &= (den >= lo) & (den <= hi)
        masks = {}
        for name in classes:
            m = base.copy()
            ops = normal[name]
            if "a" in ops:
                m &= ((A == 0) | (np.abs(A) >= 2.0**p.a_fmt.spec.emin)).all(axis=1)
            if "b" in ops:
                m &= ((B == 0) | (np.abs(B) >= 2.0**p.b_fmt.spec.emin)).all(axis=1)
            if "c" in ops:
                m &= (C == 0) | (np.abs(C) >= 2.0**p.c_fmt.spec.emin)
            masks[name] = m
        keep = np.zeros(n, dtype=bool)
        for m in masks.values():
            keep |= m
        idx = np.flatnonzero(keep)
        if not len(idx):
            continue
        d, how = _run(p, a[idx], b[idx], c[idx], engine)
        if how != "compiled":
            used = how
        with np.errstate(invalid="ignore", over="ignore"):
            D = _as_values(np.asarray(d, dtype=np.uint64), p.d_fmt, tables[p.d_fmt])
            err = _normwise(C[idx], P[idx], D, den[idx])
        for name, m in masks.items():
            sel = m[idx]
            counts[name] += int(sel.sum())
            if not sel.any():
                continue
            e, ia = err[sel], idx[sel]
            cand = (e, a[ia], b[ia], c[ia])
            best[name] = _top(cand if best[name] is None else _cat(best[name], cand), top)
    out = {}
    for name, q in queries.items():
        sw = Swept(None, None, rows, counts[name], 0, 0.0, used)
        cand = best[name]
        if cand is not None:
            e, ca, cb, cc = cand
            drawn = [
                {
                    **{f"a{k}": int(ca[i, k]) for k in range(p.K)},
                    **{f"b{k}": int(cb[i, k]) for k in range(p.K)},
                    "c": int(cc[i]),
                }
                for i in range(len(e))
            ]
            got = best_of(q, drawn)
            sw.remeasured = len(drawn)
            sw.approx = float(e.max())
            if got is not None:
                sw.measure, sw.inputs = got.measure, got.inputs
        sw.seconds = time.monotonic() - t0
        out[name] = sw
    return out


def _largest(fmt: Format) -> float:
    from ..gemm.measure import largest

    return largest(fmt)


def _normwise(C, P, D, den) -> np.ndarray:
    """|c + sum P - D| / den in fp64 with a compensated (Neumaier) sum; infinite where D
    is not finite (a non-finite output on finite inputs exceeds every threshold)."""
    s = C.copy()
    comp = np.zeros_like(C)
    for t in [*P.T, -D]:
        y = s + t
        comp += np.where(np.abs(s) >= np.abs(t), (s - y) + t, (t - y) + s)
        s = y
    err = np.abs(s + comp) / den
    return np.where(np.isfinite(D) & ~np.isnan(err), err, np.inf)


def _cat(x, y):
    return tuple(np.concatenate([u, v]) for u, v in zip(x, y))


def _top(cand, k: int):
    """The k candidates of largest estimated error."""
    e = cand[0]
    if len(e) <= k:
        return cand
    keep = np.argpartition(-e, k - 1)[:k]
    return tuple(x[keep] for x in cand)


__all__ = ["Swept", "draw", "sweep"]
