"""A chained fused unit bounded case by case: the worst case of each group, not the sum of
the worst cases of every regime of each group.

compose.instruction composes a chain of fused groups with one (delta, b) per group: delta
for the relative error, b for everything absolute (a subnormal running sum, a leader so
small that its loss only counts against the class's smallest sum 2^e_min). A single pair
must cover every input at once, so it adds b to delta although no input is in both
situations: on Ampere's tf32 chain (two groups of four) that charges about six grid units
of 2^-24 that no input reaches.

Here each group's inputs are split into *cases*, each with *alternatives* (delta, b), every
alternative a valid bound for every input of its case:

- E, the group's largest exponent (alignment.py), and whether the rounded sum s' is a
  normal number (a non-root group's subnormal s' is rounded with an absolute error of at
  most u 2^e_min, a normal one with u |s'|; the root's rounding is at most
  u max(|s'|, 2^e_min) <= u (M + sum e_i), relative to the class's sum M >= 2^e_min);
- for a case (E, normal s'): (delta_E, 0), delta_E the exact loss ratio at E with the
  rounding (alignment.py), or (u, loss_E), loss_E the largest total loss any terms can
  have at E (absolute);
- for (E, subnormal s'): (lambda_E, u 2^e_min), lambda_E the loss ratio without the
  rounding, or (0, loss_E + u 2^e_min).

The chain's error on one input is then bounded by composing (compose.Composed.node) one
alternative of its case per group, and U = max over the combinations of cases of the
smallest composition over their alternatives. Cases whose every alternative is dominated
are dropped first (a case X goes when another case Y has, for each of Y's alternatives,
one of X's below it: X's bound is then never the larger). E at or below e_zero (a zero
term may raise E there) is one case whose loss is at most m 2^(e_zero - F).

Preconditions: compose.preconditions, an FDA unit that truncates in the alignment, c in
the first group, no flushing of sums or outputs.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

from ..formats import Format
from ..model.params import Algorithm, CAddend, ModelParams
from ..model.terms import AlignMode
from .alignment import Slot, group_setting, rounded_ratio
from .nodes import LEAF, NodeBound, up


class Alt(NamedTuple):
    """One alternative (N) bound of a case: |r - sum v_i| <= delta sum |v_i| + b."""

    delta: Fraction
    b: Fraction


@dataclass
class RegimeCase:
    """One case of a group's inputs (module docstring): its name, the condition that
    puts an input in it, and its alternatives, each a valid bound for every input of
    the case."""

    name: str
    condition: str
    alternatives: list[Alt]


@dataclass(frozen=True)
class ChainGroup:
    """One group of a chain as the case analyses read it: its products, the format of
    its c (the input C's for the first group, d's for the accumulator after it), which
    operand groups the class keeps normal there, and its place in the chain."""

    n_products: int
    c_fmt: Format
    normal: tuple[tuple[str, bool], ...]
    first: bool
    last: bool


def max_loss(s: Slot, E: int, F: int) -> Fraction:
    """The largest loss of one term of slot `s` (aligned at an exponent <= E) against
    the grid 2^(E - F): the largest N mod 2^k over an entry's range, times 2^lsb (an
    entry wholly below the grid loses its largest term, N_hi 2^lsb)."""
    best: tuple[int, int] | None = None  # (r, lsb): r 2^lsb
    for x in s.entries:
        if x.e > E:
            continue
        k = E - F - x.lsb
        if k <= 0:
            continue
        step = 1 << k
        if x.hi < step:
            r = x.hi
        elif x.hi - x.lo + 1 >= step or x.hi % step < x.lo % step:
            r = step - 1
        else:
            r = x.hi % step
        if best is None or _gt(r, x.lsb, *best):
            best = (r, x.lsb)
    return Fraction(0) if best is None else best[0] * Fraction(2) ** best[1]


def _gt(r1: int, e1: int, r2: int, e2: int) -> bool:
    """r1 2^e1 > r2 2^e2 for nonnegative integers r1, r2."""
    if e1 >= e2:
        return (r1 << (e1 - e2)) > r2
    return r1 > (r2 << (e2 - e1))


def group_cases(
    p: ModelParams,
    n_products: int,
    c_fmt,
    normal: tuple[tuple[str, bool], ...],
    root: bool,
) -> list[RegimeCase]:
    """The cases of one group of the chain, each with its alternatives (delta, b)."""
    g = group_setting(p, n_products, c_fmt, normal)
    slots, u, m, floor, directed = g.slots, g.u, g.m, g.floor, g.directed
    out = p.out_fmt.spec
    sub = u * Fraction(2) ** out.emin
    cases: list[RegimeCase] = []

    ulp_sub = Fraction(2) ** (out.emin - out.mbits)  # the output's subnormal spacing

    def add(E: int, ratio: Fraction, align: Fraction, loss: Fraction) -> None:
        G = Fraction(2) ** (E - p.F)
        # a directed rounding of s' (a multiple of G) loses a multiple of G below one
        # ulp: with G <= u 2^e_min <= ulp(s'), loss + rounding <= loss - G + u max(|s'|, 2^e_min)
        folded = loss - G if directed and G <= sub else loss
        cases.append(
            RegimeCase(
                f"E = {E}, s' normal",
                f"the group's largest exponent is {E} and its rounded sum is normal",
                [Alt(ratio, Fraction(0)), Alt(u, max(folded, Fraction(0)))],
            )
        )
        if not root:
            # a subnormal s' (a multiple of G) rounded onto the spacing 2^(e_min - mbits)
            if G >= ulp_sub:
                r_sub = Fraction(0)
            else:
                r_sub = ulp_sub - G if directed else ulp_sub / 2
            cases.append(
                RegimeCase(
                    f"E = {E}, s' subnormal",
                    f"the group's largest exponent is {E} and its rounded sum is subnormal",
                    [Alt(align, r_sub), Alt(Fraction(0), loss + r_sub)],
                )
            )

    if floor is not None:
        loss = m * Fraction(2) ** (floor - p.F)
        below = f"the group's largest exponent is at or below e_zero = {floor}"
        cases.append(RegimeCase("E <= e_zero, s' normal", below, [Alt(u, loss)]))
        if not root:
            cases.append(
                RegimeCase("E <= e_zero, s' subnormal", below, [Alt(Fraction(0), loss + sub)])
            )
    for E in g.exps:
        if floor is not None and E <= floor:
            continue
        w, ratio = rounded_ratio(g, E, p.F)
        if w is None:
            continue
        loss = sum((s.count * max_loss(s, E, p.F) for s in slots), Fraction(0))
        add(E, ratio, w.ratio, loss)
    return cases


def _below(x: Alt, y: Alt) -> bool:
    return x[0] <= y[0] and x[1] <= y[1]


def prune(cases: list[RegimeCase]) -> list[RegimeCase]:
    """The cases that are not dominated by another (module docstring)."""

    def key(c: RegimeCase) -> tuple[Fraction, Fraction]:
        return (max(a.delta for a in c.alternatives), max(a.b for a in c.alternatives))

    def dominated(x: RegimeCase, y: RegimeCase) -> bool:
        """Every alternative of y lies above one of x's: x's bound is never the larger."""
        return all(any(_below(a, b) for a in x.alternatives) for b in y.alternatives)

    kept: list[RegimeCase] = []
    for c in sorted(cases, key=key, reverse=True):
        if any(dominated(c, k) for k in kept):
            continue
        kept = [k for k in kept if not dominated(k, c)]
        kept.append(c)
    return kept


def chain_groups(p: ModelParams, normal_of) -> list[ChainGroup] | None:
    """The groups of a chain (ChainGroup), or None where
    the chain bounds do not apply (not FDA, one group, alignment other than truncation, c added
    after the chain, flushed sums or outputs, unpacked operands)."""
    groups = p.groups()
    if p.algorithm != Algorithm.FDA:
        return None
    if len(groups) < 2 or p.align != AlignMode.TRUNCATE or p.c_add != CAddend.FUSED:
        return None
    if p.flush_sums or p.flush_outputs or p.unpack is not None:
        return None
    out = []
    for i, (lo, hi) in enumerate(groups):
        normal = (
            ("a", normal_of("a", p.a_fmt)),
            ("b", normal_of("b", p.b_fmt)),
            ("c", i == 0 and normal_of("c", p.c_fmt)),
        )
        c_fmt = p.c_fmt if i == 0 else p.d_fmt
        out.append(ChainGroup(hi - lo, c_fmt, normal, i == 0, i == len(groups) - 1))
    return out


def chain_upper(p: ModelParams, constraints, normal_of, cap: Fraction) -> Fraction | None:
    """U of the normwise error of a chained FDA instruction by cases (module docstring),
    or None where the preconditions do not hold or it does not come below `cap` (the
    bound already proved). `normal_of(op, fmt)`: whether the class keeps the operand
    group's values normal. An alternative whose absolute part alone reaches `cap` is
    dropped first (a case then has fewer alternatives: its bound can only grow, so it
    stays sound), which lets most cases collapse into the ones that dominate them."""
    chain = chain_groups(p, normal_of)
    if chain is None:
        return None
    scale = Fraction(2) ** (-p.d_fmt.spec.emin)
    per_group = []
    for g in chain:
        cases = group_cases(p, g.n_products, g.c_fmt, g.normal, root=g.last)
        for c in cases:
            c.alternatives = [a for a in c.alternatives if a.b * scale < cap]
        if any(not c.alternatives for c in cases):
            return None
        per_group.append(prune(cases))
    sizes = [g.n_products for g in chain]
    e_min = p.d_fmt.spec.emin
    worst = Fraction(0)
    for combo in itertools.product(*per_group):
        best = None
        for alts in itertools.product(*(c.alternatives for c in combo)):
            cb = LEAF
            for (delta, b), n in zip(alts, sizes):
                cb = LEAF.node([cb] + [LEAF] * n, NodeBound(up(delta), up(b)))
            U = cb.normwise(e_min)
            if best is None or U < best:
                best = U
        worst = max(worst, best)
    return worst


__all__ = [
    "Alt",
    "ChainGroup",
    "RegimeCase",
    "chain_groups",
    "chain_upper",
    "group_cases",
    "max_loss",
    "prune",
]
