"""Rows shaped like the worst case of CDNA3's composed bound (compose_cdna3.py), for the
structured search of extremal.py.

FDRDA aligns the products to their own largest exponent e and only then adds c, floored
to the grid G = 2^(e - F) of the dot product. The worst case is therefore not c at the
top (as for FDA) but a product: the top product a b = R(e) (2^e, or far less with a
subnormal factor), the other products of one sign just below G (truncated to nothing)
or just below 2 G (truncated to G), and c either just below G or a tiny negative value,
which the floor turns into -G: every step errs downward. The number k of products kept
at G is varied so that the final round to nearest meets a tie it resolves downward (one
more step). With a subnormal top product (the default class) the exponent e is the one
where compose_cdna3.group_alpha finds its maximum: with fp16 factors c = -2^-149 and
a0 = b0 = 2^-24 give a normwise error of 1/16. GFDRDA: the losing products in the top's
half (even indices), one product just below G heading the other half, whose sum the
floor to G then loses.
"""

from __future__ import annotations

from fractions import Fraction

from ..formats import Format, round_fraction
from ..inputs.implications import product_rho_bits
from ..model.params import Algorithm
from ..smt.query import Query
from .compose_cdna3 import group_alpha, smallest_products, unit_formats


def _bits(fmt: Format, v: Fraction) -> int:
    return round_fraction(v, fmt)


def _below_two(af: Format, bf: Format) -> tuple[Fraction, Fraction]:
    """Significands (sa, sb) of a and b, each in [1, 2), whose product is the largest one
    below 2."""
    ma, mb = af.spec.mbits, bf.spec.mbits
    limit = 1 << (ma + mb + 1)
    best = (0, 1 << ma, 1 << mb)
    for A in range(1 << ma, 1 << (ma + 1)):
        B = min((limit - 1) // A, (1 << (mb + 1)) - 1)
        if B >= 1 << mb and A * B > best[0]:
            best = (A * B, A, B)
    return Fraction(best[1], 1 << ma), Fraction(best[2], 1 << mb)


def _split(t: int, af: Format, bf: Format) -> tuple[int, int] | None:
    """Normal exponents (ea, eb) of a and b with ea + eb = t, or None."""
    sa, sb = af.spec, bf.spec
    ea = max(sa.emin, min(sa.emax, t - t // 2))
    eb = t - ea
    if not sb.emin <= eb <= sb.emax:
        eb = max(sb.emin, min(sb.emax, eb))
        ea = t - eb
    if sa.emin <= ea <= sa.emax and sb.emin <= eb <= sb.emax:
        return ea, eb
    return None


def _top(p, e: int, rho: tuple[int, int]) -> tuple[Fraction, Fraction] | None:
    """(a, b): the smallest product R(e) of exponent e (compose_cdna3.smallest_products)."""
    af, bf = unit_formats(p)
    R = smallest_products(p, rho).get(e)
    if R is None:
        return None
    sa, sb = af.spec, bf.spec
    for ea in range(sa.emin, sa.emax + 1):
        eb = e - ea
        if not sb.emin <= eb <= sb.emax:
            continue
        for ma in (Fraction(1, 1 << sa.mbits), Fraction(1)) if ea == sa.emin else (Fraction(1),):
            for mb in (
                (Fraction(1, 1 << sb.mbits), Fraction(1)) if eb == sb.emin else (Fraction(1),)
            ):
                if ma * mb * Fraction(2) ** e == R:
                    return ma * Fraction(2) ** ea, mb * Fraction(2) ** eb
    return None


def fdrda_rows(q: Query, fixed: dict[str, int]) -> list[dict[str, int]]:
    """The worst-case rows of the module docstring (none for other algorithms); the
    caller keeps those in the class."""
    p = q.p
    if p.algorithm not in (Algorithm.FDRDA, Algorithm.GFDRDA):
        return []
    af, bf = unit_formats(p)
    cf = p.c_fmt
    n = min(p.L, p.K)
    gfdrda = p.algorithm == Algorithm.GFDRDA
    sa_, sb_ = _below_two(af, bf)
    rho = product_rho_bits(p, q.constraints, (af, bf))
    _, e_arg = group_alpha(p, n, cf, rho)
    tops = sorted(smallest_products(p, rho))
    es = {0, 4, tops[-1] - 1, tops[-1]} | ({e_arg} if e_arg is not None else set())
    cs = cf.spec
    rows = []
    for e in sorted(x for x in es if x in tops):
        top = _top(p, e, rho)
        if top is None:
            continue
        G = Fraction(2) ** (e - p.F)
        below = []  # (exponent of the product, what the truncation keeps)
        for t, keeps in ((e - p.F - 1, 0), (e - p.F, 1)):
            s = _split(t, af, bf)
            below.append(None if s is None else (s, keeps))
        slots = [k for k in range(1, n) if not gfdrda or k % 2 == 0]
        c_vals = [
            Fraction(0),
            -(Fraction(2) ** (cs.emin - cs.mbits)),  # floored to -G
            -(Fraction(2) ** cs.emin),
            (2 - Fraction(1, 1 << cs.mbits)) * G / 2,  # just below G
        ]
        for c in c_vals:
            for kept in range(len(slots) + 1):
                row = {name: 0 for name in (f"{x}{k}" for x in "ab" for k in range(p.K))}
                row["c"] = _bits(cf, c)
                row["a0"], row["b0"] = _bits(af, top[0]), _bits(bf, top[1])
                for i, k in enumerate(slots):
                    choice = below[1] if i < kept else below[0]
                    if choice is None:
                        continue
                    (ea, eb), _ = choice
                    row[f"a{k}"] = _bits(af, sa_ * Fraction(2) ** ea)
                    row[f"b{k}"] = _bits(bf, sb_ * Fraction(2) ** eb)
                if gfdrda and n > 1 and below[0] is not None:
                    (ea, eb), _ = below[0]  # heads the other half: its sum floored away
                    row["a1"] = _bits(af, sa_ * Fraction(2) ** ea)
                    row["b1"] = _bits(bf, sb_ * Fraction(2) ** eb)
                row.update(fixed)
                rows.append(row)
    return rows


__all__ = ["fdrda_rows"]
