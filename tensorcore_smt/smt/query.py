"""Queries: the names the package and its users import, gathered from the modules that
hold them.

A query (smt/definition.py) asks a goal (smt/goals.py) of two variants of one
instruction on the inputs of a class, or (goal non-monotone) of one variant on inputs u
and u_2 >= u (Fasi et al. §III-D5). It is built on any interpreter (smt/formula.py): on
the symbolic one it becomes SMT-LIB2 text for the solvers and for `tcsmt export`
(smt/encode.py); on the concrete one it re-checks a solver's witness (smt/recheck.py),
so the same code decides what the solver was asked and whether its answer holds.
Variant expressions become a query in smt/resolve.py. The class's constraints and their
meanings are inputs/, the language every reader of a class shares.
"""

from __future__ import annotations

from ..inputs.constraints import Constraint
from ..inputs.grid import class_grid, no_overflow_implied
from ..inputs.kinds import GLOBAL_KINDS, ZERO_KINDS, ConstraintKind
from ..inputs.operands import SECOND, Operand, split_name
from ..inputs.parse import parse_fix, parse_integer, parse_representable, parse_window
from ..inputs.symbolic import class_holds
from .definition import GROW_GROUPS, Query, safe_name
from .encode import smtlib, symbolic, symbolic_inputs, trivially_unsat
from .formula import (
    Built,
    build,
    constraint_terms,
    fixed_inputs,
    scale_inputs,
    unit_output,
    value_le,
    value_lt,
)
from .goals import EXACT, Goal
from .recheck import Recheck, hex_inputs, recheck
from .resolve import make_query, with_meta

__all__ = [
    "EXACT",
    "GLOBAL_KINDS",
    "GROW_GROUPS",
    "SECOND",
    "ZERO_KINDS",
    "Built",
    "Constraint",
    "ConstraintKind",
    "Goal",
    "Operand",
    "Query",
    "Recheck",
    "build",
    "class_grid",
    "class_holds",
    "constraint_terms",
    "fixed_inputs",
    "hex_inputs",
    "make_query",
    "no_overflow_implied",
    "parse_fix",
    "parse_integer",
    "parse_representable",
    "parse_window",
    "recheck",
    "safe_name",
    "scale_inputs",
    "smtlib",
    "split_name",
    "symbolic",
    "symbolic_inputs",
    "trivially_unsat",
    "unit_output",
    "value_le",
    "value_lt",
    "with_meta",
]
