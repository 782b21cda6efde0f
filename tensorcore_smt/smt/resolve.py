"""Variant expressions resolved into a query: both variants on one instruction shape, the
goal's own arguments checked, fixes checked against the declared inputs, and a
structured-sparse instruction asked for one metadata."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction

from ..errors import UserError
from ..inputs.constraints import Constraint
from ..inputs.kinds import ConstraintKind
from ..inputs.operands import SECOND, split_name
from ..model.measure import Measure
from ..model.params import Sparsity
from ..model.sparse import describe_metadata, metadata_for
from ..model.sparse import positions as sparse_positions
from ..spec.presets import parse_variant
from .definition import GROW_GROUPS, Query
from .goals import EXACT, Goal


def make_query(
    a: str,
    b: str | None,
    instr: str | None = None,
    goal: Goal = Goal.DIFFER,
    constraints: tuple[Constraint, ...] = (),
    name: str = "",
    grows: str | None = None,
    measure: Measure | None = None,
    threshold: Fraction | None = None,
    meta: Sequence[int] | None = None,
    instr_b: str | None = None,
) -> Query:
    """Resolve two variant expressions on one instruction; UserError if they cannot be
    compared (different instruction shapes or operand formats). `instr_b`: b's
    instruction where it differs from a's (`instr`, or a's default), of the same shape
    and operand formats. A structured-sparse instruction is asked for the metadata
    `meta` (see `with_meta`).

    Goal non-monotone takes one variant `a` (`b` is None, or the same variant) and
    `grows`, the operand groups that grow from u to u_2 (default "c"). Goal
    error-exceeds takes `measure` and `threshold`, and `b` None or EXACT for the error
    against the exact result."""
    if goal == Goal.ERROR_EXCEEDS:
        if measure is None or threshold is None:
            raise ValueError("goal error-exceeds needs a measure and a threshold")
        if threshold < 0:
            raise UserError(f"threshold {threshold} is negative")
        if not b or b == EXACT:
            if instr_b is not None:
                raise UserError("an instruction for the reference needs a second variant")
            va = parse_variant(a)
            inst = va.instruction(instr)
            pa = va.params(inst.name)
            q = Query(
                (a, EXACT),
                inst.name,
                goal,
                tuple(constraints),
                name,
                (pa, pa),
                "",
                measure,
                Fraction(threshold),
            )
            _check_fixes(q)
            return with_meta(q, meta)
    elif measure is not None or threshold is not None:
        raise ValueError(f"a measure and threshold apply only to goal {Goal.ERROR_EXCEEDS.value}")
    if goal.one_variant and instr_b is not None:
        raise UserError(f"goal {goal.value} asks about one variant: one instruction")
    if goal.one_variant:
        return with_meta(_make_one_variant_query(a, b, instr, goal, constraints, name, grows), meta)
    if grows:
        raise UserError(f"grow={grows!r} applies only to goal {Goal.NON_MONOTONE.value}")
    if not b:
        raise UserError(f"goal {goal.value} compares two variants X and Y; Y is missing")
    va, vb = parse_variant(a), parse_variant(b)
    inst = va.instruction(instr)
    if instr_b is not None:
        inst_b = vb.instruction(instr_b)
    else:
        inst_b = _same_instruction(vb, instr, inst.name, a, b)
    pa, pb = va.params(inst.name), vb.params(inst_b.name)
    for what in ("K", "n_a", "a_fmt", "b_fmt", "c_fmt", "d_fmt"):
        if getattr(pa, what) != getattr(pb, what):
            on = inst.name if inst_b.name == inst.name else f"{inst.name} and {inst_b.name}"
            raise UserError(
                f"{a!r} and {b!r} differ in {what} on {on}; only variants of one "
                f"instruction shape can be compared"
            )
    q = Query(
        (a, b),
        inst.name,
        goal,
        tuple(constraints),
        name,
        (pa, pb),
        "",
        measure,
        None if threshold is None else Fraction(threshold),
        instr_y=inst_b.name if inst_b.name != inst.name else None,
    )
    _check_fixes(q)
    return with_meta(q, meta)


def _same_instruction(vb, instr: str | None, name: str, a: str, b: str):
    """b's instruction when one instruction is asked of both: `instr`, else a's default
    `name`; UserError when b has none of that name."""
    try:
        return vb.instruction(instr or name)
    except UserError:
        raise UserError(
            f"{b!r} has no instruction {name!r} (the default of {a!r}); "
            f"pick a common one with --instr"
        ) from None


def with_meta(q: Query, meta: Sequence[int] | None) -> Query:
    """`q` asked for one metadata when its instruction is structured-sparse: the metadata
    checked (None: the first pattern in every group; one group's pattern: every group
    keeps it) and the entries of A it leaves out fixed at +0 (an UNSELECTED
    constraint). UserError for metadata on a dense instruction, bad metadata, or a
    --fix of a left-out entry to anything but +0."""
    p = q.p
    if p.sparse == Sparsity.NONE:
        if meta is not None:
            raise UserError("--meta: metadata given to a dense instruction; allowed: none")
        return q
    try:
        m = metadata_for(meta, p)
    except ValueError as e:
        raise UserError(f"--meta: {str(e).removeprefix('metadata: ')}") from None
    kept = set(sparse_positions(m, p))
    left_out = tuple(k for k in range(p.K) if k not in kept)
    order = sorted(kept)
    # --terms N counts the unit's products: every a and b after the N-th kept one is +0
    cons = tuple(
        replace(c, hi=order[c.lo - 1] + 1 if 0 < c.lo <= len(order) else min(c.lo, p.K))
        if c.kind == ConstraintKind.TERMS
        else c
        for c in q.constraints
    )
    for c in q.constraints:
        if c.kind == ConstraintKind.FIX and c.operands[0] == "a" and c.bits != 0:
            k = split_name(c.operands)[1]
            if k in left_out:
                raise UserError(
                    f"--fix {c.operands}: the metadata does not select a{k} (it is +0); "
                    f"selected: {', '.join(f'a{j}' for j in sorted(kept))}"
                )
    unselected = Constraint(
        ConstraintKind.UNSELECTED,
        "a",
        positions=left_out,
        meta_text=describe_metadata(m, p),
        reason="the entries of A the metadata does not select",
    )
    return replace(q, constraints=cons + (unselected,), meta=tuple(m))


def _make_one_variant_query(
    a: str,
    b: str | None,
    instr: str | None,
    goal: Goal,
    constraints: tuple[Constraint, ...],
    name: str,
    grows: str | None,
) -> Query:
    if b and b.strip() != a.strip():
        raise UserError(
            f"goal {goal.value} evaluates one variant X on two inputs; got a second "
            f"variant {b!r} (give X alone, or X twice)"
        )
    grows = "c" if grows is None else grows
    bad = sorted(set(grows) - set(GROW_GROUPS))
    if bad or not grows or len(set(grows)) != len(grows):
        raise UserError(
            f"grow={grows!r}: expected one or more of the operand groups a, b, c "
            f"(e.g. 'c' or 'abc')"
        )
    grows = "".join(g for g in GROW_GROUPS if g in grows)
    va = parse_variant(a)
    inst = va.instruction(instr)
    q = Query((a,), inst.name, goal, tuple(constraints), name, (va.params(inst.name),), grows)
    _check_fixes(q)
    return q


def _check_fixes(q: Query) -> None:
    names = {o.name for o in q.operands}
    for c in q.constraints:
        if c.kind == ConstraintKind.FIX and c.operands not in names:
            K = q.p.K
            second = (
                ", " + ", ".join(o.name for o in q.operands if o.name.endswith(SECOND))
                if q.goal.one_variant
                else ""
            )
            raise UserError(
                f"--fix {c.operands}: no such input; inputs are a0..a{K - 1}, "
                f"b0..b{K - 1}, c{second}"
            )
