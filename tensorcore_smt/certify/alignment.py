"""The alignment loss of one fused group, bounded exactly over the terms a unit can see.

compose.fda_group bounds the loss of the FDA alignment (every term cut to the grid
G = 2^(E - F) below the largest exponent E) by "m terms, each below one step, against a
largest term of at least rho 2^E". With subnormal operands rho is as small as
2^-(mbits_a + mbits_b), and that bound is far above what a unit can reach: a term can
only lose bits that lie below the grid, and the terms whose exponents put bits there are
not the ones that make the largest term small. This module bounds the loss by the terms
themselves.

**Terms as data.** Every term the unit aligns is t = N 2^lsb with an alignment exponent
e (c: its exponent, e_min for a subnormal; a product: e_a + e_b unnormalised, or its
leading one's exponent when the unit normalises products). For each operand format the
values are a few *entries* (e, lsb, N_lo, N_hi): the integers N between N_lo and N_hi
(a superset of the significands, and of their products, at that exponent). Every bound
below is taken over these supersets, so it holds for the unit's real terms.

**The loss of one term** at a given E: with k = (E - F) - lsb, a term loses nothing when
k <= 0 and otherwise l(N) = (N mod 2^k) 2^lsb, the bits cut by truncation toward zero
(0 <= l <= t). Over N in [N_lo, N_hi], l(N) - lambda t (0 <= lambda < 1) grows inside a
block of 2^k and drops by lambda 2^k from one block to the next, so its largest value is
at the end of the first block, N_a = N_lo + ((2^k - 1 - N_lo) mod 2^k), or at N_hi when
N_hi < N_a: one candidate (l, t) per entry and E.

**The ratio.** For one E, the group is a leader at exactly E (c or a product; it cannot
be zero, and no other term may exceed E) and the other slots, each zero or one entry at
an exponent <= E. The normwise loss is r = (sum l) / (sum t); its largest value over the
candidates is found by Dinkelbach's iteration (lambda <- the ratio of the configuration
that maximises sum (l - lambda t); it ends, exactly, when that maximum is 0), which is
exact on a finite candidate set. Then the rounding of the cut sum s' (|s'| <= sum t, since
truncation never grows a term) into the output format of precision p adds at most
2^-p |s'| to nearest, and for a directed rounding (truncation) of a multiple of G a
multiple of G below one ulp: nothing when ulp(s') <= G, else at most ulp - G <=
2^(1-p) sum t - G. So per E

    delta_E = max((sum l) / (sum t), (sum l - G) / (sum t) + 2^(1-p))   (directed)
    delta_E = (sum l) / (sum t) + 2^-p                                    (to nearest)

each maximum again by Dinkelbach's iteration (the -G is a constant of the numerator).

**Small E.** Below a cut E_cut the whole group loses less than m G <= m 2^(E_cut - 1 - F)
to alignment, an absolute term b (with the rounding still relative). E_cut is chosen
to give the smallest U = delta + b 2^-e_min(out). A zero term raising E (e_zero) lies
below the cut or is a leader of value 0, which makes the ratio 1: such a group is refused.

The argument's preconditions are compose.py's: FDA with enough carry bits, truncation
(AlignMode.TRUNCATE), no flushing of inputs; the node's (delta, b) is then used by
compose.fda_group where it is the smaller of the two bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from ..formats import Format, Rounding
from ..model.params import ModelParams
from ..model.terms import ProductExponent


@dataclass(frozen=True, order=True)
class Entry:
    """Terms N 2^lsb with N_lo <= N <= N_hi, aligned at exponent e."""

    e: int
    lsb: int
    lo: int
    hi: int


def operand_entries(fmt: Format, unit: Format, subnormal: bool) -> tuple[Entry, ...]:
    """The values of `fmt` as the unit sees them in `unit` (its own or an exact wider
    unpacked format): normal values at each exponent, and subnormal ones where the class
    admits them (at e_min with a significand below 2^mbits when `unit` is `fmt`; normal
    numbers of `unit` when it is wider)."""
    s, u = fmt.spec, unit.spec
    mu = u.mbits
    out = [Entry(e, e - mu, 1 << mu, (2 << mu) - 1) for e in range(s.emin, s.emax + 1)]
    if subnormal and s.mbits:
        if unit == fmt:
            out[0] = Entry(s.emin, s.emin - mu, 1, (2 << mu) - 1)
        else:
            for e in range(s.emin - s.mbits, s.emin):
                if e >= u.emin:
                    out.append(Entry(e, e - mu, 1 << mu, (2 << mu) - 1))
                else:  # subnormal in the unit's format too
                    out.append(Entry(u.emin, u.emin - mu, 1, (2 << mu) - 1))
    return tuple(sorted(set(out), key=lambda x: (x.e, x.lsb)))


def product_entries(
    a: tuple[Entry, ...], b: tuple[Entry, ...], mode: ProductExponent
) -> tuple[Entry, ...]:
    """The exact products of two operand entry sets, merged by (e, lsb) into hulls."""
    hull: dict[tuple[int, int], tuple[int, int]] = {}
    for x in a:
        for y in b:
            lo, hi, lsb = x.lo * y.lo, x.hi * y.hi, x.lsb + y.lsb
            if mode == ProductExponent.UNNORMALIZED:
                parts = [(x.e + y.e, lo, hi)]
            else:  # the leading one's exponent: one entry per bit length of N
                parts = []
                for j in range(lo.bit_length(), hi.bit_length() + 1):
                    parts.append((lsb + j - 1, max(lo, 1 << (j - 1)), min(hi, (1 << j) - 1)))
            for e, nlo, nhi in parts:
                key = (e, lsb)
                old = hull.get(key)
                hull[key] = (nlo, nhi) if old is None else (min(old[0], nlo), max(old[1], nhi))
    return tuple(sorted(Entry(e, lsb, lo, hi) for (e, lsb), (lo, hi) in hull.items()))


@dataclass(frozen=True)
class Slot:
    """One kind of term of a group: its entries and how many terms are of this kind."""

    entries: tuple[Entry, ...]
    count: int


def candidate(x: Entry, grid: int) -> tuple[int, int, int]:
    """(N, l, t) of the entry's worst term against the grid 2^grid, l and t in units of
    2^x.lsb (see the module docstring)."""
    k = grid - x.lsb
    if k <= 0:
        return x.lo, 0, x.lo
    step = 1 << k
    n = x.lo + ((step - 1 - x.lo) % step)
    if n > x.hi:
        n = x.hi
    return n, n % step, n


@dataclass
class Worst:
    """The configuration of largest ratio at one E: the ratio, E, and per slot the chosen
    (entry, N) list (the leader first)."""

    ratio: Fraction
    E: int
    leader: tuple[int, Entry, int] | None = None  # (slot index, entry, N)
    others: list[tuple[int, Entry, int]] | None = None


def worst_at(
    slots: list[Slot],
    E: int,
    F: int,
    const: int,
    shift: int,
    leaders: tuple[int, ...] | None = None,
) -> Worst | None:
    """Dinkelbach's iteration for max (sum l + const 2^shift) / (sum t) with a leader at
    exactly E (None when no slot has a term at E); `leaders`: the slots the leader may
    come from (None: any)."""
    grid = E - F
    # the candidates: per slot, (l, t, entry, N) as integers in units of 2^base
    base = min(min(x.lsb for s in slots for x in s.entries), shift)
    lead: list[tuple[int, int, int, Entry, int]] = []
    opt: list[list[tuple[int, int, Entry, int]]] = []
    for i, s in enumerate(slots):
        cands = []
        deep = None  # the largest term that lies wholly below the grid (it loses itself)
        for x in s.entries:
            if x.e > E:
                continue
            k = grid - x.lsb
            scale = x.lsb - base
            if x.e == E and (leaders is None or i in leaders):
                n, loss, t = candidate(x, grid)
                lead.append((i, loss << scale, t << scale, x, n))
            if k <= 0:
                continue  # loses nothing: never better than a zero term
            if x.hi.bit_length() <= k:
                t = x.hi << scale
                if deep is None or t > deep[1]:
                    deep = (t, t, x, x.hi)
                continue
            n, loss, t = candidate(x, grid)
            cands.append((loss << scale, t << scale, x, n))
        if deep is not None:
            cands.append(deep)
        opt.append(cands)
    if not lead:
        return None
    c0 = const << (shift - base) if const >= 0 else -((-const) << (shift - base))
    lam = Fraction(0)
    best: Worst | None = None
    for _ in range(64):
        p, q = lam.numerator, lam.denominator
        top = None
        picks = [max(o, key=lambda c: q * c[0] - p * c[1], default=None) for o in opt]
        for i, ll, tt, x, n in lead:
            score = q * ll - p * tt
            num, den = ll, tt
            chosen = []
            for j, s in enumerate(slots):
                count = s.count - (1 if j == i else 0)
                if count <= 0:
                    continue
                pick = picks[j]
                if pick is None or q * pick[0] - p * pick[1] <= 0:
                    continue
                score += count * (q * pick[0] - p * pick[1])
                num += count * pick[0]
                den += count * pick[1]
                chosen += [(j, pick[2], pick[3])] * count
            if top is None or score > top[0]:
                top = (score, num, den, (i, x, n), chosen)
        score, num, den, leader, chosen = top
        new = Fraction(num + c0, den) if den else Fraction(0)
        best = Worst(max(new, Fraction(0)), E, leader, chosen)
        if score + q * c0 <= 0 or new <= lam:
            return best
        lam = new
    return best


def group_slots(p: ModelParams, n_products: int, c_fmt: Format | None, normal: dict[str, bool]):
    """The slots of one fused group: c (None: no c in the group) and its products;
    `normal[op]` says whether the class keeps operand group op's values normal."""
    af = p.unpack or p.a_fmt
    bf = p.unpack or p.b_fmt
    a = operand_entries(p.a_fmt, af, not normal["a"])
    b = operand_entries(p.b_fmt, bf, not normal["b"])
    slots = [Slot(product_entries(a, b, p.product_exponent), n_products)]
    if c_fmt is not None:
        slots.append(Slot(operand_entries(c_fmt, c_fmt, not normal["c"]), 1))
    return slots


