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

from dataclasses import dataclass
from enum import Enum
from fractions import Fraction

from ..formats import Rounding
from ..model.params import ModelParams
from .alignment import group_setting, worst_at
from .chain_mass import smallest_at
from .chain_regimes import ChainGroup, chain_groups, max_loss
from .nodes import up


class Lead(Enum):
    """Which term leads a group's case: the first group's any term, a product, the
    incoming accumulator, or none counted (the absolute case at or below e_zero)."""

    FIRST = "first"
    PRODUCT = "product"
    ACCUMULATOR = "accumulator"
    ABSOLUTE = "absolute"


@dataclass(frozen=True)
class State:
    """(R, Gamma) after some groups: E_{<=j} <= R S_{<=j} + Gamma M."""

    R: Fraction
    Gamma: Fraction

    @property
    def total(self) -> Fraction:
        """R + Gamma: the normwise bound the state gives once S_{<=J} = M."""
        return self.R + self.Gamma


@dataclass(frozen=True)
class Case:
    """One case of a group in the induction: the term that leads at the group's exponent
    E and the figures its step reads (module docstring). `absolute`: the largest loss at
    E over 2^e_min (every case's absolute alternative); `ratio`: lambda (FIRST),
    lambda_p (PRODUCT) or lambda_r (ACCUMULATOR); `cut`: X, the largest cut of an
    accumulator value at E, and `leader`: lead(E), the smallest leading product
    (PRODUCT)."""

    lead: Lead
    E: int | None
    absolute: Fraction
    ratio: Fraction = Fraction(0)
    cut: Fraction = Fraction(0)
    leader: Fraction = Fraction(0)

    @property
    def name(self) -> str:
        at = "at or below e_zero" if self.E is None else f"at E = {self.E}"
        return f"{self.lead.value} leads {at}"


@dataclass(frozen=True)
class Alternative:
    """One bound for a (state, case): its name, the inequality it states, and the state
    it leads to."""

    name: str
    states: str
    after: State


def alternatives(state: State, case: Case) -> list[Alternative]:
    """The bounds the module docstring proves for one group in `case`, from `state`."""
    R, G = state.R, state.Gamma
    out = [
        Alternative(
            "absolute", "E' <= E + loss(E), loss(E) <= Gamma 2^e_min", State(R, G + case.absolute)
        )
    ]
    if case.lead == Lead.FIRST:
        out.append(Alternative("exact loss ratio", "E_1 <= lambda(E) S_1", State(case.ratio, G)))
    elif case.lead == Lead.PRODUCT:
        lam, X, lead = case.ratio, case.cut, case.leader
        x = X / (1 + R)
        f = ((1 + 2 * R) * x + lam * lead) / (x + lead) if x + lead else lam
        out.append(
            Alternative(
                "loss paid by the mass carried",
                "E' <= R S + lambda_p P_j + min((1 + R) S, X) + 2 Gamma M, "
                "R' = max(R, lambda_p, f(lead))",
                State(max(R, lam, f), 2 * G),
            )
        )
        out.append(
            Alternative(
                "loss charged to the group's products",
                "E' <= R S + (lambda_p + X / lead) P_j + Gamma M (chain_mass.py)",
                State(max(R, lam + X / lead), G),
            )
        )
    elif case.lead == Lead.ACCUMULATOR:
        lam = case.ratio
        out.append(
            Alternative(
                "accumulator leads",
                "loss <= lambda_r (|r_{j-1}| + P_j): R' = R + lambda_r (1 + R)",
                State(R + lam * (1 + R), G * (1 + lam)),
            )
        )
    return out


def group_cases(p: ModelParams, group: ChainGroup) -> list[Case]:
    """The cases of one group of the chain (module docstring)."""
    g = group_setting(p, group.n_products, group.c_fmt, group.normal)
    slots, floor, m = g.slots, g.floor, g.m
    prod, cslot = slots[0], slots[1]
    scale = Fraction(2) ** (-p.out_fmt.spec.emin)
    out: list[Case] = []
    if floor is not None:
        out.append(Case(Lead.ABSOLUTE, None, m * Fraction(2) ** (floor - p.F) * scale))
    for E in g.exps:
        if floor is not None and E <= floor:
            continue
        ab = sum((s.count * max_loss(s, E, p.F) for s in slots), Fraction(0)) * scale
        if group.first:
            w = worst_at(slots, E, p.F, 0, 0)
            if w is not None:
                out.append(Case(Lead.FIRST, E, ab, ratio=w.ratio))
            continue
        wp = worst_at([prod], E, p.F, 0, 0)
        if wp is not None:
            out.append(
                Case(
                    Lead.PRODUCT,
                    E,
                    ab,
                    ratio=wp.ratio,
                    cut=max_loss(cslot, E, p.F),
                    leader=smallest_at(prod, E),
                )
            )
        wr = worst_at(slots, E, p.F, 0, 0, leaders=(1,))
        if wr is not None:
            out.append(Case(Lead.ACCUMULATOR, E, ab, ratio=wr.ratio))
    return out


def step(state: State, case: Case) -> Alternative:
    """The better alternative for one group in `case` (the smaller R' + Gamma')."""
    return min(alternatives(state, case), key=lambda a: a.after.total)


def _maximal(states: set[State]) -> set[State]:
    """The states no other state exceeds in both coordinates."""
    out: list[State] = []
    for s in sorted(states, key=lambda s: (-s.R, -s.Gamma)):
        if not any(o.R >= s.R and o.Gamma >= s.Gamma for o in out):
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
    states: set[State] = {State(Fraction(0), Fraction(0))}
    for group in chain:
        cases = group_cases(p, group)
        if not cases:
            return None
        nxt = set()
        for s in states:
            for c in cases:
                after = step(s, c).after
                R, G = after.R, after.Gamma
                # the group's rounding: u max(|s'|, 2^e_min) <= u (1 + R + Gamma) M
                nxt.add(State(up(R), up(G + u * (1 + R + G))))
        states = _maximal(nxt)
    return up(max(s.total for s in states))


__all__ = ["Alternative", "Case", "Lead", "State", "alternatives", "chain_induction_upper", "step"]
