"""The benchmark queries: one `BenchQuery` per question, with Valpey et al.'s (2025) Table 4 figures
for the rows it reproduces and the project's goals for the further carry-bit queries."""

from __future__ import annotations

from dataclasses import dataclass

from tensorcore_smt.smt import library
from tensorcore_smt.smt.query import Constraint, ConstraintKind, Goal, Query, make_query
from tensorcore_smt.solvers import Answer

PAPER = "Valpey et al. 2025, Table 4 (Z3 4.8.9 / cvc5 1.0.2, 32-core AMD EPYC 7502P, 6 h timeout)"
SIX_HOURS = 6 * 3600.0
BAR = 10.0  # a Table 4 row passes when our best time is at most the paper's best / BAR
VOLTA_F32 = "m8n8k4.f32.f16.f16.f32"
VOLTA_F16 = "m8n8k4.f16.f16.f16.f16"


@dataclass(frozen=True)
class BenchQuery:
    """One benchmark question and what we compare it with: a pair of variants (x, y on
    `instr`), or one query of a library property (`prop`, `prop_query`) bound to `arch`,
    with `extra` constraints added."""

    name: str
    title: str
    expect: Answer
    terms: int  # products + c in one fused group
    x: str = ""
    y: str = ""
    instr: str | None = None
    goal: Goal = Goal.DIFFER
    prop: str = ""
    prop_query: str = ""
    arch: str = "volta"
    extra: tuple[Constraint, ...] = ()
    table4: str = ""  # the Table 4 row this query reproduces
    paper_query: str = ""  # the paper's question for that row
    paper_z3: float | None = None  # Table 4's figures, seconds (None: no figure)
    paper_cvc5: float | None = None
    paper_timeout: bool = False  # Table 4 says '-': no answer within 6 h
    goal_s: float | None = None  # the project's goal (wall time) for the further queries
    family: str = ""  # a timeout skips the later queries of the same family with more terms

    def query(self, constraints: tuple[Constraint, ...] = ()) -> Query:
        if not self.prop:
            return make_query(self.x, self.y, self.instr, self.goal, constraints, self.name)
        bound = dict((spec.id, q) for spec, q in library.get(self.prop).bind(self.arch, self.instr))
        if self.prop_query not in bound:
            raise KeyError(f"property {self.prop} has no query {self.prop_query!r}")
        q = bound[self.prop_query]
        cons = q.constraints + self.extra + tuple(constraints)
        return make_query(*q.variants, q.instruction, q.goal, cons, self.name)

    @property
    def paper_best_s(self) -> float | None:
        if self.paper_timeout:
            return SIX_HOURS
        figures = [x for x in (self.paper_z3, self.paper_cvc5) if x is not None]
        return min(figures) if figures else None

    @property
    def paper(self) -> str:
        if self.paper_timeout:
            return "timeout 6 h (both)"
        if self.paper_best_s is None:
            return "—"
        return f"z3 {self.paper_z3:g} s, cvc5 {self.paper_cvc5:g} s"

    @property
    def source(self) -> str:
        """Where the query comes from, for the reader."""
        if self.prop:
            extra = "".join(f" + {c.describe()}" for c in self.extra)
            return f"{self.prop} / {self.prop_query}{extra}"
        return f"{self.x} vs {self.y}"

    @property
    def command(self) -> str:
        """A tcsmt command line that asks the same question."""
        q = self.query()
        opts = [_cli_option(c) for c in q.constraints]
        if self.prop and None in opts:  # a constraint `tcsmt diff` cannot state
            return (
                f"tcsmt find --property {self.prop} --arch {self.arch} "
                f"--instr {q.instruction}  # query {self.prop_query}"
            )
        verb = "diff" if q.goal == Goal.DIFFER else "prove"
        x, y = (v if v.isidentifier() else f"'{v}'" for v in q.variants)
        instr = f" --instr {q.instruction}" if self.prop or self.instr else ""
        return f"tcsmt {verb} {x} {y}{instr}" + "".join(f" {o}" for o in opts)


def _cli_option(c: Constraint) -> str | None:
    """The `tcsmt diff` option that states `c` (None: it has none)."""
    if c.kind in (ConstraintKind.FIX, ConstraintKind.TERMS, ConstraintKind.EXPONENT_WINDOW):
        return c.describe()
    if c.operands == "abc":
        return c.describe()
    return None


def _fix_c(bits: int, why: str) -> tuple[Constraint, ...]:
    return (Constraint(ConstraintKind.FIX, "c", bits=bits, reason=why),)


