"""A chained fused unit bounded by induction over its groups, the incoming accumulator's
loss paid by the mass it carries.

chain_mass.py charges the loss of the accumulator r_{j-1} in group j (at most the cut X of
an accumulator value at that group's exponent E) to the group's own products (at least
its smallest leader): X / lead(E). But r_{j-1} carries the previous groups' mass S_{<j}:
it can only lose what it holds, min(|r_{j-1}|, X), with |r_{j-1}| <= (1 + R) S_{<j}. So
the error over the leaves seen so far, S_{<=j} = |c| + P_1 + ... + P_j, is bounded by
induction. With E_{<j} <= R S_{<j} + Gamma M (Gamma: what is charged to the whole sum,
M >= 2^e_min):

- group 1 at E: E_1 <= lambda(E) S_1 (exact loss ratio, alignment.py), or the largest
  loss at E absolute (Gamma += loss(E) / 2^e_min);
- group j, a product leads at E (P_j >= lead(E)): E_{<=j} <= R S + lambda_p(E) P_j +
  min((1 + R) S, X) + 2 Gamma M (S = S_{<j}). Over S >= 0 and P_j >= lead the ratio of
  the first three terms to S + P_j is largest at S = X / (1 + R) with P_j = lead or
  P_j -> infinity, or as S -> infinity: R' = max(R, lambda_p, f(lead)) with
  f(P) = ((1 + 2R) X / (1 + R) + lambda_p P) / (X / (1 + R) + P) (a linear-fractional
  function of S on each piece, so its extremes are at the ends); or, as chain_mass.py,
  r's loss charged to the group's products: R' = max(R, lambda_p + X / lead), Gamma kept;
- group j, r_{j-1} leads at E: the loss <= lambda_r(E) (|r_{j-1}| + P_j), so
  R' = R + lambda_r (1 + R), Gamma' = Gamma (1 + lambda_r);
- any case: the largest loss at E, absolute (R' = R, Gamma' = Gamma + loss(E) / 2^e_min);
- each group's rounding: at most u max(|s'|, 2^e_min) <= u (1 + R + Gamma) M:
  Gamma += u (1 + R + Gamma).

The states (R, Gamma) are carried forward over every case of each group (the input picks
the case; each (state, case) takes the alternative with the smaller R' + Gamma'), keeping
the states no other state exceeds in both; U = the largest R + Gamma at the end (S_{<=J}
is M). Preconditions: chain_mass.chain_mass_upper's.
"""

from __future__ import annotations

from enum import Enum
from fractions import Fraction

from ..formats import Rounding
from ..model.params import ModelParams
from .alignment import _worst_at, group_setting
from .chain_mass import _smallest_at
from .chain_regimes import chain_groups, max_loss
from .nodes import up


class Lead(Enum):
    """Which term leads a group's case: the first group's any term, a product, the
    incoming accumulator, or none counted (the absolute case at or below e_zero)."""

    FIRST = "first"
    PRODUCT = "product"
    ACCUMULATOR = "accumulator"
    ABSOLUTE = "absolute"


State = tuple[Fraction, Fraction]
"""(R, Gamma) after some groups."""


def _cases(p: ModelParams, n: int, c_fmt, normal, first: bool) -> list[tuple]:
    """The cases of one group: (FIRST, lambda, abs), (PRODUCT, lambda_p, X, lead, abs),
    (ACCUMULATOR, lambda_r, abs) or (ABSOLUTE, abs), abs the largest loss at E over
    2^e_min."""
    g = group_setting(p, n, c_fmt, normal)
    slots, floor, m = g.slots, g.floor, g.m
    prod, cslot = slots[0], slots[1]
    scale = Fraction(2) ** (-p.out_fmt.spec.emin)
    out: list[tuple] = []
    if floor is not None:
        out.append((Lead.ABSOLUTE, m * Fraction(2) ** (floor - p.F) * scale))
    for E in g.exps:
        if floor is not None and E <= floor:
            continue
        ab = sum((s.count * max_loss(s, E, p.F) for s in slots), Fraction(0)) * scale
        if first:
            w = _worst_at(slots, E, p.F, 0, 0)
            if w is not None:
                out.append((Lead.FIRST, w.ratio, ab))
            continue
        wp = _worst_at([prod], E, p.F, 0, 0)
        if wp is not None:
            out.append((Lead.PRODUCT, wp.ratio, max_loss(cslot, E, p.F), _smallest_at(prod, E), ab))
        wr = _worst_at(slots, E, p.F, 0, 0, leaders=(1,))
        if wr is not None:
            out.append((Lead.ACCUMULATOR, wr.ratio, ab))
    return out


def _step(state: State, case: tuple) -> State:
    """The state after one group in `case` (module docstring), the better alternative."""
    R, G = state
    kind, *rest = case
    ab = rest[-1]
    alts = [(R, G + ab)]
    if kind == Lead.FIRST:
        alts.append((rest[0], G))
    elif kind == Lead.PRODUCT:
        lam, X, lead = rest[0], rest[1], rest[2]
        x = X / (1 + R)
        f = ((1 + 2 * R) * x + lam * lead) / (x + lead) if x + lead else lam
        alts.append((max(R, lam, f), 2 * G))
        # or r's loss charged to the group's own products, at least lead (chain_mass.py)
        alts.append((max(R, lam + X / lead), G))
    elif kind == Lead.ACCUMULATOR:
        lam = rest[0]
        alts.append((R + lam * (1 + R), G * (1 + lam)))
    return min(alts, key=lambda s: s[0] + s[1])


def _maximal(states: set[State]) -> set[State]:
    """The states no other state exceeds in both coordinates."""
    out: list[State] = []
    for s in sorted(states, key=lambda s: (-s[0], -s[1])):
        if not any(o[0] >= s[0] and o[1] >= s[1] for o in out):
            out.append(s)
    return set(out)


def chain_induction_upper(p: ModelParams, normal_of) -> Fraction | None:
    """U of a chained FDA instruction by induction over its groups (module docstring),
    None where the preconditions do not hold."""
    chain = chain_groups(p, normal_of)
    if chain is None:
        return None
    directed = p.rounding not in (Rounding.RNE, Rounding.RNA)
    u = Fraction(2 if directed else 1, 2**p.out_fmt.spec.precision)
    states: set[State] = {(Fraction(0), Fraction(0))}
    for n, c_fmt, normal, first, _ in chain:
        cases = _cases(p, n, c_fmt, normal, first=first)
        if not cases:
            return None
        nxt = set()
        for s in states:
            for c in cases:
                R, G = _step(s, c)
                nxt.add((up(R), up(G + u * (1 + R + G))))
        states = _maximal(nxt)
    return up(max(R + G for R, G in states))


__all__ = ["chain_induction_upper"]
