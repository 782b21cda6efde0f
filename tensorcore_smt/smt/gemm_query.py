"""Queries about GEMM hypotheses: one output element of D = A·B (+ C) under two schedules.

A GEMM output element is a long dot product: a row of A (length K), a column of B and c,
run through a chain of instructions and the schedule's promotions, split-K partials and
epilogue (`tensorcore_smt.gemm.element`). A `GemmQuery` has the shape of an instruction
`Query` (declared inputs a0..a{K-1}, b0..b{K-1}, c; two outputs; constraints; a goal) and
builds its formula with the GEMM element code on any interpreter, so everything of
`smt.query` and `smt.solve` applies unchanged: SMT-LIB2 text for the portfolio, the witness
re-check on the concrete interpreter, the unsat confirmation. A witness is also re-run on
the emulator (`tensorcore_smt.gemm.emulate.matmul`, numpy) as a 1×K by K×1 product: the
same bits by the path users call.

Query size. K = 256 of Hopper's FP8 wgmma is eight chained k32 instructions, so a query
over every input is large. `focus_constraints` keeps free only the k-blocks where the two
schedules' structures meet (the first and last block of every chain, split and promotion
interval of either plan) and fixes the others to +0 (constants fold away in the DAG). A
witness under these constraints is a witness of the full question; an unsat answer is
not a proof for all inputs, so `tcsmt diff` then asks the full query, and `tcsmt prove`
never focuses (docs/gemm-solvers.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..bv.core import BV, Bool, all_of
from ..errors import UserError
from ..formats import Format
from ..gemm import model as adapter
from ..gemm.model import GemmModel
from ..model.params import ModelParams
from ..version import __version__
from .query import Built, Constraint, ConstraintKind, Goal, Operand, safe_name

LEVEL = "gemm"


def resolve(text: str, K: int, instr: str | None = None, fmt: Format | None = None) -> GemmModel:
    """`ARCH[...]/SCHEDULE[...]` on instruction `instr` (default: the one libraries use
    on the architecture for inputs in `fmt`, else fp16) for a GEMM of depth K (UserError
    if anything is bad)."""

    return adapter.resolve_model(text, K, instr, fmt)


def is_gemm(text: str) -> bool:
    """Whether a hypothesis is written at the GEMM level (`ARCH[...]/SCHEDULE[...]`)."""
    return "/" in text


@dataclass(frozen=True)
class GemmQuery:
    """Two GEMM hypotheses compared on one output element of a depth-K product."""

    variants: tuple[str, str]
    instruction: str
    K: int
    goal: Goal = Goal.DIFFER
    constraints: tuple[Constraint, ...] = ()
    name: str = ""
    models: tuple[GemmModel, GemmModel] = field(default=None, compare=False, repr=False)
    grows: str = ""
    level: str = LEVEL

    @property
    def p(self) -> ModelParams:
        """The instruction model of X (what a property's expectation is tested on)."""
        return self.models[0].p

    @property
    def params(self) -> tuple[ModelParams, ModelParams]:
        return (self.models[0].p, self.models[1].p)

    @property
    def formats(self) -> dict[str, Format]:
        m = self.models[0]
        return {"a": m.p.a_fmt, "b": m.p.b_fmt, "c": m.c_fmt, "d": m.d_fmt}

    @property
    def d_formats(self) -> tuple[Format, Format]:
        """The output format of each hypothesis (they differ when `out` does)."""
        return (self.models[0].d_fmt, self.models[1].d_fmt)

    @property
    def base_operands(self) -> list[Operand]:
        f = self.formats
        return (
            [Operand(f"a{i}", f["a"]) for i in range(self.K)]
            + [Operand(f"b{i}", f["b"]) for i in range(self.K)]
            + [Operand("c", f["c"])]
        )

    @property
    def operands(self) -> list[Operand]:
        return self.base_operands

    @property
    def output_names(self) -> tuple[str, str]:
        return ("out0", "out1")

    @property
    def output_labels(self) -> tuple[str, str]:
        return self.variants

    @property
    def relation(self) -> str:
        return ""

    @property
    def slug(self) -> str:
        if self.name:
            return safe_name(self.name)
        return safe_name(
            f"{self.goal.value}_{self.variants[0]}_vs_{self.variants[1]}_K{self.K}_"
            f"{self.instruction}"
        )

    @property
    def focused(self) -> bool:
        """Whether the query leaves k-positions out (a restriction of the question)."""
        return any(
            c.kind in (ConstraintKind.ZERO_K, ConstraintKind.TERMS) for c in self.constraints
        )

    def input_sets(self, values: dict) -> tuple[dict, dict]:
        u = {o.name: values[o.name] for o in self.base_operands}
        return u, dict(u)

    def build(self, inputs: dict[str, BV]) -> Built:
        """Both hypotheses' output element on the inputs' interpreter; goal x != y."""
        a = [inputs[f"a{i}"] for i in range(self.K)]
        b = [inputs[f"b{i}"] for i in range(self.K)]
        c = inputs["c"]
        conds = [
            cn.holds(inputs[o.name], o.fmt)
            for cn in self.constraints
            for o in self.operands
            if cn.applies_to(o.name)
        ]
        x = self.models[0].run(a, b, c)
        y = self.models[1].run(a, b, c)
        return Built(inputs, (x, y), all_of(c.b, conds), self._differ(x, y))

    def _differ(self, x: BV, y: BV) -> Bool:
        """x and y differ: in their bits, or (outputs in two formats) in their values,
        both widened exactly to fp64 (+0 and -0 differ, any two NaNs are equal)."""
        fx, fy = self.d_formats
        if fx == fy:
            return x.ne(y)
        from ..formats import Rounding, decode
        from ..model.ieee import convert

        wx = convert(x, fx, Format.FP64, Rounding.RNE)
        wy = convert(y, fy, Format.FP64, Rounding.RNE)
        both_nan = decode(x, fx).is_nan & decode(y, fy).is_nan
        return ~both_nan & wx.ne(wy)

    def emulated(self, inputs: dict[str, int]) -> tuple[int, int]:
        """Both outputs by the emulator (`matmul` on a 1×K row and a K×1 column)."""

        a = [inputs[f"a{i}"] for i in range(self.K)]
        b = [inputs[f"b{i}"] for i in range(self.K)]
        out = adapter.emulate_rows(self.models, [a], [b], [inputs["c"]])
        return (int(out[0][0]), int(out[1][0]))

    def header_lines(self) -> list[str]:
        f = self.formats
        lines = [
            f"tensorcore-smt {__version__} GEMM query {self.slug}",
            f"one output element of D = A*B + C, K={self.K}, instruction {self.instruction} "
            f"({f['a'].spec.name} x {f['b'].spec.name}, c {f['c'].spec.name} -> "
            f"d {f['d'].spec.name})",
            f"hypothesis X (out0): {self.variants[0]}",
            f"hypothesis Y (out1): {self.variants[1]}",
            f"goal: {self.goal.value}; sat means {self.goal.meaning_of_sat}; unsat proves "
            f"{self.goal.meaning_of_unsat}",
            "constraints: " + (" ".join(c.describe() for c in self.constraints) or "none"),
            f"inputs: a0..a{self.K - 1} ({f['a'].spec.name}), b0..b{self.K - 1} "
            f"({f['b'].spec.name}), c ({f['c'].spec.name})",
        ]
        return lines

    def restricted(self, extra: tuple[Constraint, ...]) -> GemmQuery:
        """The same question with more constraints."""
        return GemmQuery(
            self.variants,
            self.instruction,
            self.K,
            self.goal,
            self.constraints + tuple(extra),
            self.name,
            self.models,
        )


GEMM_GOALS = (Goal.DIFFER, Goal.EQUIVALENT)


def make_gemm_query(
    x: str,
    y: str,
    K: int,
    instr: str | None = None,
    goal: Goal = Goal.DIFFER,
    constraints: tuple[Constraint, ...] = (),
    name: str = "",
    fmt: Format | None = None,
) -> GemmQuery:
    """Resolve two GEMM hypotheses for depth K, each on `instr` or else on the instruction
    libraries run on its architecture for inputs in `fmt` (default fp16); UserError if
    they cannot be compared (other input or c formats)."""
    if goal not in GEMM_GOALS:
        raise UserError(
            f"goal {goal.value} is not asked of GEMM hypotheses; known: "
            + ", ".join(g.value for g in GEMM_GOALS)
        )
    if isinstance(K, bool) or not isinstance(K, int) or not 1 <= K <= MAX_K:
        raise UserError(f"--k: {K} is out of range; allowed: 1..{MAX_K}")
    mx = resolve(x, K, instr, fmt)
    my = resolve(y, K, instr, fmt)
    for what, u, v in (
        ("a", mx.p.a_fmt, my.p.a_fmt),
        ("b", mx.p.b_fmt, my.p.b_fmt),
        ("c", mx.c_fmt, my.c_fmt),
    ):
        if u != v:
            raise UserError(
                f"{x!r} and {y!r} differ in the format of {what} ({u.spec.name} vs "
                f"{v.spec.name}); only hypotheses with the same operand formats can be compared"
            )
    q = GemmQuery((x, y), mx.instruction, K, goal, tuple(constraints), name, (mx, my))
    names = {o.name for o in q.operands}
    for c in constraints:
        if c.kind == ConstraintKind.FIX and c.operands not in names:
            raise UserError(
                f"--fix {c.operands}: no such input; inputs are a0..a{K - 1}, b0..b{K - 1}, c"
            )
    return q


MAX_K = 1 << 16
"""The deepest GEMM a query is built for (the DAG grows with K)."""


def focus_positions(q: GemmQuery, per_block: int | None = None) -> list[int]:
    """The k-positions a focused query keeps free: every position of the first and the
    last k-block of each chain of either plan (`per_block`: only that many of each
    block's first positions)."""

    keep: set[int] = set()
    for m in q.models:
        kb = m.p.K
        for blocks in adapter.chain_blocks(m.plan):
            for j in {blocks[0], blocks[-1]}:
                n = kb if per_block is None else min(per_block, kb)
                keep.update(range(j * kb, j * kb + n))
    return sorted(k for k in keep if k < q.K)


def zero_ranges(K: int, keep: list[int], reason: str) -> tuple[Constraint, ...]:
    """ZERO_K constraints fixing every position of 0..K-1 not in `keep` to +0."""
    out = []
    kept = set(keep)
    k = 0
    while k < K:
        if k in kept:
            k += 1
            continue
        lo = k
        while k < K and k not in kept:
            k += 1
        out.append(Constraint(ConstraintKind.ZERO_K, "ab", lo=lo, hi=k, reason=reason))
    return tuple(out)


FOCUS_REASON = (
    "blocks inside chains are +0: a witness found so is a witness of the full question; "
    "an unsat answer is followed by the full query"
)


def focused(q: GemmQuery, per_block: int | None = None) -> GemmQuery:
    """`q` with the k-positions outside `focus_positions` fixed to +0."""
    return q.restricted(zero_ranges(q.K, focus_positions(q, per_block), FOCUS_REASON))


def parse_zero_k(text: str, K: int) -> Constraint:
    """`LO:HI` (a_k = b_k = +0 for LO <= k < HI) as a ZERO_K constraint."""
    m = re.fullmatch(r"\s*(\d+):(\d+)\s*", text)
    if not m:
        raise UserError(f"--zero-k: expected LO:HI, got {text!r}")
    lo, hi = int(m.group(1)), int(m.group(2))
    if not lo < hi <= K:
        raise UserError(f"--zero-k {text}: need 0 <= LO < HI <= K={K}")
    return Constraint(ConstraintKind.ZERO_K, "ab", lo=lo, hi=hi)
