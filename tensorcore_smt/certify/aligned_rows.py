"""Witness rows shaped like the worst configurations of the exact alignment-loss bound
(alignment.py): the leader term at E, every other term at the entry and significand the
bound chose, realised as operand bits and measured exactly like any other row.

The bound works on supersets (the integers between the smallest and largest product of
significands); a product slot's chosen N is realised by the significand pair (s_a, s_b)
of the entry's exponents whose product scores best against the bound's ratio, so the
row may fall a little short of the bound: that gap is what the report's U/L shows.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..formats import Format, round_fraction, value_of
from ..model.params import Algorithm, ModelParams
from ..model.sparse import dense_params
from ..model.terms import AlignMode, ProductExponent
from ..smt.query import Query
from .alignment import Entry, Worst, operand_entries, worst_configs


def _exact_bits(v: Fraction, fmt: Format) -> int | None:
    """The bits of v in `fmt` when v is representable there exactly, else None."""
    bits = round_fraction(v, fmt)
    return bits if value_of(bits, fmt) == v else None


def _pairs(p: ModelParams, x: Entry, grid: int, lam: Fraction, normal: dict[str, bool]):
    """The best (a, b) input bits for a product term of entry `x` against the grid
    2^grid and ratio `lam`: the significand pair maximising l - lam t."""
    af, bf = p.unpack or p.a_fmt, p.unpack or p.b_fmt
    ea_set = operand_entries(p.a_fmt, af, not normal["a"])
    eb_set = operand_entries(p.b_fmt, bf, not normal["b"])
    k = grid - x.lsb
    best = None
    for ya in ea_set:
        for yb in eb_set:
            if ya.lsb + yb.lsb != x.lsb:
                continue
            e = ya.e + yb.e
            if p.product_exponent == ProductExponent.UNNORMALIZED and e != x.e:
                continue
            sa = np.arange(ya.lo, ya.hi + 1, dtype=np.int64)
            for target in {x.lo, x.hi, max(x.lo, min(x.hi, (1 << max(k, 0)) - 1))} | (
                {x.lo + ((1 << k) - 1 - x.lo) % (1 << k)} if k > 0 else set()
            ):
                for sb in (target // sa, -(-target // sa)):
                    ok = (sb >= yb.lo) & (sb <= yb.hi)
                    n = sa * sb
                    if p.product_exponent == ProductExponent.NORMALIZED:
                        ok &= np.array([int(v).bit_length() for v in n]) + x.lsb - 1 == x.e
                    if not ok.any():
                        continue
                    loss = n % (1 << k) if 0 < k < 62 else (n if k >= 62 else 0 * n)
                    score = loss - float(lam) * n
                    score = np.where(ok, score, -np.inf)
                    i = int(np.argmax(score))
                    if best is None or score[i] > best[0]:
                        best = (score[i], int(sa[i]), int(sb[i]), ya, yb)
    if best is None:
        return None
    _, sa_, sb_, ya, yb = best
    a = _exact_bits(Fraction(sa_) * Fraction(2) ** ya.lsb, p.a_fmt)
    b = _exact_bits(Fraction(sb_) * Fraction(2) ** yb.lsb, p.b_fmt)
    return None if a is None or b is None else (a, b)


def _neg(bits: int, fmt: Format) -> int:
    return bits ^ (1 << (fmt.spec.storage - 1))


def unit_groups(q: Query) -> tuple[ModelParams, list[list[int]]]:
    """The dense unit X runs (model/sparse.dense_params) and its fused groups in the
    unit's order, each as the positions k of its products (a sparse query's positions
    that the metadata leaves out dropped)."""
    unit = dense_params(q.p)
    pos_of = {j: k for k, j in q.unit_index().items()}
    order = unit.k_order()
    return unit, [[pos_of[j] for j in order[lo:hi] if j in pos_of] for lo, hi in unit.groups()]


def aligned_rows(q: Query, fixed: dict[str, int], normal: dict[str, bool]) -> list[dict]:
    """Rows of the worst configurations of the first fused group's exact loss bound,
    with all terms of one sign (both signs), for FDA units that truncate; [] otherwise."""
    p = q.p
    if p.algorithm != Algorithm.FDA or p.align != AlignMode.TRUNCATE:
        return []
    unit, groups = unit_groups(q)
    order = groups[0]
    norm = tuple(normal.items())
    rows = []
    shapes = []
    for w in worst_configs(unit, len(order), p.c_fmt, norm):
        row = _realise(q, w, order, normal)
        if row is None:
            continue
        shapes.append(row)
        chained = _repeat_in_later_groups(groups, row, order)
        if chained is not None:
            shapes.append(chained)
    for row in shapes:
        for negative in (False, True):
            r = dict(row)
            if negative:
                r = {
                    k: (_neg(v, p.a_fmt) if k.startswith("a") else v)
                    if k != "c"
                    else _neg(v, p.c_fmt)
                    for k, v in r.items()
                }
            r.update(fixed)
            rows.append(r)
    return rows


def _repeat_in_later_groups(groups: list[list[int]], row: dict, order: list[int]) -> dict | None:
    """The row with every later group of a chain (`groups`: unit_groups) given the first
    group's products other than its first (the leader's place): when the first group
    loses its other terms whole, its result is the leader, which leads the next group
    at the same E, and that group's copies lose as much again (None for one group)."""
    if len(groups) < 2:
        return None
    out = dict(row)
    first = [(row[f"a{k}"], row[f"b{k}"]) for k in order[1:]]
    for positions in groups[1:]:
        for i, k in enumerate(positions):
            a, b = first[i % len(first)] if first else (0, 0)
            out[f"a{k}"], out[f"b{k}"] = a, b
    return out


def _realise(q: Query, w: Worst, order: list[int], normal) -> dict[str, int] | None:
    """The operand bits of one configuration (products in the group's order; the rest
    of the instruction zero)."""
    p = q.p
    grid = w.E - p.F
    row = {f"a{k}": 0 for k in range(p.K)} | {f"b{k}": 0 for k in range(p.K)} | {"c": 0}
    picks = [w.leader] + list(w.others or [])
    k_iter = iter(order)
    for slot, x, n in picks:
        if slot == 1:  # c
            bits = _exact_bits(Fraction(n) * Fraction(2) ** x.lsb, p.c_fmt)
            if bits is None:
                return None
            row["c"] = bits
            continue
        ab = _pairs(p, Entry(x.e, x.lsb, n, n), grid, w.ratio, normal)
        if ab is None:
            ab = _pairs(p, x, grid, w.ratio, normal)
        if ab is None:
            return None
        k = next(k_iter, None)
        if k is None:
            return None
        row[f"a{k}"], row[f"b{k}"] = ab
    return row


__all__ = ["aligned_rows"]