@dataclass(frozen=True)
class GroupSetting:
    """What every bound of one fused group starts from: its slots, the exponents E its
    largest term can have, e_zero where a zero term can raise E (None where it cannot
    matter), the number m of terms, and the output rounding's u (directed: 2^(1-p))."""

    slots: list
    exps: list[int]
    floor: int | None
    m: int
    u: Fraction
    directed: bool


def group_setting(p: ModelParams, n_products: int, c_fmt: Format | None, normal) -> GroupSetting:
    """The setting of one group (`normal`: operand group -> kept normal by the class)."""
    slots = group_slots(p, n_products, c_fmt, dict(normal))
    directed = p.rounding not in (Rounding.RNE, Rounding.RNA)
    u = Fraction(2 if directed else 1, 2**p.out_fmt.spec.precision)
    exps = sorted({x.e for s in slots for x in s.entries})
    floor = p.e_zero
    if floor is not None and exps and exps[0] > floor:
        floor = None  # E = e_zero only when every term is zero: nothing is lost
    return GroupSetting(slots, exps, floor, sum(s.count for s in slots), u, directed)


def rounded_ratio(g: GroupSetting, E: int, F: int) -> tuple[Worst | None, Fraction]:
    """The worst configuration at E (alignment only) and its ratio with the output
    rounding added (module docstring: a directed rounding of a multiple of the grid)."""
    w = worst_at(g.slots, E, F, 0, 0)
    if w is None:
        return None, Fraction(0)
    r = w.ratio + (0 if g.directed else g.u)
    if g.directed:
        w2 = worst_at(g.slots, E, F, -1, E - F)
        if w2 is not None:
            r = max(r, w2.ratio + g.u)
    return w, r


