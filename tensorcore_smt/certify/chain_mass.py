"""A chained fused unit bounded by charging each loss to the mass it comes from.

The node algebra (compose.py) and its case-by-case refinement (chain_regimes.py) charge a
group's relative error to the sum of its terms, which includes the incoming accumulator
r_{j-1}, whose mass is the previous groups' terms again: with subnormal operands, where a
group's worst ratio needs a tiny product to set its exponent, the sum of every group's
worst ratio is charged, although a group only reaches its worst on its own products.

Here group j's error is split by whose mass pays for it (exact leaves are disjoint, so
sum_j alpha_j mass_j <= max_j alpha_j M):

- group 1 (c is an input, a leaf): its alignment loss <= lambda(E) (|c| + P_1), the exact
  loss ratio at its exponent E (alignment.py, without the rounding);
- group j >= 2, when a product leads at E: the products lose <= lambda_p(E) P_j (the
  ratio with the products alone, a product leading) and r_{j-1} loses <= loss_r(E), the
  largest cut of any accumulator value at E, which is <= (loss_r(E) / lead(E)) P_j, lead(E)
  the smallest product aligned at E: alpha_j = lambda_p(E) + loss_r(E) / lead(E);
- group j >= 2, when r_{j-1} leads at E: the loss <= lambda_r(E) (|r_{j-1}| + P_j) (the
  ratio with r leading): alpha_j = beta_j = lambda_r(E), beta charged to |r_{j-1}|;
- any case, instead: the largest loss at E, absolute, over the class's M >= 2^e_min
  (gamma_j = loss(E) / 2^e_min);
- every group's rounding: at most u max(|s'|, 2^e_min) <= u (M + errors so far).

So |d - e| <= T M + (sum_j (beta_j + u)) T M with T = max_j alpha_j + sum_j (beta_j +
gamma_j + u) (|r_{j-1}| and |s'_j| are at most M plus the errors so far), each group in
whichever case its input is, with an alternative chosen per case beforehand. For a
threshold A, every case takes, among its alternatives with alpha <= A, the one with the
smallest beta + gamma (w); then T <= A + sum_j max over group j's cases of (w + u), and U
is the smallest T (1 + growth) over the thresholds A that occur.

Preconditions: chain_regimes.chain_upper's (FDA, truncation, c fused, no flushing, no
unpacking).
"""

from __future__ import annotations

from fractions import Fraction

from ..formats import Rounding
from ..model.params import ModelParams
from .alignment import Slot, group_setting, worst_at
from .chain_regimes import chain_groups, max_loss
from .nodes import up

Alt = tuple[Fraction, Fraction, Fraction]
"""(alpha, beta, gamma): one alternative bound of a case."""


def smallest_at(s: Slot, E: int) -> Fraction | None:
    """The smallest value of a term of slot `s` aligned at exactly E."""
    vals = [x.lo * Fraction(2) ** x.lsb for x in s.entries if x.e == E]
    return min(vals) if vals else None


def group_mass_cases(
    p: ModelParams, n_products: int, c_fmt, normal, first: bool
) -> list[list[Alt]]:
    """The cases of one group (module docstring), each a list of alternatives."""
    g = group_setting(p, n_products, c_fmt, normal)
    slots, floor, m = g.slots, g.floor, g.m
    prod, cslot = slots[0], slots[1]
    scale = Fraction(2) ** (-p.out_fmt.spec.emin)
    cases: list[list[Alt]] = []
    if floor is not None:
        cases.append([(Fraction(0), Fraction(0), m * Fraction(2) ** (floor - p.F) * scale)])
    for E in g.exps:
        if floor is not None and E <= floor:
            continue
        loss = sum((s.count * max_loss(s, E, p.F) for s in slots), Fraction(0))
        absolute = (Fraction(0), Fraction(0), loss * scale)
        if first:
            w = worst_at(slots, E, p.F, 0, 0)
            if w is not None:
                cases.append([(w.ratio, Fraction(0), Fraction(0)), absolute])
            continue
        wp = worst_at([prod], E, p.F, 0, 0)
        if wp is not None:
            lead = smallest_at(prod, E)
            alpha = wp.ratio + max_loss(cslot, E, p.F) / lead
            cases.append([(alpha, Fraction(0), Fraction(0)), absolute])
        wr = worst_at(slots, E, p.F, 0, 0, leaders=(1,))
        if wr is not None:
            cases.append([(wr.ratio, wr.ratio, Fraction(0)), absolute])
    return cases


def chain_mass_upper(p: ModelParams, normal_of) -> Fraction | None:
    """U of a chained FDA instruction by mass (module docstring), None where the
    preconditions do not hold."""
    chain = chain_groups(p, normal_of)
    if chain is None:
        return None
    directed = p.rounding not in (Rounding.RNE, Rounding.RNA)
    u = Fraction(2 if directed else 1, 2**p.out_fmt.spec.precision)
    per_group = []
    for g in chain:
        cases = group_mass_cases(p, g.n_products, g.c_fmt, g.normal, first=g.first)
        if not cases:
            return None
        per_group.append(cases)
    # every alternative with alpha <= A is allowed; a case takes the allowed one with the
    # smallest beta + gamma; T(A) = A + sum over groups of the worst case's w; the best A
    # among the alphas that occur
    best = None
    alphas = sorted({a for cases in per_group for c in cases for a, _, _ in c})
    # thresholds: the largest alphas and a spread of the rest (any threshold is sound)
    picks = set(alphas[-48:]) | set(alphas[:: max(1, len(alphas) // 48)])
    for A in sorted(picks):
        T = A
        growth = Fraction(0)
        for cases in per_group:
            ws, bs = [], []
            for c in cases:
                allowed = [x for x in c if x[0] <= A]
                if not allowed:
                    break
                x = min(allowed, key=lambda x: x[1] + x[2])
                ws.append(x[1] + x[2] + u)
                bs.append(x[1] + u)
            else:
                T += max(ws)
                growth += max(bs)
                continue
            T = None
            break
        if T is not None:
            U = up(T * (1 + growth))
            best = U if best is None or U < best else best
    return best


__all__ = ["chain_mass_upper", "group_mass_cases", "smallest_at"]
