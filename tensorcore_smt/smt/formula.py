"""A query as a formula on one interpreter: its inputs' constraints (the class, read in
inputs/symbolic.py), each variant's output, and the goal as a term.

The same code runs on the symbolic interpreter (the solvers' formula, smt/encode.py)
and on the concrete ones (a witness re-checked, smt/recheck.py), so what the solver was
asked and whether its answer holds cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..bv.core import BV, Bool, all_of
from ..formats import Format, decode, payload
from ..inputs.constraints import fixed_values
from ..inputs.grid import class_grid, no_overflow_implied
from ..inputs.kinds import GLOBAL_KINDS, ConstraintKind
from ..inputs.operands import SECOND
from ..inputs.symbolic import class_holds
from ..model import dot_add
from ..model.exact import exact_dot, grid, on_grid_checked, value_on_grid
from ..model.measure import exceeds, reference_terms
from ..model.params import ModelParams
from ..model.terms import operand_addend
from .goals import Goal

if TYPE_CHECKING:
    from .definition import Query


@dataclass
class Built:
    """A query on one interpreter: inputs, each variant's output, constraint, goal."""

    inputs: dict[str, BV]
    outputs: tuple[BV, BV]
    constraint: Bool
    goal: Bool


def constraint_terms(q: Query, inputs: dict[str, BV]) -> list[Bool]:
    """The query's input constraints on the interpreter of `inputs`, one term each (per
    operand, then the constraints on all inputs together)."""
    u, _ = q.input_sets(inputs)
    K = q.p.K
    a, b, c = [u[f"a{i}"] for i in range(K)], [u[f"b{i}"] for i in range(K)], u["c"]
    conds = [
        cn.holds(inputs[o.name], o.fmt)
        for cn in q.constraints
        for o in q.operands
        if cn.applies_to(o.name)
    ]
    conds += [
        class_holds(cn, a, b, c, q.p)
        for cn in q.constraints
        if cn.kind in GLOBAL_KINDS
        and not (cn.kind == ConstraintKind.NO_OVERFLOW and no_overflow_implied(q.p, q.constraints))
    ]
    return conds


def build(q: Query, inputs: dict[str, BV]) -> Built:
    """The query's formula on the interpreter of `inputs` (symbolic vars or constants)."""
    K = q.p.K
    u, u2 = q.input_sets(inputs)
    a, b, c = [u[f"a{i}"] for i in range(K)], [u[f"b{i}"] for i in range(K)], u["c"]
    conds = constraint_terms(q, inputs)
    if q.goal == Goal.ERROR_EXCEEDS:
        x = unit_output(q, q.params[0], u)
        y = x if q.against_exact else unit_output(q, q.params[1], u)
        goal = error_exceeds(q, x, y, a, b, c)
        return Built(inputs, (x, y), all_of(c.b, conds), goal)
    if q.goal == Goal.NON_MONOTONE:
        px = q.p
        x = unit_output(q, px, u)
        y = unit_output(q, px, u2)
        # u <= u_2: every operand of a growing group is at most its second copy
        conds += [
            value_le(inputs[o.name], inputs[o.name + SECOND], o.fmt)
            for o in q.base_operands
            if o.name[0] in q.grows
        ]
        goal = value_lt(y, x, px.d_fmt)
    else:
        pa, pb = q.params
        x = unit_output(q, pa, u)
        y = unit_output(q, pb, u)
        if q.goal in (Goal.DIFFER, Goal.EQUIVALENT):
            goal = x.ne(y)
        else:
            goal = more_accurate(x, y, a, b, c, pa)
    return Built(inputs, (x, y), all_of(c.b, conds), goal)


def unit_output(q: Query, p: ModelParams, u: dict) -> BV:
    """d of the unit `p` (one of the query's hypotheses) on the input set `u` (name ->
    BV): its entries of A (`Query.unit_a`), b, c, its scale factors and metadata."""
    K = q.p.K
    a = q.unit_a([u[f"a{i}"] for i in range(K)])
    b = [u[f"b{i}"] for i in range(K)]
    meta = list(q.meta) if q.meta is not None else None
    return dot_add(a, b, u["c"], p, *scale_inputs(u, p), meta=meta)


def fixed_inputs(q: Query) -> dict[str, int]:
    """The inputs the class of `q` fixes: --fix NAME=HEX, and +0 where a constraint of
    ZERO_KINDS leaves products (or a sparse row's entries) out."""
    return fixed_values(q.constraints, [o.name for o in q.operands])


