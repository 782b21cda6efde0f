"""A concrete search for a witness before any solver: candidate inputs of the query's
class, run in batches on the vector interpreter through the query's own formula.

A query's witness is an input on which its constraint and its goal both hold. `build`
states them once for every interpreter, so a batch of candidates on the vector
interpreter (bv/vector.py) is decided by the same terms a solver is asked about: a lane
where both hold is a witness, and it is re-run on the concrete interpreter (`recheck`)
before anyone sees it, exactly as a solver's witness is. A search that finds nothing
proves nothing; the solvers then answer as they would without it.

The candidates follow the query, not a property: each operand group's sign, exponent
range, precision, zeros and fixed inputs come from the class's constraints, and rows mix
shapes that decide the papers' questions where random rows seldom do (Fasi et al.,
§III-D5: a c just below a power of two whose growth moves the alignment window, products
of one magnitude a window's width below it; cancellation; products near the grid 2^(E-F)
of a unit that keeps F fraction bits):

- wide rows: every exponent drawn on its own over the operand's range;
- clustered rows: exponents within a few binades of a row centre;
- anchored rows: c near a binade boundary 2^E, every product near 2^(E - j) with one j
  per row (j from -2 up to two output precisions and the carry of K products);
- raw rows: uniform bit patterns (subnormals, Inf and NaN included).

Significands are powers of two, all ones (just below the next power), one ulp above a
power, or random; signs all positive, all negative, mixed, or c against the products
(as the class allows); a share of the products is zero. A non-monotone query's second
input set grows each growing operand by one or a few ulps, to the next power of two, or
to another candidate, so that u <= u_2 holds (the relation is checked with the rest of
the constraint).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..bv.core import BV
from ..bv.vector import VECTOR
from ..formats import Format, Specials
from .query import SECOND, ConstraintKind, Goal, Query, Recheck, fixed_inputs, recheck

SEARCH_S = 2.0
"""Seconds `tcsmt find` gives the search before it starts the solvers (the portfolio).
The library's witnesses that the search finds at all it finds in the first batch or two
(0.01-0.3 s); a query it cannot answer pays the whole budget."""

BATCH = 2048
"""Candidate rows per batch (one vector-interpreter run of the query's formula)."""


@dataclass
class SearchRun:
    """What a search did: the rows it evaluated, its time, and the witness it found
    (re-checked on the concrete interpreter; None: none found)."""

    rows: int
    seconds: float
    seed: int
    witness: Recheck | None = None

    def to_json(self) -> dict:
        return {
            "rows": self.rows,
            "seconds": round(self.seconds, 3),
            "seed": self.seed,
            "found": self.witness is not None,
        }


@dataclass
class _Group:
    """How one operand group (a, b, c, the scale factors) is drawn in the class."""

    fmt: Format
    lo: int  # smallest exponent of a value's leading one
    hi: int  # largest
    mbits: int  # significand bits below the leading one that may be nonzero
    sign: int | None  # forced sign bit, None: free
    zero: bool  # zero allowed
    integer: bool  # no bit below 2^0


def _group(fmt: Format, group: str, q: Query) -> _Group:
    s = fmt.spec
    g = _Group(fmt, s.emin - s.mbits, s.emax, s.mbits, None, True, False)
    if not s.signed:
        g.sign = 0
    if group not in "abc":  # block scale factors: near 1
        g.lo, g.hi = max(g.lo, -4), min(g.hi, 4)
        return g
    for cn in q.constraints:
        if cn.kind == ConstraintKind.FIX or group not in cn.operands:
            continue
        k = cn.kind
        if k == ConstraintKind.POSITIVE:
            g.sign = 0
        elif k == ConstraintKind.NEGATIVE:
            g.sign = 1
        elif k == ConstraintKind.NONZERO:
            g.zero = False
        elif k == ConstraintKind.NORMAL_ONLY:
            g.lo = max(g.lo, s.emin)
        elif k == ConstraintKind.EXPONENT_WINDOW:
            g.lo, g.hi = max(g.lo, cn.lo), min(g.hi, cn.hi)
        elif k == ConstraintKind.REPRESENTABLE:
            t = cn.fmt.spec
            g.lo, g.hi = max(g.lo, t.emin), min(g.hi, t.emax)
            g.mbits = min(g.mbits, t.mbits)
        elif k == ConstraintKind.INTEGER:
            g.lo, g.hi, g.integer = max(g.lo, 0), min(g.hi, cn.lo - 1), True
    g.hi = max(g.hi, g.lo)
    return g


def _encode(g: _Group, sign, exp, frac, zero) -> np.ndarray:
    """Bit patterns of (-1)^sign 2^exp (1 + frac / 2^mbits) in `g`'s format, as uint64:
    exp clipped to the group's range, frac to its precision (integers: no bit below
    2^0), exponents below the normal range as subnormals, `zero` rows +-0."""
    s = g.fmt.spec
    m = s.mbits
    exp = np.clip(exp, g.lo, g.hi).astype(np.int64)
    frac = frac.astype(np.uint64) & np.uint64((1 << g.mbits) - 1)
    frac <<= np.uint64(m - g.mbits)
    if g.integer:  # clear the fraction bits below 2^0: the value's last bit is 2^0
        low = np.clip(m - exp, 0, m).astype(np.uint64)
        frac = (frac >> low) << low
    sig = frac | np.uint64(1 << m)
    normal = exp >= s.emin
    sub_shift = np.clip(s.emin - exp, 0, 63).astype(np.uint64)
    field = np.where(normal, exp + s.bias, 0).astype(np.uint64)
    mant = np.where(normal, frac, sig >> sub_shift)
    if s.specials == Specials.E8M0:
        mant = np.zeros_like(mant)
        field = np.clip(exp + s.bias, 0, (1 << s.ebits) - 2).astype(np.uint64)
    bits = (field << np.uint64(m)) | mant
    bits = np.where(zero & g.zero, np.uint64(0), bits)
    if s.signed:
        sgn = np.uint64(0 if g.sign == 0 else 1) if g.sign is not None else sign
        bits |= np.asarray(sgn, dtype=np.uint64) << np.uint64(s.ebits + m)
    return bits << np.uint64(s.ignored_low)


def _fracs(rng: np.random.Generator, n: int, mbits: int, style: np.ndarray) -> np.ndarray:
    """Significand fractions by row style: 0 power of two, 1 all ones, 2 one ulp above a
    power, 3 random (half the rows), per element."""
    top = (1 << mbits) - 1
    rnd = rng.integers(0, top + 1, n, dtype=np.uint64) if mbits else np.zeros(n, np.uint64)
    pick = np.where(rng.random(n) < 0.5, 3, style)
    out = np.where(pick == 0, 0, np.where(pick == 1, top, np.where(pick == 2, min(1, top), rnd)))
    return out.astype(np.uint64)


def candidates(q: Query, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """`n` candidate rows of the class of `q`: input name -> uint64 bit patterns."""
    p = q.p
    K = p.K
    base = q.base_operands
    groups = {
        "a": _group(p.a_fmt, "a", q),
        "b": _group(p.b_fmt, "b", q),
        "c": _group(p.c_fmt, "c", q),
    }
    if p.scale_fmt is not None:
        groups["s"] = _group(p.scale_fmt, "s", q)
    ga, gb, gc = groups["a"], groups["b"], groups["c"]
    mode = rng.choice(4, n, p=[0.3, 0.25, 0.4, 0.05])  # wide, clustered, anchored, raw
    fstyle = rng.integers(0, 4, n)
    sstyle = rng.integers(0, 4, n)  # all +, all -, mixed, c against the products
    pzero = rng.choice([0.0, 0.0, 0.25, 0.5, 0.85], n)
    # anchored rows: c's leading exponent E - 1 (c just below 2^E), products near 2^(E-j)
    prec = max(p.d_fmt.spec.mbits, p.c_fmt.spec.mbits) + 1
    E = rng.integers(gc.lo + 1, gc.hi + 2, n)
    j = rng.integers(-2, 2 * prec + K.bit_length() + 4, n)
    T = E - j
    centre = rng.integers(min(ga.lo + gb.lo, gc.lo), max(ga.hi + gb.hi, gc.hi) + 1, n)
    spread = rng.choice([0, 1, 3, 8], n)

    def draw(g: _Group, target: np.ndarray, kind: str) -> np.ndarray:
        wide = rng.integers(g.lo, g.hi + 1, n)
        near = target + rng.integers(-spread, spread + 1)
        e = np.where(mode == 0, wide, near)
        if kind == "c":
            e = np.where(mode == 2, E - 1, e)
        sign_rand = rng.integers(0, 2, n).astype(np.uint64)
        sign = np.where(sstyle == 0, 0, np.where(sstyle == 1, 1, sign_rand))
        # c against the products: c negative, every a_k and b_k positive
        sign = np.where(sstyle == 3, 1 if kind == "c" else 0, sign)
        frac = _fracs(rng, n, g.mbits, fstyle)
        if kind == "c":  # anchored: c just below 2^E, or in its binade
            frac = np.where((mode == 2) & (rng.random(n) < 0.6), (1 << g.mbits) - 1, frac)
        zero = np.zeros(n, bool)
        if kind == "c":
            zero = rng.random(n) < 0.08
        bits = _encode(g, sign.astype(np.uint64), e, frac, zero)
        raw = rng.integers(0, 1 << g.fmt.spec.storage, n, dtype=np.uint64)
        return np.where(mode == 3, raw, bits)

    out: dict[str, np.ndarray] = {}
    for k in range(K):
        # split the product's exponent between a_k and b_k within both ranges
        t = np.where(mode == 2, T + rng.integers(-1, 1, n), centre)
        lo = np.maximum(ga.lo, t - gb.hi)
        hi = np.minimum(ga.hi, t - gb.lo)
        ea = np.where(
            lo <= hi, lo + (rng.random(n) * (np.maximum(hi - lo, 0) + 1)).astype(int), t // 2
        )
        a = draw(ga, ea, "a")
        b = draw(gb, t - ea, "b")
        drop = rng.random(n) < pzero
        out[f"a{k}"] = np.where(drop & ga.zero & (mode != 3), np.uint64(0), a)
        out[f"b{k}"] = b
    out["c"] = draw(gc, np.where(mode == 2, E - 1, centre), "c")
    for o in base:
        if o.name[:2] in ("sa", "sb"):
            out[o.name] = draw(groups["s"], np.zeros(n, int), "s")
    for o in base:
        if o.name[0] in q.grows:
            out[o.name + SECOND] = _grow(rng, out[o.name], o.fmt, groups[o.name[0]])
    fixed = fixed_inputs(q)
    for name, bits in fixed.items():
        out[name] = np.full(n, bits, dtype=np.uint64)
    return out


def _grow(rng: np.random.Generator, bits: np.ndarray, fmt: Format, g: _Group) -> np.ndarray:
    """A second value >= each of `bits` (as reals, where the format allows): the same,
    one to a few ulps up, the next power of two up, or another value of the group."""
    s = fmt.spec
    n = len(bits)
    low = np.uint64(s.ignored_low)
    width = s.ebits + s.mbits
    mag = (bits >> low) & np.uint64((1 << width) - 1)
    neg = ((bits >> low) >> np.uint64(width)) & np.uint64(1) if s.signed else np.zeros(n, np.uint64)
    key = np.where(neg == 1, -mag.astype(np.int64), mag.astype(np.int64))
    choice = rng.choice(5, n, p=[0.05, 0.35, 0.15, 0.3, 0.15])
    ulps = np.where(choice == 2, rng.integers(2, max(3, 1 << min(s.mbits, 12)), n), 1)
    step = np.where(choice == 0, 0, ulps)
    # the next power of two above |x| for x >= 0; toward zero to a power for x < 0
    up = ((mag >> np.uint64(s.mbits)) + np.uint64(1)) << np.uint64(s.mbits)
    down = (mag >> np.uint64(s.mbits)) << np.uint64(s.mbits)
    pow2 = np.where(neg == 1, -down.astype(np.int64), up.astype(np.int64))
    other = rng.integers(0, 1 << width, n, dtype=np.uint64).astype(np.int64)
    other = np.where(rng.random(n) < 0.5, other, -other) if s.signed and g.sign != 0 else other
    key2 = np.where(choice == 3, pow2, np.where(choice == 4, np.maximum(key, other), key + step))
    neg2 = (key2 < 0).astype(np.uint64)
    mag2 = np.clip(np.abs(key2), 0, (1 << width) - 1).astype(np.uint64)
    out = mag2 if not s.signed else mag2 | (neg2 << np.uint64(width))
    return out << low


def evaluate(q: Query, rows: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(constraint, goal) of the query on every row (input name -> bit patterns), on the
    vector interpreter: the terms `build` gives the solvers, one lane per row."""
    n = len(rows[q.operands[0].name])
    inputs = {o.name: BV(VECTOR, VECTOR.lanes(rows[o.name], o.width), o.width) for o in q.operands}
    built = q.build(inputs)
    ok = np.broadcast_to(np.asarray(built.constraint.v, dtype=bool), (n,))
    return ok, np.broadcast_to(np.asarray(built.goal.v, dtype=bool), (n,))


def searchable(q) -> bool:
    """Whether the search applies: an instruction query (GEMM queries have their own
    focused query first, smt/gemm_solve.py) whose goal asks for a witness. Goal
    `equivalent` asks for a proof; a counterexample to it still comes from the solvers."""
    return isinstance(q, Query) and q.goal != Goal.EQUIVALENT


def search(q: Query, seconds: float, seed: int = 0, batch: int = BATCH) -> SearchRun:
    """Candidates of the class of `q`, `batch` rows at a time, until one satisfies the
    constraint and the goal or `seconds` have passed (at least one batch runs). A found
    row is re-run on the concrete interpreter; only one that reproduces is returned."""
    t0 = time.monotonic()
    rng = np.random.default_rng([seed, 0x7C5])
    names = [o.name for o in q.operands]
    rows = 0
    while True:
        cand = candidates(q, rng, batch)
        ok, goal = evaluate(q, cand)
        hits = np.flatnonzero(ok & goal)
        rows += batch
        for i in hits[:4]:
            w = recheck(q, {name: int(cand[name][i]) for name in names})
            if w.reproduces:
                return SearchRun(rows, time.monotonic() - t0, seed, w)
        if time.monotonic() - t0 >= seconds:
            return SearchRun(rows, time.monotonic() - t0, seed)
