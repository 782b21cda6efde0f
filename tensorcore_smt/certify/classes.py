"""Input classes of a certificate: `--where` constraints, and whether a class is empty.

A class is a conjunction of the input-class language's constraints (inputs/; `--where`
is read by inputs/parse.py), among them two that certificates need: integer-valued
p-bit inputs (`integer`, the slices of Ozaki-scheme splitting: every slice of a row
shares one power-of-two scale, and scaling a row of A or a column of B by 2^s scales
each product by 2^s exactly, so the integer slices at scale 0 are the question up to
that scale as long as nothing underflows or overflows) and `no-overflow`
(|c| + sum |a_k b_k| within the output format: an exact result beyond it has an
infinite error in every measure).
"""

from __future__ import annotations

from ..bv.smtlib import to_smtlib
from ..inputs import parse
from ..inputs.constraints import Constraint
from ..inputs.parse import UNRESOLVED, parse_where
from ..smt.encode import symbolic_inputs
from ..smt.query import Query
from ..smt.solve import Limits, solvers_for
from ..solvers import Answer, SolveJob
from ..solvers.runner import portfolio


def resolve_fixes(constraints: tuple[Constraint, ...], q: Query) -> tuple[Constraint, ...]:
    """Fix constraints parsed from text, checked against the inputs of `q`."""
    return parse.resolve_fixes(constraints, q.operands)


def class_is_empty(q: Query, limits: Limits) -> bool | None:
    """Whether no input satisfies the class of `q` (True), some does (False), or the
    solvers could not tell within the limits (None)."""
    s, inputs, ties = symbolic_inputs(q)
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


__all__ = ["UNRESOLVED", "class_is_empty", "parse_where", "resolve_fixes"]
