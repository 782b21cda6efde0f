"""The worst error of an integer unit over a bound's class, answered by argument at once
(`tcsmt bound`, `tc.bound` on an s8 / u8 / s4 / u4 / b1 instruction).

An integer unit (model/integer.py) forms every term a_k b_k exactly (for .b1 AND, a_k
AND b_k = a_k b_k on bits) and adds exactly in a register wide enough for the sum; only
the s32 accumulator's wrap-around or clamp can make d differ from c + sum a_k b_k.
Every value it forms, inside an instruction or between two (any grouping L, either
order of c), is c plus a sum of some of the terms, of magnitude at most M = |c| +
sum |a_k b_k|. A bound's class always holds the no-overflow condition M <= 2^31 - 1
(certify/bound.default_class), so on it no partial sum leaves s32: no wrap, no clamp,
d is the exact sum and every measure is 0, against the exact result and between two
integer units alike. The interval is [0, 0], closed; the argument's edge rows (M =
2^31 - 1 exactly, every term at its extreme, in either half) are run through the
concrete model before it is trusted. Outside the class the accumulator wraps or clamps:
`tcsmt exact` gives the longest overflow-free chain and a witness beyond it.

A .b1 XOR unit is refused at once: the class bounds |c| + sum |a_k b_k|, which says
nothing of popc(a_k XOR b_k) (a_k = 1, b_k = 0 is a term of 1 and a product of 0), so
c near 2^31 - 1 wraps inside the class.
"""

from __future__ import annotations

from ..errors import UserError
from ..inputs.kinds import ConstraintKind
from ..model.integer import S32_MAX, exact_value, term_range
from ..model.params import Algorithm, BitOp, ModelParams
from ..smt.query import Query


def integer_units(q: Query) -> bool:
    """Whether the bound's units are integer units (UserError when only one side is)."""
    kinds = [p.algorithm == Algorithm.INTEGER for p in q.params]
    if any(kinds) and not all(kinds):
        raise UserError("bound: an integer unit against a float unit has no common measure")
    return all(kinds)


def _corner(p: ModelParams, want: int) -> tuple[int, int]:
    """Operand values whose term is `want` (one of the term range's ends)."""
    (a0, a1), (b0, b1) = p.a_fmt.spec.int_range, p.b_fmt.spec.int_range
    for x in (a0, a1, 0, 1):
        for y in (b0, b1, 0, 1):
            if a0 <= x <= a1 and b0 <= y <= b1 and exact_value([x], [y], 0, p) == want:
                return x, y
    raise AssertionError(f"no operands give the term {want}")


def edge_rows(p: ModelParams) -> list[tuple[list[int], list[int], int]]:
    """Rows on the class's edge, M = |c| + sum |a_k b_k| = 2^31 - 1 exactly: every term
    at its largest (then its least) with c of the same sign taking up the rest, and the
    two extremes in either half (a partial sum that peaks before the end)."""
    tmin, tmax = term_range(p)
    hi, lo = _corner(p, tmax), _corner(p, tmin)
    K, h = p.K, p.K // 2
    rows = []
    for first, second, sign in ((hi, hi, 1), (lo, lo, -1), (hi, lo, 1), (lo, hi, -1)):
        pairs = [first] * h + [second] * (K - h)
        a, b = [x for x, _ in pairs], [y for _, y in pairs]
        m = sum(abs(x * y) for x, y in pairs)
        rows.append((a, b, sign * (S32_MAX - m)))
    return rows


def _edge_counterexample(p: ModelParams) -> tuple[list[int], list[int], int] | None:
    """The first edge row on which the concrete model does not give the exact sum."""
    from ..smt.argument_rows import first_inexact_integer_row

    return first_inexact_integer_row(p, edge_rows(p))


def integer_interval(q: Query, names: list[str], exact_cmd: str) -> tuple[list[str], str | None]:
    """The argument that the integer units of `q` (named `names`) have error 0 on its
    class, as report lines, and None, or a description of the first edge row the
    concrete model does not reproduce (a bug); UserError for a .b1 XOR unit or a class
    without the no-overflow condition (both pointing at `exact_cmd`, the command that
    answers where the accumulator wraps)."""
    from ..model.sparse import dense_params

    for p in q.params:
        if p.bit_op == BitOp.XOR:
            raise UserError(
                f"bound: {q.instruction} adds popc(a XOR b), which the class's no-overflow "
                "condition (|c| + sum |a_k b_k| <= 2^31 - 1) does not bound, so it can wrap "
                f"inside the class; its only error is the s32 wrap-around: `{exact_cmd}` "
                "gives the longest chain without it"
            )
    if not any(c.kind == ConstraintKind.NO_OVERFLOW for c in q.constraints):
        raise UserError(f"bound: an integer unit errs only by overflow: `{exact_cmd}` answers it")
    rows = 0
    for name, p in zip(names, q.params):
        p = dense_params(p)  # a sparse unit adds its kept products on its dense unit
        bad = _edge_counterexample(p)
        rows += len(edge_rows(p))
        if bad is not None:
            a, b, c = bad
            return [], (
                f"{name}: the integer argument's edge row c = {c}, a = {a}, b = {b} is not "
                "the exact sum on the concrete model; please report this bound"
            )
    tmin, tmax = term_range(q.p)
    what = "a_k AND b_k" if q.p.bit_op == BitOp.AND else "a_k b_k"
    lines = [
        f"integer unit: each term {what} lies in [{tmin}, {tmax}] and is formed exactly, "
        "every sum in a register wide enough for it",
        "every value it forms (any grouping, c first or last) is c plus some of the terms: "
        "magnitude <= M = |c| + sum |a_k b_k|",
        "the class holds M <= 2^31 - 1 (no-overflow): no partial sum leaves s32, so no "
        "wrap-around and no clamp acts and d = c + sum a_k b_k exactly",
        f"every measure is 0 on the class; {rows} edge rows (M = 2^31 - 1) reproduce "
        "exactly on the concrete model",
        f"outside the class the s32 accumulator wraps or clamps: `{exact_cmd}` gives the "
        "longest overflow-free chain",
    ]
    return lines, None