def scale_inputs(u: dict, p: ModelParams) -> tuple[list | None, list | None]:
    """The scale factors sa0.., sb0.. among the inputs `u` when `p` takes them (None,
    None otherwise: a variant without block scaling ignores them)."""
    if p.scale_fmt is None or "sa0" not in u:
        return None, None
    n = p.n_scales
    return [u[f"sa{i}"] for i in range(n)], [u[f"sb{i}"] for i in range(n)]


def order_key(x: BV, fmt: Format) -> tuple[Bool, BV]:
    """(is NaN, a signed integer that orders the other values of `fmt` as the reals they
    stand for). Magnitudes of IEEE-style encodings grow with their bits (subnormals,
    normals, then Inf), so the key is the magnitude bits, negated for a negative sign;
    both zeros get 0. TF32 is read as the model reads it (payload, low bits dropped)."""
    s = fmt.spec
    u = decode(x, fmt)
    bits = payload(x, fmt)
    mag = bits.extract(s.mbits + s.ebits - 1, 0).zext(1)
    return u.is_nan, u.sign.ite(-mag, mag)


def value_le(x: BV, y: BV, fmt: Format) -> Bool:
    """x <= y as real numbers (+0 = -0, -Inf < finite < +Inf); false if either is NaN."""
    nx, kx = order_key(x, fmt)
    ny, ky = order_key(y, fmt)
    return ~nx & ~ny & kx.sle(ky)


def value_lt(x: BV, y: BV, fmt: Format) -> Bool:
    """x < y as real numbers; false if either is NaN."""
    nx, kx = order_key(x, fmt)
    ny, ky = order_key(y, fmt)
    return ~nx & ~ny & kx.slt(ky)


def more_accurate(x: BV, y: BV, a: list[BV], b: list[BV], c: BV, p: ModelParams) -> Bool:
    """|x - exact| < |y - exact| with finite inputs and outputs, exactly on a fixed grid."""
    lsb, width = grid(p.a_fmt, p.b_fmt, p.c_fmt, p.d_fmt, p.K)
    finite = []
    for bits, fmt in [(v, p.a_fmt) for v in a] + [(v, p.b_fmt) for v in b] + [(c, p.c_fmt)]:
        u = decode(bits, fmt)
        finite.append(~u.is_inf & ~u.is_nan)
    for bits in (x, y):
        u = decode(bits, p.d_fmt)
        finite.append(~u.is_inf & ~u.is_nan)
    ref = exact_dot(a, b, c, (p.a_fmt, p.b_fmt, p.c_fmt), lsb, width)
    ex = (value_on_grid(x, p.d_fmt, lsb, width) - ref).abs()
    ey = (value_on_grid(y, p.d_fmt, lsb, width) - ref).abs()
    return all_of(x.b, finite) & ex.ult(ey)


def finite(bits: BV, fmt: Format) -> Bool:
    u = decode(bits, fmt)
    return ~u.is_inf & ~u.is_nan


def error_exceeds(q: Query, x: BV, y: BV, a: list[BV], b: list[BV], c: BV) -> Bool:
    """X's error against the reference (the exact result, or Y's output) is above the
    threshold in the query's measure, on the class's grid (class_grid). With finite
    inputs a non-finite X, or an X off the grid, counts as exceeding; a non-finite Y
    leaves nothing to measure against (false), a Y off the grid counts as exceeding."""
    p = q.p
    lsb, width = class_grid(p, q.constraints)
    finite_in = [finite(v, p.a_fmt) for v in a] + [finite(v, p.b_fmt) for v in b]
    finite_in.append(finite(c, p.c_fmt))
    e, norm = reference_terms(a, b, c, (p.a_fmt, p.b_fmt, p.c_fmt), lsb, width)
    ref_ok, ref_fits = Bool.const(c.b, True), Bool.const(c.b, True)
    if not q.against_exact:
        e, ref_fits = on_grid_checked(operand_addend(decode(y, p.d_fmt)), lsb, width)
        ref_ok = finite(y, p.d_fmt)
    dv, fits = on_grid_checked(operand_addend(decode(x, p.d_fmt)), lsb, width)
    over = exceeds(dv, e, norm, p.d_fmt, q.measure, q.threshold, lsb, width)
    bad_x = ~finite(x, p.d_fmt) | ~fits | ~ref_fits
    return all_of(c.b, finite_in) & ref_ok & (bad_x | over)
