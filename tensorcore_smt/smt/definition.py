"""A query as data: the variants compared (or the one variant and the groups that grow),
the instruction, the input class, the goal, and the inputs it declares.

How a query becomes a formula is smt/formula.py; how variant expressions become a query
is smt/resolve.py; smt/query.py gathers the names the package imports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction

from ..bv.core import BV
from ..inputs.constraints import Constraint
from ..inputs.operands import GROUPS, SECOND, Operand
from ..model.measure import Measure
from ..model.params import ModelParams, Sparsity
from ..model.sparse import positions as sparse_positions
from .encode import header
from .formula import Built, build
from .goals import EXACT, Goal

GROW_GROUPS = GROUPS
"""The operand groups a non-monotone query may grow."""


@dataclass(frozen=True)
class Query:
    """A question about two variants of one instruction, or (goal non-monotone) about
    one variant on two related inputs: then `variants` and `params` hold X alone and
    `grows` names the operand groups that grow from u to u_2 ("c", "abc", ...).

    A structured-sparse instruction (mma.sp) is asked for one metadata `meta`: the
    inputs are then the uncompressed row of A, a0..a{K-1}, whose entries the metadata
    does not select are +0 (an UNSELECTED constraint), b0..b{K-1} and c. The unit takes
    the selected entries (`unit_a`), and every reference (the exact result, the class's
    grid) is the dense one of K products, exact because the products left out are
    +0 * b_k with b_k finite wherever an error is measured."""

    variants: tuple[str, ...]
    instruction: str
    goal: Goal = Goal.DIFFER
    constraints: tuple[Constraint, ...] = ()
    name: str = ""
    params: tuple[ModelParams, ...] = field(default=None, compare=False, repr=False)
    grows: str = ""
    # goal error-exceeds: the measure and its threshold; Y is EXACT (the reference is
    # c + sum a_k b_k) or a second variant (the reference is Y's output)
    measure: Measure | None = None
    threshold: Fraction | None = None
    meta: tuple[int, ...] | None = None  # a sparse instruction's metadata (model/sparse.py)
    # Y's instruction where it is not `instruction` (two units of one shape compared
    # across instructions, e.g. A100's mma.sync against H100's wgmma); None: the same
    instr_y: str | None = None

    @property
    def against_exact(self) -> bool:
        """Whether the error is measured against the exact result (goal error-exceeds)."""
        return self.goal == Goal.ERROR_EXCEEDS and self.variants[1] == EXACT

    @property
    def p(self) -> ModelParams:
        return self.params[0]

    @property
    def base_operands(self) -> list[Operand]:
        """a0.., b0.., c: the inputs of one evaluation (u); a block-scaled instruction
        adds its scale factors sa0.., sb0.. (PTX `.block_scale`, MMA-Sim §IV-E)."""
        p = self.p
        scales = []
        if p.scale_fmt is not None:
            scales = [Operand(f"sa{i}", p.scale_fmt) for i in range(p.n_scales)] + [
                Operand(f"sb{i}", p.scale_fmt) for i in range(p.n_scales)
            ]
        return (
            [Operand(f"a{i}", p.a_fmt) for i in range(p.K)]
            + [Operand(f"b{i}", p.b_fmt) for i in range(p.K)]
            + [Operand("c", p.c_fmt)]
            + scales
        )

    @property
    def operands(self) -> list[Operand]:
        """Every declared input: u's, then (non-monotone) u_2's operands that grow."""
        base = self.base_operands
        return base + [Operand(o.name + SECOND, o.fmt) for o in base if o.name[0] in self.grows]

    @property
    def output_names(self) -> tuple[str, str]:
        """out0, out1: X and Y on the inputs, or (non-monotone) X on u and on u_2."""
        return ("out0", "out1")

    @property
    def output_labels(self) -> tuple[str, str]:
        """What each output is, for reports: the variants, or `X(u)`, `X(u_2)`."""
        if self.goal.one_variant:
            return (f"{self.variants[0]} at u", f"{self.variants[0]} at u_2")
        return (self.variants[0], self.variants[1])

    @property
    def relation(self) -> str:
        """The order between u and u_2 in words (non-monotone queries; '' otherwise)."""
        if not self.goal.one_variant:
            return ""
        parts = []
        for g in GROW_GROUPS:
            k = "" if g == "c" else "_k"
            parts.append(f"{g}{k} <= {g}{k}{SECOND}" if g in self.grows else f"{g}{k} shared")
        return "u <= u_2: " + ", ".join(parts) + " (as real numbers, not NaN)"

    @property
    def slug(self) -> str:
        """A file name for the query."""
        if self.name:
            return safe_name(self.name)
        if self.goal.one_variant:
            return safe_name(
                f"{self.goal.value}_{self.variants[0]}_{self.grows}_{self.instruction}"
            )
        return safe_name(
            f"{self.goal.value}_{self.variants[0]}_vs_{self.variants[1]}_{self.instruction}"
        )

    def build(self, inputs: dict[str, BV]) -> Built:
        """The query's formula on the interpreter of `inputs` (see `build`)."""
        return build(self, inputs)

    def header_lines(self) -> list[str]:
        """What an exported SMT-LIB2 file says about the query in its comments."""
        return header(self)

    def emulated(self, inputs: dict[str, int]) -> tuple[int, int] | None:
        """The outputs by a second path than `build` (None: there is none; a GEMM query
        runs its witness through the emulator)."""
        return None

    def unit_a(self, a: list) -> list:
        """The entries of A the unit takes: the selected ones of a sparse query's
        uncompressed row (all of `a` otherwise). Works for bits, BV terms or columns."""
        if self.meta is None:
            return list(a)
        return [a[k] for k in sparse_positions(self.meta, self.p)]

    def product_positions(self) -> list[int]:
        """The k whose product a_k b_k the unit can see: 0..K-1, or a sparse query's
        positions the metadata selects."""
        if self.meta is None:
            return list(range(self.p.K))
        return sparse_positions(self.meta, self.p)

    def unit_index(self) -> dict[int, int]:
        """k -> the index of product k among the entries of the dense unit X runs
        (model/sparse.dense_params): k itself, or for a compressed sparse unit the rank
        of k among the selected positions."""
        pos = self.product_positions()
        if self.meta is None or self.p.sparse != Sparsity.COMPRESSED:
            return {k: k for k in pos}
        return {k: j for j, k in enumerate(pos)}

    def vector_fields(self, u: dict) -> dict:
        """One input set `u` (name -> bits) as a test vector's fields: a (the unit's
        entries), b, c, the scale factors of a block-scaled unit and a sparse unit's
        metadata."""
        p = self.p
        n = p.n_scales
        return {
            "a": self.unit_a([u[f"a{i}"] for i in range(p.K)]),
            "b": [u[f"b{i}"] for i in range(p.K)],
            "c": u["c"],
            "sa": [u[f"sa{i}"] for i in range(n)] if n else None,
            "sb": [u[f"sb{i}"] for i in range(n)] if n else None,
            "metadata": list(self.meta) if self.meta is not None else None,
        }

    def input_sets(self, values: dict) -> tuple[dict, dict]:
        """(u, u_2) keyed by the base operand names (a0.., b0.., c): u_2 takes each
        `NAME_2` when declared, else the shared `NAME`. Works for bits or BV terms."""
        base = [o.name for o in self.base_operands]
        u = {n: values[n] for n in base}
        if not self.goal.one_variant:
            return u, dict(u)
        return u, {n: values.get(n + SECOND, values[n]) for n in base}


def safe_name(text: str) -> str:
    """`text` as a file name: runs of other characters than letters, digits and ._=+- become _."""
    return re.sub(r"[^A-Za-z0-9._=+-]+", "_", text).strip("_")
