"""A query on the symbolic interpreter, and as SMT-LIB2 text: the solvers' input and
`tcsmt export`'s files (with a header that says what the query asks)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..bv.core import BV, Bool
from ..bv.smtlib import to_smtlib
from ..bv.symbolic import SymbolicBackend
from ..version import __version__
from .formula import Built, fixed_inputs
from .goals import Goal

if TYPE_CHECKING:
    from .definition import Query


def symbolic(q: Query) -> tuple[SymbolicBackend, Built]:
    """The query on the symbolic interpreter (fresh variables named after the operands)."""
    s, inputs, _ = symbolic_inputs(q)
    return s, q.build(inputs)


def symbolic_inputs(q: Query) -> tuple[SymbolicBackend, dict[str, BV], list[Bool]]:
    """Variables for the free inputs; fixed inputs enter the model as constants (so
    constant folding removes their share of the work) and are tied to their declared
    variable by an equation, so a model still reports every input."""
    s = SymbolicBackend()
    fixed = fixed_inputs(q)
    inputs: dict[str, BV] = {}
    ties: list[Bool] = []
    for o in q.operands:
        v = s.var(o.name, o.width)
        if o.name in fixed:
            inputs[o.name] = BV.const(s, fixed[o.name], o.width)
            ties.append(v.eq(fixed[o.name]))
        else:
            inputs[o.name] = v
    return s, inputs, ties


def smtlib(q: Query, for_export: bool = False) -> str:
    """SMT-LIB2 text of the query. The solvers get it without commands; an export adds
    a header, `(check-sat)` and `(get-value ...)` of the inputs and outputs."""
    s, inputs, ties = symbolic_inputs(q)
    built = q.build(inputs)
    outs = [t for t in ties]
    for name, o in zip(q.output_names, built.outputs):
        v = s.var(name, o.w)
        outs.append(v.eq(o))
    roots = [built.constraint.v, built.goal.v] + [e.v for e in outs]
    names = [o.name for o in q.operands] + list(q.output_names)
    header = q.header_lines() if for_export else None
    declared = [s.var(o.name, o.width).v for o in q.operands]  # inputs no term reads, too
    text = to_smtlib(
        roots, get_values=names if for_export else None, header=header, declare=declared
    )
    if not for_export:
        text = text.replace("(check-sat)\n", "")
    return text


def header(q: Query) -> list[str]:
    p = q.p
    lines = [
        f"tensorcore-smt {__version__} query {q.slug}",
        f"instruction: {q.instruction} ({p.a_fmt.spec.name} x {p.b_fmt.spec.name} + "
        f"{p.c_fmt.spec.name} -> {p.d_fmt.spec.name}, K={p.K})",
    ]
    if q.goal.one_variant:
        lines += [
            f"variant X: {q.variants[0]}; out0 = X(u), out1 = X(u_2)",
            f"relation: {q.relation}",
        ]
    else:
        lines += [f"variant X (out0): {q.variants[0]}", f"variant Y (out1): {q.variants[1]}"]
    unsat = "" if q.goal == Goal.COMPARE_ERRORS else f"; unsat proves {q.goal.meaning_of_unsat}"
    if q.goal == Goal.ERROR_EXCEEDS:
        ref = "the exact result" if q.against_exact else "Y's output"
        lines.append(
            f"measure: {q.measure.value} {q.measure.formula}, r = {ref}; threshold {q.threshold}"
        )
    lines += [
        f"goal: {q.goal.value}; sat means {q.goal.meaning_of_sat}{unsat}",
        "constraints: " + (" ".join(c.describe() for c in q.constraints) or "none"),
        "inputs: " + ", ".join(f"{o.name} ({o.fmt.spec.name})" for o in q.operands),
    ]
    return lines


def trivially_unsat(q: Query) -> bool:
    """True when constant folding reduces the goal to false (identical terms)."""
    _, built = symbolic(q)
    g = built.goal & built.constraint
    return g.v.op == "bconst" and not g.v.value