def _largest(s: Slot, E: int) -> Fraction:
    """The largest value of a term of slot `s` aligned at an exponent <= E (0: none)."""
    return max((x.hi * Fraction(2) ** x.lsb for x in s.entries if x.e <= E), default=Fraction(0))


@dataclass(frozen=True)
class AlignedBound:
    """(N) for one group from the exact loss ratios: delta relative, b absolute, with the
    E of the worst configuration and the cut below which losses count as b."""

    delta: Fraction
    b: Fraction
    E_worst: int | None
    E_cut: int


def worst_configs(
    p: ModelParams,
    n_products: int,
    c_fmt: Format | None,
    normal: tuple[tuple[str, bool], ...],
    top: int = 6,
) -> list[Worst]:
    """The configurations of largest loss ratio at the `top` E's where it is largest
    (for both objectives of a directed rounding): the shapes witnesses are built from."""
    slots = group_slots(p, n_products, c_fmt, dict(normal))
    found: list[Worst] = []
    for E in sorted({x.e for s in slots for x in s.entries}):
        for const, shift in ((0, 0), (-1, E - p.F)):
            w = worst_at(slots, E, p.F, const, shift)
            if w is not None and w.ratio > 0:
                found.append(w)
    found.sort(key=lambda w: w.ratio, reverse=True)
    return found[:top]