QUERIES = [
    BenchQuery(
        "mul",
        "products kept exact vs rounded to fp16 (1 product)",
        Answer.SAT,
        2,
        instr=VOLTA_F32,
        prop="precision-product",
        prop_query="exact-vs-fp16",
        table4="Exact Multiplication",
        paper_query="§4.1, Listing 1.1: an fp16 product that fp16 cannot hold",
        paper_z3=0.55,
        paper_cvc5=0.027,
    ),
    BenchQuery(
        "add16",
        "fp32 vs fp16 accumulation of a*b + c*d, fp16 output",
        Answer.SAT,
        3,
        instr=VOLTA_F16,
        prop="precision-accumulation",
        prop_query="fp32-vs-fp16-accumulation",
        table4="Exact Addition in FP16",
        paper_query="§4.1, Property 1: fp32 vs fp16 accumulation of a*b + c*d",
        paper_z3=27.59,
        paper_cvc5=0.12,
    ),
    BenchQuery(
        "rfinal",
        "fp16 output rounding RNE vs RZ (1 product, c = 0)",
        Answer.SAT,
        2,
        instr=VOLTA_F16,
        prop="rounding-final",
        prop_query="rne-vs-rz",
        extra=_fix_c(0, "Property 2 sets every value but one product to 0, c included"),
        table4="Rounding of Final Result",
        paper_query="§4.2, Property 2: RNE vs RZ of one product to fp16, the rest 0",
        paper_z3=0.52,
        paper_cvc5=0.008,
    ),
    BenchQuery(
        "racc",
        "truncating alignment vs RZ sum, a*1 + c (Table 3)",
        Answer.SAT,
        2,
        instr=VOLTA_F32,
        prop="rounding-accumulator",
        prop_query="effective-subtraction",
        table4="Rounding of Accumulator",
        paper_query="§4.2, Table 3: truncation vs RZ of a*1 + c, c of the other sign",
        paper_z3=0.34,
        paper_cvc5=0.017,
    ),
    BenchQuery(
        "order",
        "two IEEE RZ orders of three products",
        Answer.SAT,
        3,
        instr=VOLTA_F32,
        prop="ordering",
        prop_query="sequential-orders",
        table4="Accumulation Order",
        paper_query="§4.3, Property 3: two RZ orders of three products",
        paper_z3=9.87,
        paper_cvc5=0.25,
    ),
    BenchQuery(
        "norm",
        "unnormalized fused sum vs IEEE RZ additions, 2 products + c, all > 0",
        Answer.SAT,
        3,
        instr=VOLTA_F32,
        prop="normalization",
        prop_query="no-normalize-vs-ieee",
        table4="Normalization",
        paper_query="§4.3, Property 4: unnormalized vs IEEE sum of two products and c, all > 0",
        paper_z3=9.63,
        paper_cvc5=0.25,
    ),
    BenchQuery(
        "a",
        "5 terms F=23 (Volta): 2 vs 3 carry bits",
        Answer.SAT,
        5,
        "volta",
        "volta[carry_bits=2]",
        table4="3 Carry Bits",
        paper_query="§4.3: Volta's 5-term sum needs 3 carry bits",
        paper_z3=410.25,
        paper_cvc5=72.793,
        goal_s=2.0,
        family="carry",
    ),
    BenchQuery(
        "b",
        "9 terms F=24 (Ampere): 3 vs 4 carry bits",
        Answer.SAT,
        9,
        "ampere",
        "ampere[carry_bits=3]",
        "m16n8k8.f32.f16.f16.f32",
        table4="4 Carry Bits (Ampere)",
        paper_query="§4.3: Ampere's 9-term sum needs 4 carry bits",
        paper_timeout=True,
        goal_s=10.0,
        family="carry",
    ),
    BenchQuery(
        "c",
        "prove 5 terms 3 = 4 carry bits (Volta)",
        Answer.UNSAT,
        5,
        "volta",
        "volta[carry_bits=4]",
        goal=Goal.EQUIVALENT,
        goal_s=2.0,
        family="carry",
    ),
    BenchQuery(
        "e9",
        "prove 9 terms 4 = 5 carry bits (Ampere)",
        Answer.UNSAT,
        9,
        "ampere",
        "ampere[carry_bits=5]",
        "m16n8k8.f32.f16.f16.f32",
        Goal.EQUIVALENT,
        goal_s=10.0,
        family="carry",
    ),
    BenchQuery(
        "d",
        "17 terms F=25 (Hopper): 4 vs 5 carry bits",
        Answer.SAT,
        17,
        "hopper",
        "hopper[carry_bits=4]",
        "m16n8k16.f32.f16.f16.f32",
        goal_s=60.0,
        family="carry",
    ),
    BenchQuery(
        "e17",
        "prove 17 terms 5 = 6 carry bits (Hopper)",
        Answer.UNSAT,
        17,
        "hopper",
        "hopper[carry_bits=6]",
        "m16n8k16.f32.f16.f16.f32",
        Goal.EQUIVALENT,
        goal_s=60.0,
        family="carry",
    ),
]
BY_NAME = {q.name: q for q in QUERIES}
TABLE4 = [q.name for q in QUERIES if q.table4]
