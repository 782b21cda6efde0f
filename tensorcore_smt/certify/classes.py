"""Input classes of a certificate: `--where` constraints, and whether a class is empty.

A class is a conjunction of the property library's constraint kinds (smt/query.py),
plus two that certificates need: integer-valued p-bit inputs (`integer`, the slices of
Ozaki-scheme splitting: every slice of a row shares one power-of-two scale, and scaling
a row of A or a column of B by 2^s scales each product by 2^s exactly, so the integer
slices at scale 0 are the question up to that scale as long as nothing underflows or
overflows) and `no-overflow` (|c| + sum |a_k b_k| within the output format: an exact
result beyond it has an infinite error in every measure).
"""

from __future__ import annotations

from ..bv.smtlib import to_smtlib
from ..errors import UserError
from ..smt.query import (
    Constraint,
    ConstraintKind,
    Query,
    _symbolic_inputs,
    parse_integer,
    parse_representable,
    parse_window,
)
from ..smt.solve import Limits, solvers_for
from ..solvers import Answer, SolveJob
from ..solvers.runner import portfolio

UNRESOLVED = "?"
"""The operand of a fix constraint parsed before its query exists."""

_FLAGS = {
    "normal-only": ConstraintKind.NORMAL_ONLY,
    "nonzero": ConstraintKind.NONZERO,
    "positive": ConstraintKind.POSITIVE,
    "negative": ConstraintKind.NEGATIVE,
    "finite": ConstraintKind.FINITE,
    "no-overflow": ConstraintKind.NO_OVERFLOW,
    "no-underflow": ConstraintKind.NO_UNDERFLOW,
}


def parse_where(text: str) -> Constraint:
    """One `--where` constraint: a flag (normal-only, nonzero, positive, negative), or
    KIND:ARG (exponent-window:ab=-4:4, representable:ab=fp16, integer:ab=7, terms:4,
    fix:c=0x3f800000)."""
    kind, _, arg = text.strip().partition(":")
    if kind in _FLAGS:
        if arg and kind not in ("normal-only", "nonzero", "positive", "negative"):
            raise UserError(f"--where {text}: {kind} takes no argument")
        ops = arg or "abc"
        if any(ch not in "abc" for ch in ops):
            raise UserError(f"--where {text}: operands are letters of abc")
        return Constraint(_FLAGS[kind], ops)
    if kind == "exponent-window":
        return parse_window(arg)
    if kind == "representable":
        return parse_representable(arg)
    if kind == "integer":
        return parse_integer(arg)
    if kind == "terms":
        try:
            n = int(arg)
        except ValueError:
            raise UserError(f"--where {text}: expected terms:N") from None
        if n < 0:
            raise UserError(f"--where {text}: N is negative")
        return Constraint(ConstraintKind.TERMS, "ab", lo=n)
    if kind == "fix":
        # the input's format is known only with the query: resolve_fixes checks the hex
        return Constraint(ConstraintKind.FIX, UNRESOLVED, bits=0, reason=arg)
    known = ", ".join(
        list(_FLAGS) + ["exponent-window", "representable", "integer", "terms", "fix"]
    )
    raise UserError(f"--where {text}: unknown constraint {kind!r}; known: {known}")


def resolve_fixes(constraints: tuple[Constraint, ...], q: Query) -> tuple[Constraint, ...]:
    """Fix constraints parsed from text, checked against the inputs of `q`."""
    from ..smt.query import parse_fix

    out = []
    for c in constraints:
        if c.kind == ConstraintKind.FIX and c.operands == UNRESOLVED:
            out.append(parse_fix(c.reason, q.operands))
        else:
            out.append(c)
    return tuple(out)


def class_is_empty(q: Query, limits: Limits) -> bool | None:
    """Whether no input satisfies the class of `q` (True), some does (False), or the
    solvers could not tell within the limits (None)."""
    s, inputs, ties = _symbolic_inputs(q)
    built = q.build(inputs)
    text = to_smtlib([built.constraint.v] + [t.v for t in ties]).replace("(check-sat)\n", "")
    names = tuple(o.name for o in q.operands)
    job = SolveJob(text, names, min(limits.timeout, 60.0), limits.memory_mb, limits.seed)
    result, _ = portfolio(job, solvers_for(limits.solver), limits.jobs, None, None)
    if result.answer == Answer.UNSAT:
        return True
    if result.answer == Answer.SAT:
        return False
    return None