@lru_cache(maxsize=256)
def group_bound(
    p: ModelParams,
    n_products: int,
    c_fmt: Format | None,
    normal: tuple[tuple[str, bool], ...],
    whole: bool = False,
) -> AlignedBound:
    """The (delta, b) of one fused group (module docstring) over the class whose
    normal operands `normal` names, E_cut chosen for the smallest delta + b 2^-e_min.
    `whole`: the group's terms are all the exact terms of the computation and its result
    is the computation's (one group, c fused), so the class's M >= 2^e_min(out) holds for
    the group's own sum: an E whose terms cannot reach it is left out, and at any E the
    loss ratio is at most (m 2^(E - F)) / 2^e_min(out) + u."""
    g = group_setting(p, n_products, c_fmt, normal)
    slots, u, m, floor = g.slots, g.u, g.m, g.floor
    out = p.out_fmt.spec
    m_min = Fraction(2) ** out.emin
    per_e: list[tuple[int, Fraction]] = []
    for E in g.exps:
        if whole and sum(s.count * _largest(s, E) for s in slots) < m_min:
            continue  # every sum at this E underflows: outside the class
        w, r = rounded_ratio(g, E, p.F)
        if w is None:
            continue
        if whole:
            r = min(r, u + m * Fraction(2) ** (E - p.F) / m_min)
        per_e.append((E, r))
    # suffix maxima: delta over E >= E_cut; a group whose E is below the cut (the next
    # lower E it can have, or e_zero) loses less than m grid steps there: absolute
    best: AlignedBound | None = None
    running = u
    worst_e = None
    for i in range(len(per_e) - 1, -1, -1):
        E, r = per_e[i]
        if r > running:
            running, worst_e = r, E
        if floor is not None and E <= floor:
            break
        below = per_e[i - 1][0] if i else None
        if floor is not None:
            below = floor if below is None else max(below, floor)
        b = Fraction(0) if below is None else m * Fraction(2) ** (below - p.F)
        cand = AlignedBound(running, b, worst_e, E)
        if best is None or cand.delta + cand.b * Fraction(2) ** (-out.emin) < (
            best.delta + best.b * Fraction(2) ** (-out.emin)
        ):
            best = cand
    return best or AlignedBound(u, Fraction(0), None, 0)


__all__ = [
    "AlignedBound",
    "GroupSetting",
    "Entry",
    "Slot",
    "Worst",
    "candidate",
    "worst_at",
    "worst_configs",
    "group_bound",
    "group_setting",
    "rounded_ratio",
    "group_slots",
    "operand_entries",
    "product_entries",
]
