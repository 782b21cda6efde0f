"""Solver times on the project's key queries beside paper 000's Table 4, and an encoding study.

Run with `python bench/bench_solvers.py` (or `make bench-solvers`). It prints:

**Table 4 reproduction.** Every row of paper 000's Table 4 (Z3 4.8.9 and cvc5 1.0.2 on a
32-core AMD EPYC 7502P, 6 h timeout) as a query of this project that asks the paper's
question, on Volta (`volta` preset, `m8n8k4` with fp16 inputs) unless the row names
another architecture:

| Table 4 row | paper's property | our query |
| --- | --- | --- |
| Exact Multiplication | §4.1, Listing 1.1: an fp16 product fp16 cannot hold | `precision-product` / `exact-vs-fp16` |
| Exact Addition in FP16 | §4.1, Property 1: fp32 vs fp16 accumulation of a*b + c*d | `precision-accumulation` / `fp32-vs-fp16-accumulation` (fp16 output) |
| Rounding of Final Result | §4.2, Property 2: RNE vs RZ of one product to fp16, the rest 0 | `rounding-final` / `rne-vs-rz` with c = 0 |
| Rounding of Accumulator | §4.2, Table 3: truncation vs RZ of a*1 + c, c of the other sign | `rounding-accumulator` / `effective-subtraction` |
| Accumulation Order | §4.3, Property 3: two RZ orders of three products | `ordering` / `sequential-orders` |
| Normalization | §4.3, Property 4: unnormalized vs IEEE sum of two products and c > 0 | `normalization` / `no-normalize-vs-ieee` |
| 3 Carry Bits | §4.3: Volta's 5-term sum needs 3 carry bits | (a) `volta` vs `volta[carry_bits=2]` |
| 4 Carry Bits (Ampere) | §4.3: Ampere's 9-term sum needs 4 (the paper: no answer in 6 h) | (b) `ampere` vs `ampere[carry_bits=3]` |

The property queries come from the property library (properties/*.toml);
the bench adds only c = 0 to `rne-vs-rz`, as Property 2 sets every other value to 0.
For each row and installed solver it reports the solver's own query time `solver_s`
(handing the SMT-LIB text to the solver's parser until `check-sat` answers: parse +
check, measured in the solver's child process; what the paper's table reports) and the
wall time of the whole run (a fresh child process: Python start-up, solver import and
model read-back included), each as best and median of --repeat runs. Beside them: the
paper's figures, the ratio paper-best / ours-best (`solver_s` of our fastest solver),
and PASS when ours-best <= paper-best / 10, else MISS. Every sat answer is re-run on
the concrete interpreter (`tensorcore_smt.query.recheck`): a witness that does not
reproduce makes the row MISS.

A calibration table follows: the paper's own formulas, written in SMT-LIB's
floating-point theory from §4 (Listing 1.1, Properties 1-3; the rows whose formulas use
the paper's own bit-vector accumulator have none), timed the same way on this machine.

**Further carry-bit queries** (proofs that one more carry bit changes nothing, and
Hopper's 17-term unit): wall time against the project's goals.

A solver that times out on a carry-bit query is not run on the later ones with more
terms (larger instances of the same question); --keep-going runs it anyway.

`--table4` runs the Table 4 rows and the calibration only; `--write DIR` also writes
DIR/table4.md (the table for a reader) and DIR/table4.json (every figure).

`python bench/bench_solvers.py --study` measures what each encoding choice buys instead
(docs/encoding.md writes the results up): fixed inputs as constants or as equations,
sign symmetry, exponent windows, the carry register, DAG sharing, and solver options.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tensorcore_smt import library
from tensorcore_smt.bv.concrete import CONCRETE
from tensorcore_smt.bv.core import BV, Bool
from tensorcore_smt.bv.smtlib import to_smtlib
from tensorcore_smt.bv.symbolic import SymbolicBackend, Term
from tensorcore_smt.formats import Format, decode, to_float
from tensorcore_smt.model import dot_add
from tensorcore_smt.query import (
    Constraint,
    ConstraintKind,
    Goal,
    Query,
    build,
    make_query,
    recheck,
    smtlib,
    symbolic,
    trivially_unsat,
)
from tensorcore_smt.solvers import Answer, SolveJob, SolveResult, available, solve

PAPER = "paper 000, Table 4 (Z3 4.8.9 / cvc5 1.0.2, 32-core AMD EPYC 7502P, 6 h timeout)"
SIX_HOURS = 6 * 3600.0
GRACE_S = 5.0  # seconds past its limit before a study child is killed
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


# --- the paper's own formulas, for calibration ------------------------------------------

_FP16 = "(_ FloatingPoint 5 11)"
_FP32 = "(_ FloatingPoint 8 24)"


def _decl(*names: str) -> str:
    return "".join(f"(declare-const {n} {_FP16})\n" for n in names)


def _f32(x: str) -> str:
    return f"((_ to_fp 8 24) RTZ {x})"


def _in_fp16(x: str) -> str:
    """x (fp32) is an fp16 value: rounding it to fp16 and back gives it again."""
    return f"(= {x} {_f32(f'((_ to_fp 5 11) RNE {x})')})"


def _finite(*xs: str) -> str:
    return "".join(f"(assert (not (or (fp.isNaN {x}) (fp.isInfinite {x}))))\n" for x in xs)


def _listing_1_1() -> str:
    """Listing 1.1: for every rounding mode the fp16 product differs from the fp32 one."""
    out = _decl("a", "b")
    for rm in ("RNE", "RTZ", "RTN", "RTP"):
        half = _f32(f"(fp.mul {rm} a b)")
        single = f"(fp.mul {rm} {_f32('a')} {_f32('b')})"
        out += f"(assert (not (= {half} {single})))\n"
    return out


def _property_1() -> str:
    """Property 1: a*b + c*d in fp16 arithmetic differs from the fp32 sum of the fp32
    products, where the fp32 sum is an fp16 value and neither product is (finite inputs)."""
    out = _decl("a", "b", "c", "d") + _finite("a", "b", "c", "d")
    out += f"(define-fun p () {_FP32} (fp.mul RNE {_f32('a')} {_f32('b')}))\n"
    out += f"(define-fun q () {_FP32} (fp.mul RNE {_f32('c')} {_f32('d')}))\n"
    out += f"(define-fun s () {_FP32} (fp.add RTZ p q))\n"
    out += f"(define-fun h () {_FP16} (fp.add RNE (fp.mul RNE a b) (fp.mul RNE c d)))\n"
    out += f"(assert (not {_in_fp16('p')}))\n(assert (not {_in_fp16('q')}))\n"
    out += f"(assert {_in_fp16('s')})\n" + _finite("s")
    out += f"(assert (not (= {_f32('h')} s)))\n"
    return out


def _property_2() -> str:
    """Property 2: one fp32 product of fp16 inputs rounded to fp16 with RNE vs RZ."""
    out = _decl("a", "b")
    out += f"(define-fun p () {_FP32} (fp.mul RNE {_f32('a')} {_f32('b')}))\n"
    out += "(assert (not (= ((_ to_fp 5 11) RNE p) ((_ to_fp 5 11) RTZ p))))\n"
    return out


def _property_3() -> str:
    """Property 3: (p1 + p2) + p3 vs p1 + (p2 + p3), RZ additions of fp32 products."""
    out = _decl("a1", "a2", "a3", "b1", "b2", "b3")
    for i in (1, 2, 3):
        out += f"(define-fun p{i} () {_FP32} (fp.mul RNE {_f32(f'a{i}')} {_f32(f'b{i}')}))\n"
    out += (
        "(assert (not (= (fp.add RTZ (fp.add RTZ p1 p2) p3) (fp.add RTZ p1 (fp.add RTZ p2 p3)))))\n"
    )
    return out


PAPER_FORMULAS: dict[str, tuple[str, Callable[[], str]]] = {
    "mul": ("Listing 1.1 (four rounding modes)", _listing_1_1),
    "add16": ("Property 1 (with its side conditions)", _property_1),
    "rfinal": ("Property 2 (RNE vs RTZ)", _property_2),
    "order": ("Property 3", _property_3),
}
"""Table 4 rows whose query the paper states in floating-point terms (§4): the formula as
SMT-LIB text. 'Rounding of Accumulator' and 'Normalization' use the paper's own
bit-vector accumulator, and the carry-bit rows its parametric model: no text to rewrite."""


# --- the floor: the smallest formulas, timed the same way ---------------------------------

_BARE_RFINAL = """(declare-fun a () (_ BitVec 16))
(declare-fun b () (_ BitVec 16))
(define-fun p () (_ BitVec 22) (bvmul ((_ zero_extend 11) (concat #b1 ((_ extract 9 0) a)))
                                      ((_ zero_extend 11) (concat #b1 ((_ extract 9 0) b)))))
(define-fun hi () Bool (= ((_ extract 21 21) p) #b1))
(define-fun rest () (_ BitVec 11) (ite hi ((_ extract 10 0) p) (concat #b0 ((_ extract 9 0) p))))
(define-fun half () (_ BitVec 11) (ite hi #b10000000000 #b01000000000))
(define-fun lsb () Bool (= #b1 (ite hi ((_ extract 11 11) p) ((_ extract 10 10) p))))
(assert (not (= ((_ extract 14 10) a) #b00000)))
(assert (not (= ((_ extract 14 10) b) #b00000)))
(assert (or (bvugt rest half) (and (= rest half) lsb)))
"""

FLOOR_FORMULAS: dict[str, tuple[str, str]] = {
    "one variable": (
        "`x = 0x3c00` for one 16-bit x: what any query costs",
        "(declare-fun x () (_ BitVec 16))\n(assert (= x #x3c00))\n",
    ),
    "bare rfinal": (
        "the question of Rounding of Final Result and nothing else: two normal fp16 "
        "significands whose 22-bit product rounds differently to 11 bits under RNE and RZ "
        "(no exponents, subnormals, specials, alignment or unit)",
        _BARE_RFINAL,
    ),
}
"""Formulas smaller than any model query, timed like the queries: the cost below which
no encoding of a Table 4 question can go on this machine (docs/encoding.md, study x)."""


# --- machine ---------------------------------------------------------------------------


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": mem_gib,
        "python": platform.python_version(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "source": source_revision(),
    }


def source_revision() -> str:
    """The package's version and git commit (marked when the package differs from it)."""
    from tensorcore_smt import __version__

    root = Path(__file__).resolve().parent.parent
    try:
        rev = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "tensorcore_smt"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"tensorcore-smt {__version__}"
    return f"tensorcore-smt {__version__} at {rev}" + (
        " with uncommitted changes in tensorcore_smt/" if dirty else ""
    )


def solver_versions(solvers: list[str]) -> dict[str, str]:
    """Each solver's own version string (asked in a child, like every solver call)."""
    out = {}
    for s in solvers:
        r = solve(SolveJob("(declare-fun v () (_ BitVec 1))\n", ("v",), timeout=10), s)
        out[s] = r.version or available().get(s, "?")
    return out


def machine_line(info: dict, versions: dict[str, str]) -> list[str]:
    load = info.get("load_average")
    load_s = " / ".join(f"{x:.2f}" for x in load) if load else "?"
    return [
        f"machine: {info['cores']} cores, {info['cpu']}, {info['memory_gib']} GiB, "
        f"Python {info['python']}; load average at start {load_s} (1/5/15 min)",
        "solvers: " + ", ".join(f"{k} {v}" for k, v in versions.items()),
        f"model: {info.get('source', '?')}",
    ]


def print_machine(info: dict, versions: dict[str, str]) -> None:
    for line in machine_line(info, versions):
        print(line)


# --- the benchmark ---------------------------------------------------------------------


@dataclass
class Run:
    answer: Answer
    seconds: float  # wall time of the run (a fresh child process)
    reason: str = ""
    reproduces: bool | None = None  # sat only: the concrete re-check
    solver_s: float | None = None  # the solver's own parse + check time


@dataclass
class Cell:
    """One solver on one query: its runs."""

    solver: str
    runs: list[Run] = field(default_factory=list)
    skipped: str = ""

    @property
    def definite(self) -> list[Run]:
        return [r for r in self.runs if r.answer.definite]

    @property
    def answer(self) -> Answer:
        d = self.definite
        return d[0].answer if d else Answer.UNKNOWN

    @property
    def best(self) -> float | None:
        """Best wall time of the definite runs."""
        d = self.definite
        return min(r.seconds for r in d) if d else None

    @property
    def median(self) -> float | None:
        if self.runs and len(self.definite) == len(self.runs):
            return statistics.median(r.seconds for r in self.runs)
        return None

    @property
    def best_solver(self) -> float | None:
        """Best solver_s of the definite runs."""
        d = [r.solver_s for r in self.definite if r.solver_s is not None]
        return min(d) if d else None

    @property
    def median_solver(self) -> float | None:
        d = [r.solver_s for r in self.runs if r.solver_s is not None]
        if self.runs and len(self.definite) == len(self.runs) and len(d) == len(self.runs):
            return statistics.median(d)
        return None

    @property
    def typical_solver(self) -> float | None:
        """The figure a row is judged by: the median solver_s over the runs (each run
        has its own seed, so a local search's luck on one seed does not count), or the
        one run's figure."""
        return self.median_solver if self.median_solver is not None else self.best_solver

    @property
    def bad_witness(self) -> bool:
        return any(r.reproduces is False for r in self.runs)


def run_solver(q: Query, text: str, solver: str, timeout: float, seed: int = 0) -> Run:
    names = tuple(o.name for o in q.operands) + q.output_names
    r = solve(SolveJob(text, names, timeout=timeout, seed=seed), solver)
    return _as_run(q, r)


def _as_run(q: Query | None, r: SolveResult) -> Run:
    run = Run(r.answer, r.seconds, r.reason, solver_s=r.solver_s)
    if r.answer == Answer.SAT and q is not None:
        run.reproduces = recheck(q, r.model).reproduces
    return run


def fmt_s(x: float) -> str:
    if x >= 100:
        return f"{x:.0f} s"
    if x >= 10:
        return f"{x:.1f} s"
    if x >= 0.1:
        return f"{x:.2f} s"
    if x >= 0.01:
        return f"{x * 1000:.0f} ms"
    return f"{x * 1000:.1f} ms"


def _unanswered(c: Cell, timeout: float) -> str | None:
    if c.skipped:
        return "not run"
    if c.best is None:
        reasons = {r.reason for r in c.runs}
        if reasons and all("timeout" in x for x in reasons):
            return f"> {timeout:g} s"
        return "unknown: " + "; ".join(sorted(reasons))[:40]
    return None


def _tag(c: Cell) -> str:
    """The answer; for sat, 'ok' when every witness was re-checked and reproduced."""
    tag = c.answer.value
    if c.answer == Answer.SAT:
        if c.bad_witness:
            tag += " BAD"
        elif all(r.reproduces for r in c.definite):
            tag += " ok"
    return tag


def cell_text(c: Cell, timeout: float) -> str:
    """Wall time: best (median)."""
    missing = _unanswered(c, timeout)
    if missing:
        return missing
    text = fmt_s(c.best)
    if c.median is not None and len(c.runs) > 1:
        text += f" (med {fmt_s(c.median)})"
    return f"{text} {_tag(c)}"


def solver_cell_text(c: Cell, timeout: float, wall: bool = True) -> str:
    """Query time: best (median), and the best wall time."""
    missing = _unanswered(c, timeout)
    if missing:
        return missing
    if c.best_solver is None:
        return cell_text(c, timeout)
    if c.median_solver is not None and len(c.runs) > 1:
        text = (
            f"{fmt_s(c.median_solver)} (median of {len(c.runs)} seeds; best {fmt_s(c.best_solver)})"
        )
    else:
        text = fmt_s(c.best_solver)
    if wall:
        text += f"; wall {fmt_s(c.best)}"
    return f"{text} {_tag(c)}"


def measure(
    q: Query | None, text: str, names: tuple[str, ...], solver: str, args: argparse.Namespace
) -> Cell:
    """--repeat runs of one solver, run i with seed i (only one when the first takes
    longer than --slow)."""
    c = Cell(solver)
    for i in range(args.repeat):
        r = solve(SolveJob(text, names, timeout=args.timeout, seed=i), solver)
        c.runs.append(_as_run(q, r))
        if not r.answer.definite or (i == 0 and r.seconds > args.slow):
            break
    return c


def bench(args: argparse.Namespace, solvers: list[str], picked: list[BenchQuery]) -> list[dict]:
    timed_out: dict[tuple[str, str], BenchQuery] = {}
    rows = []
    for bq in picked:
        q = bq.query()
        t0 = time.perf_counter()
        backend, _ = symbolic(q)
        text = smtlib(q)
        build_s = time.perf_counter() - t0
        names = tuple(o.name for o in q.operands) + q.output_names
        cells = []
        for s in solvers:
            prev = timed_out.get((bq.family, s)) if bq.family else None
            if prev is not None and bq.terms > prev.terms and not args.keep_going:
                cells.append(Cell(s, skipped=f"timed out on ({prev.name}) with fewer terms"))
                continue
            c = measure(q, text, names, s, args)
            cells.append(c)
            print(f"  ({bq.name}) {s}: {solver_cell_text(c, args.timeout)}", file=sys.stderr)
            if c.best is None and bq.family:
                timed_out.setdefault((bq.family, s), bq)
        rows.append(_row(bq, q, cells, args.timeout, backend.node_count(), len(text), build_s))
    return rows


def _cell_json(c: Cell, timeout: float) -> dict:
    return {
        "solver": c.solver,
        "skipped": c.skipped,
        "answer": c.answer.value,
        "best_solver_s": c.best_solver,
        "median_solver_s": c.median_solver,
        "best_s": c.best,
        "median_s": c.median,
        "runs": [_run_json(r) for r in c.runs],
        "text": solver_cell_text(c, timeout),
        "wall_text": cell_text(c, timeout),
    }


def _row(bq: BenchQuery, q: Query, cells: list[Cell], timeout: float, nodes, chars, build_s):
    answered = [c for c in cells if c.best is not None]
    answers = {c.answer for c in answered}
    note = ""
    if len(answers) > 1:
        note = "solvers disagree"
    elif answers and answers != {bq.expect}:
        note = f"expected {bq.expect.value}"
    elif any(c.bad_witness for c in cells):
        note = "a witness did not reproduce"
    elif not answers:
        note = "no answer"
    timed = [c for c in answered if c.typical_solver is not None]
    fastest = min(timed, key=lambda c: c.typical_solver) if timed else None
    fastest_wall = min(answered, key=lambda c: c.best) if answered else None
    row = {
        "query": bq.name,
        "title": bq.title,
        "table4": bq.table4,
        "source": bq.source,
        "command": bq.command,
        "variants": list(q.variants),
        "instruction": q.instruction,
        "constraints": [c.describe() for c in q.constraints],
        "goal": q.goal.value,
        "expected": bq.expect.value,
        "terms": bq.terms,
        "nodes": nodes,
        "smtlib_chars": chars,
        "build_s": round(build_s, 4),
        "timeout_s": timeout,
        "cells": [_cell_json(c, timeout) for c in cells],
        "note": note,
    }
    if bq.table4:
        paper_best = bq.paper_best_s
        ours = fastest.typical_solver if fastest else None
        ratio = paper_best / ours if ours else None
        row.update(
            paper_query=bq.paper_query,
            paper_z3_s=bq.paper_z3,
            paper_cvc5_s=bq.paper_cvc5,
            paper_timeout=bq.paper_timeout,
            paper=bq.paper,
            paper_best_s=paper_best,
            bar_s=paper_best / BAR,
            fastest=fastest.solver if fastest else None,
            fastest_solver_s=ours,
            ratio_paper_over_ours=ratio,
            verdict="PASS"
            if not note and ours is not None and ours <= paper_best / BAR
            else "MISS",
        )
    else:
        ok = not note and fastest_wall is not None and fastest_wall.best <= bq.goal_s
        row.update(
            goal_s=bq.goal_s,
            fastest=fastest_wall.solver if fastest_wall else None,
            fastest_s=fastest_wall.best if fastest_wall else None,
            verdict="PASS" if ok else "MISS",
        )
    return row


def calibrate(args: argparse.Namespace, solvers: list[str], picked: list[str]) -> list[dict]:
    """The paper's own formulas (PAPER_FORMULAS) timed like our queries (no model to
    re-check: the text declares floating-point constants)."""
    out = []
    for name, (what, formula) in PAPER_FORMULAS.items():
        if name not in picked:
            continue
        bq = BY_NAME[name]
        text = formula()
        cells = []
        for s in solvers:
            c = measure(None, text, (), s, args)
            cells.append(c)
            print(f"  paper {name} {s}: {solver_cell_text(c, args.timeout)}", file=sys.stderr)
        timed = [c for c in cells if c.typical_solver is not None]
        fastest = min(timed, key=lambda c: c.typical_solver) if timed else None
        answers = {c.answer for c in cells if c.best is not None}
        out.append(
            {
                "query": name,
                "table4": bq.table4,
                "formula": what,
                "smtlib": text,
                "cells": [_cell_json(c, args.timeout) for c in cells],
                "answers": sorted(a.value for a in answers),
                "paper_z3_s": bq.paper_z3,
                "paper_cvc5_s": bq.paper_cvc5,
                "paper_best_s": bq.paper_best_s,
                "fastest": fastest.solver if fastest else None,
                "fastest_solver_s": fastest.typical_solver if fastest else None,
                "ratio_paper_over_ours": (
                    bq.paper_best_s / fastest.typical_solver if fastest else None
                ),
            }
        )
    return out


def floor(args: argparse.Namespace, solvers: list[str]) -> list[dict]:
    """FLOOR_FORMULAS timed like the queries, on every solver."""
    out = []
    for name, (what, text) in FLOOR_FORMULAS.items():
        cells = []
        for sv in solvers:
            c = measure(None, text, (), sv, args)
            cells.append(c)
            print(f"  floor {name} {sv}: {solver_cell_text(c, args.timeout)}", file=sys.stderr)
        out.append(
            {
                "formula": name,
                "what": what,
                "smtlib": text,
                "cells": [_cell_json(c, args.timeout) for c in cells],
            }
        )
    return out


def floor_rows(fl: list[dict], solvers: list[str]) -> tuple[list[str], list[list[str]]]:
    solvers = paper_order(solvers)
    header = ["formula", "what it is", *(f"{s} solver_s" for s in solvers)]
    body = [[r["formula"], r["what"], *_by_solver(r["cells"], solvers)] for r in fl]
    return header, body


FLOOR_NOTE = (
    "The bar of Rounding of Final Result is 0.8 ms. A model query of that question has to "
    "describe the unit (exponents, alignment, normalization, subnormal and special inputs "
    "and outputs, two variants) on top of the bare question."
)


# --- output ------------------------------------------------------------------------------


def _ratio_text(r: dict) -> str:
    ratio = r.get("ratio_paper_over_ours")
    if ratio is None:
        return "—"
    lower = "> " if r.get("paper_timeout") else ""
    digits = 0 if ratio >= 100 else 1 if ratio >= 1 else 2
    return f"{lower}{ratio:,.{digits}f}x ({r['fastest']})"


def _verdict_text(r: dict) -> str:
    return r["verdict"] + (f" ({r['note']})" if r["note"] else "")


def _paper_cell(x: float | None, timeout: bool) -> str:
    if timeout:
        return "> 6 h"
    return "—" if x is None else f"{x:g} s"


def paper_order(solvers: list[str]) -> list[str]:
    """The paper's solvers first (z3, cvc5), then the others as given."""
    first = [s for s in ("z3", "cvc5") if s in solvers]
    return first + [s for s in solvers if s not in first]


def _by_solver(cells: list[dict], solvers: list[str]) -> list[str]:
    texts = {c["solver"]: c["text"] for c in cells}
    return [texts.get(s, "—") for s in solvers]


def table4_rows(
    rows: list[dict], solvers: list[str], md: bool = False
) -> tuple[list[str], list[list[str]]]:
    solvers = paper_order(solvers)
    header = [
        "Table 4 row",
        "our query" + (" (reproduce with)" if md else ""),
        *(f"{s} solver_s" for s in solvers),
        "paper z3",
        "paper cvc5",
        "bar (paper best / 10)",
        "paper / ours",
        "verdict",
    ]
    body = []
    for r in rows:
        if not r["table4"]:
            continue
        query = f"({r['query']}) {r['source']}"
        if md:
            query += f": `{r['command']}`"
        body.append(
            [
                r["table4"],
                query,
                *_by_solver(r["cells"], solvers),
                _paper_cell(r["paper_z3_s"], r["paper_timeout"]),
                _paper_cell(r["paper_cvc5_s"], r["paper_timeout"]),
                fmt_s(r["bar_s"]),
                _ratio_text(r),
                _verdict_text(r),
            ]
        )
    return header, body


def calibration_rows(cal: list[dict], solvers: list[str]) -> tuple[list[str], list[list[str]]]:
    solvers = paper_order(solvers)
    header = [
        "Table 4 row",
        "the paper's formula",
        *(f"{s} solver_s" for s in solvers),
        "paper z3",
        "paper cvc5",
        "paper / ours",
    ]
    body = [
        [
            r["table4"],
            r["formula"],
            *_by_solver(r["cells"], solvers),
            _paper_cell(r["paper_z3_s"], False),
            _paper_cell(r["paper_cvc5_s"], False),
            _ratio_text(r),
        ]
        for r in cal
    ]
    return header, body


def further_rows(rows: list[dict], solvers: list[str]) -> tuple[list[str], list[list[str]]]:
    header = ["query", "answer", *(f"{s} wall" for s in solvers), "goal", "vs goal"]
    body = []
    for r in rows:
        if r["table4"]:
            continue
        answer = r["expected"] if not r["note"] else "?"
        body.append(
            [
                f"({r['query']}) {r['title']}",
                answer,
                *(c["wall_text"] for c in r["cells"]),
                f"<= {r['goal_s']:g} s",
                _verdict_text(r),
            ]
        )
    return header, body


def print_plain(header: list[str], body: list[list[str]]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body)]
    line = "  ".join("-" * w for w in widths)
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print(line)
    for b in body:
        print("  ".join(str(x).ljust(w) for x, w in zip(b, widths)).rstrip())
    print(line)


def markdown(header: list[str], body: list[list[str]]) -> list[str]:
    def esc(x: str) -> str:
        return str(x).replace("|", "\\|")

    out = ["| " + " | ".join(esc(h) for h in header) + " |"]
    out.append("|" + "|".join(" --- " for _ in header) + "|")
    out += ["| " + " | ".join(esc(x) for x in b) + " |" for b in body]
    return out


TABLE4_NOTES = [
    "solver_s: the solver's own query time, from handing it the SMT-LIB text to its "
    "check-sat answer (parse + check), measured inside the solver's child process once "
    "the solver is made: the figure compared with the paper. Run i uses seed i; each cell "
    "gives the median over the runs (the figure judged) and the best run; wall: the best "
    "wall time of the whole run (a fresh Python process, solver import and model "
    "read-back included).",
    "sat ok: the witness re-checked on the concrete interpreter reproduces (BAD: it does "
    "not). paper / ours: the paper's best figure for the row over our median solver_s. "
    "PASS: ours <= paper / 10 with the expected answer and every witness reproducing.",
]
CALIBRATION_NOTE = (
    "The paper's own formulas, written in SMT-LIB floating-point theory from its section 4, "
    "timed the same way on this machine with these solvers: what today's solvers here need "
    "for the paper's question in the paper's encoding. They search the fp16 inputs directly, "
    "as our queries do; the paper's footnote 7 says that where it could it first searched "
    "fp32 values (a smaller query) and then fp16 factors of them, so its figures for those "
    "rows may time that smaller query."
)


def print_results(result: dict, solvers: list[str], timeout: float) -> None:
    rows = result.get("rows", [])
    if any(r["table4"] for r in rows):
        print(f"\nTable 4 reproduction ({PAPER})\n")
        print_plain(*table4_rows(rows, solvers))
        for n in TABLE4_NOTES:
            print(n)
        print(f"'> {timeout:g} s': no answer within the timeout")
    if result.get("calibration"):
        print("\nCalibration\n")
        print_plain(*calibration_rows(result["calibration"], solvers))
        print(CALIBRATION_NOTE)
    if result.get("floor"):
        print("\nThe floor: formulas smaller than any query\n")
        print_plain(*floor_rows(result["floor"], solvers))
        print(FLOOR_NOTE)
    if any(not r["table4"] for r in rows):
        print("\nFurther carry-bit queries (wall time against the project's goals)\n")
        print_plain(*further_rows(rows, solvers))
        print(
            "times: wall seconds of one solver run in a fresh child process, best of the runs "
            "('med' the median); 'not run' after a timeout on a query with fewer terms "
            "(--keep-going runs it)"
        )
    print("\nqueries:")
    for r in rows:
        print(f"  ({r['query']}) {r['command']}    [{r['instruction']}, {r['terms']} terms]")


def write_table4(result: dict, solvers: list[str], directory: Path) -> list[Path]:
    """DIR/table4.md for a reader and DIR/table4.json with every figure."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = [r for r in result["rows"] if r["table4"]]
    info, versions = result["machine"], result["solvers"]
    end = result.get("load_average_end")
    verdicts = [r["verdict"] for r in rows]
    docs = Path(
        os.path.relpath(
            Path(__file__).resolve().parent.parent / "docs" / "encoding.md", directory.resolve()
        )
    ).as_posix()
    md = [
        "# Paper 000, Table 4, reproduced",
        "",
        "Generated by `python bench/bench_solvers.py --table4 --write results/` "
        f"({result['repeat']} run(s) per cell, one when the first takes over "
        f"{result['slow_s']:g} s; timeout {result['timeout_s']:g} s per run). "
        f"{verdicts.count('PASS')} of {len(rows)} rows meet the bar (our median query time "
        f"at most the paper's best / {BAR:g}). The solvers' options, and why the property "
        "rows are far harder to bring under the bar than the carry-bit rows: "
        f"[docs/encoding.md]({docs}), studies (vii), (viii) and (x).",
        "",
        *(f"- {line}" for line in machine_line(info, versions)),
    ]
    if end:
        md.append(f"- load average at end {end[0]:.2f} / {end[1]:.2f} / {end[2]:.2f}")
    md += [f"- {PAPER}", "", *markdown(*table4_rows(rows, solvers, md=True)), ""]
    md += [*TABLE4_NOTES, ""]
    if result.get("calibration"):
        md += ["## Calibration: the paper's own formulas here", "", CALIBRATION_NOTE, ""]
        md += [*markdown(*calibration_rows(result["calibration"], solvers)), ""]
    if result.get("floor"):
        md += ["## The floor: formulas smaller than any query", ""]
        md += [*markdown(*floor_rows(result["floor"], solvers)), "", FLOOR_NOTE, ""]
    md += ["## The queries", ""]
    md += ["| row | the paper's question | our query | instruction | constraints | size |"]
    md.append("| --- | --- | --- | --- | --- | --- |")
    md += [
        f"| {r['table4']} | {r['paper_query']} | {r['source']} | {r['instruction']} "
        f"| {' '.join(r['constraints']) or 'none'} "
        f"| {r['smtlib_chars']:,} chars, {r['nodes']} nodes |"
        for r in rows
    ]
    md.append("")
    (directory / "table4.md").write_text("\n".join(md))
    data = {k: v for k, v in result.items() if k != "rows"}
    data["rows"] = rows
    (directory / "table4.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    return [directory / "table4.md", directory / "table4.json"]


# --- study helpers -----------------------------------------------------------------------


def body_of(roots: list[Term]) -> str:
    """SMT-LIB2 text as the solvers get it (no check-sat)."""
    return to_smtlib(roots).replace("(check-sat)\n", "")


def with_equalities(q: Query) -> tuple[str, int]:
    """The query with a variable for every input, fixed inputs tied by an equation (the
    alternative to the constants `query._symbolic_inputs` uses): text and node count."""
    s = SymbolicBackend()
    inputs = {o.name: s.var(o.name, o.width) for o in q.operands}
    built = build(q, inputs)  # FIX constraints become `input = bits` equations here
    roots = [built.constraint.v, built.goal.v]
    for name, out in zip(q.output_names, built.outputs):
        roots.append(s.var(name, out.w).eq(out).v)
    return body_of(roots), s.node_count()


def dag_sizes(roots: list[Term]) -> tuple[int, int]:
    """Nodes reachable from the roots, and the size of the same formula as a tree
    (every shared node repeated at each use: what the text would be without sharing)."""
    tree: dict[int, int] = {}
    stack = list(roots)
    while stack:
        t = stack[-1]
        if t.uid in tree:
            stack.pop()
            continue
        pending = [a for a in t.args if a.uid not in tree]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        tree[t.uid] = 1 + sum(tree[a.uid] for a in t.args)
    return len(tree), sum(tree[r.uid] for r in roots)


def oddness_query(
    variant: str, instr: str | None
) -> tuple[str, Query, Callable[[dict[str, int]], tuple[bool, int, int]]]:
    """SMT-LIB text whose models are inputs where f(-a, b, -c) is not -f(a, b, c) (and
    not both NaN, not both zero): unsat means the variant is an odd function, the
    premise of the sign-symmetry restriction. Returns text, query and a concrete check."""
    q = make_query(variant, variant, instr)
    p = q.p

    def formula(inputs: dict[str, BV]) -> tuple[Bool, BV, BV]:
        a = [inputs[f"a{i}"] for i in range(p.K)]
        b = [inputs[f"b{i}"] for i in range(p.K)]
        c = inputs["c"]
        sa = 1 << (p.a_fmt.spec.storage - 1)
        sc = 1 << (p.c_fmt.spec.storage - 1)
        sd = 1 << (p.d_fmt.spec.storage - 1)
        out = dot_add(a, b, c, p)
        mirrored = dot_add([x ^ sa for x in a], b, c ^ sc, p)
        u, m = decode(out, p.d_fmt), decode(mirrored, p.d_fmt)
        odd = mirrored.eq(out ^ sd) | (u.is_nan & m.is_nan) | (u.is_zero & m.is_zero)
        return ~odd, out, mirrored

    s = SymbolicBackend()
    inputs = {o.name: s.var(o.name, o.width) for o in q.operands}
    text = body_of([formula(inputs)[0].v])

    def concrete(model: dict[str, int]) -> tuple[bool, int, int]:
        """(the counterexample holds, f(a, b, c), f(-a, b, -c)) on the concrete model."""
        vals = {o.name: BV.const(CONCRETE, model.get(o.name, 0), o.width) for o in q.operands}
        bad, out, mirrored = formula(vals)
        return bool(bad.v), int(out.v), int(mirrored.v)

    return text, q, concrete


def decode_value(bits: int, fmt: Format) -> str:
    """The value of an output bit pattern, for the reader."""
    return repr(to_float(bits, fmt))


def study_table(title: str, header: list[str], body: list[list], notes: list[str]) -> None:
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(" --- " for _ in header) + "|")
    for b in body:
        print("| " + " | ".join(str(x) for x in b) + " |")
    for n in notes:
        print(f"\n{n}")
    sys.stdout.flush()


def timed(q: Query, text: str, solver: str, timeout: float) -> Run:
    r = run_solver(q, text, solver, timeout)
    print(f"  {q.name or q.slug} {solver}: {run_text(r, timeout)}", file=sys.stderr)
    return r


def seeded(q: Query, text: str, solver: str, args: argparse.Namespace) -> list[Run]:
    """One run per seed 0..--seeds-1 (z3's time in particular depends on the seed)."""
    runs = []
    for seed in range(args.seeds):
        r = run_solver(q, text, solver, args.timeout, seed)
        print(f"  {q.name} {solver} seed {seed}: {run_text(r, args.timeout)}", file=sys.stderr)
        runs.append(r)
    return runs


def run_text(r: Run | None, timeout: float) -> str:
    if r is None:
        return "—"
    if not r.answer.definite:
        return f"> {timeout:g} s" if "timeout" in r.reason else f"unknown ({r.reason[:40]})"
    tag = r.answer.value
    if r.reproduces is not None:
        tag += " ok" if r.reproduces else " BAD"
    return f"{fmt_s(r.seconds)} {tag}"


def study_solvers(solvers: list[str]) -> list[str]:
    return [s for s in ("bitwuzla", "z3") if s in solvers]


# --- studies -----------------------------------------------------------------------------


def witness_for(bq: BenchQuery, timeout: float) -> dict[str, int]:
    q = bq.query()
    names = tuple(o.name for o in q.operands) + q.output_names
    r = solve(SolveJob(smtlib(q), names, timeout=timeout), "bitwuzla")
    if r.answer != Answer.SAT or not recheck(q, r.model).reproduces:
        raise RuntimeError(f"no re-checked witness for ({bq.name}): {r.answer.value} {r.reason}")
    return r.model


def study_fixed(args, solvers) -> dict:
    """(i) fixed inputs as constants (the current encoding) vs as equations."""
    out = []
    body = []
    wit_a = witness_for(BY_NAME["a"], args.timeout)
    wit_b = witness_for(BY_NAME["b"], args.timeout)
    witness = {"a": wit_a, "c": wit_a, "b": wit_b}
    for name in ("a", "b", "c"):
        bq = BY_NAME[name]
        q0 = bq.query()
        fixes = tuple(
            Constraint(ConstraintKind.FIX, o.name, bits=witness[name][o.name])
            for o in q0.operands
            if o.name != "c"
        )
        q = bq.query(fixes)
        s_const, _ = symbolic(q)
        variants = [
            ("all inputs free (reference)", q0, smtlib(q0), symbolic(q0)[0].node_count()),
            ("a, b fixed: constants (current)", q, smtlib(q), s_const.node_count()),
            ("a, b fixed: equations", q, *with_equalities(q)),
        ]
        for label, qq, text, nodes in variants:
            runs = {s: seeded(qq, text, s, args) for s in study_solvers(solvers)}
            body.append(
                [f"({name})", label, nodes, f"{len(text):,}"]
                + [_seed_text(runs.get(s), args.timeout) for s in ("bitwuzla", "z3")]
            )
            out.append(
                {
                    "query": name,
                    "variant": label,
                    "nodes": nodes,
                    "chars": len(text),
                    "runs": {s: [_run_json(r) for r in rs] for s, rs in runs.items()},
                }
            )
    study_table(
        f"(i) Fixed inputs: constants or equations ({_seeds(args)}: best / median)",
        ["query", "encoding", "nodes", "SMT-LIB chars", "bitwuzla", "z3"],
        body,
        [
            "a and b fixed to the bits of a re-checked bitwuzla witness of (a) (used for (c) "
            "too) or of (b); c stays free. 'nodes': the symbolic backend's node table."
        ],
    )
    return {"fixed": out}


def study_sign(args, solvers) -> dict:
    """(ii) sign symmetry: c >= 0, and a solver check of its premise (oddness)."""
    out = {"restriction": [], "oddness": []}
    body = []
    pos = (Constraint(ConstraintKind.POSITIVE, "c"),)
    for name in ("a", "b", "c"):
        bq = BY_NAME[name]
        for label, q in (("none", bq.query()), ("c >= 0", bq.query(pos))):
            text = smtlib(q)
            runs = {s: seeded(q, text, s, args) for s in study_solvers(solvers)}
            body.append(
                [f"({name})", label]
                + [_seed_text(runs.get(s), args.timeout) for s in ("bitwuzla", "z3")]
            )
            out["restriction"].append(
                {
                    "query": name,
                    "constraint": label,
                    "runs": {s: [_run_json(r) for r in rs] for s, rs in runs.items()},
                }
            )
    study_table(
        f"(ii) Sign symmetry: c >= 0 ({_seeds(args)}: best / median)",
        ["query", "restriction", "bitwuzla", "z3"],
        body,
        [],
    )
    body = []
    for variant, instr in (
        ("volta", None),
        ("volta[carry_bits=2]", None),
        ("volta[carry_bits=4]", None),
        ("volta[carry_bits=2,carry_overflow=renormalize]", None),
        ("volta[rounding=rtn]", None),
        ("ampere", "m16n8k8.f32.f16.f16.f32"),
        ("ampere[carry_bits=3]", "m16n8k8.f32.f16.f16.f32"),
    ):
        text, q, concrete = oddness_query(variant, instr)
        names = tuple(o.name for o in q.operands)
        r = solve(SolveJob(text, names, timeout=args.timeout), "bitwuzla")
        run = Run(r.answer, r.seconds, r.reason)
        example = ""
        if r.answer == Answer.SAT:
            run.reproduces, f_x, f_mx = concrete(r.model)
            d_fmt = q.p.d_fmt
            example = ", ".join(f"{k}={r.model[k]:#x}" for k in names if k in r.model)
            example += (
                f"; f(a, b, c) = {f_x:#x} ({decode_value(f_x, d_fmt)}), "
                f"f(-a, b, -c) = {f_mx:#x} ({decode_value(f_mx, d_fmt)})"
            )
        print(f"  odd {variant}: {run_text(run, args.timeout)}", file=sys.stderr)
        verdict = {Answer.UNSAT: "odd", Answer.SAT: "not odd"}.get(r.answer, "?")
        shown = example.split("; ")[-1] if example else ""
        body.append([f"`{variant}`", verdict, run_text(run, args.timeout), shown])
        out["oddness"].append(
            {
                "variant": variant,
                "answer": r.answer.value,
                "run": _run_json(run),
                "example": example,
            }
        )
    study_table(
        "(ii b) Is f(-a, b, -c) = -f(a, b, c) for every input? (bitwuzla)",
        ["variant", "verdict", "bitwuzla", "counterexample (outputs)"],
        body,
        [
            "unsat = odd: negating every a_k and c negates the output (or both are NaN, or "
            "both zero). 'sat ok': a counterexample the concrete interpreter reproduces."
        ],
    )
    return {"sign": out}


WINDOWS = [
    ("a", "ab=15:15", (Constraint(ConstraintKind.EXPONENT_WINDOW, "ab", 15, 15),)),
    ("a", "abc=15:15", (Constraint(ConstraintKind.EXPONENT_WINDOW, "abc", 15, 15),)),
    ("a", "abc=0:0", (Constraint(ConstraintKind.EXPONENT_WINDOW, "abc", 0, 0),)),
    (
        "a",
        "ab=0:0, c=1:1",
        (
            Constraint(ConstraintKind.EXPONENT_WINDOW, "ab", 0, 0),
            Constraint(ConstraintKind.EXPONENT_WINDOW, "c", 1, 1),
        ),
    ),
    ("b", "ab=15:15", (Constraint(ConstraintKind.EXPONENT_WINDOW, "ab", 15, 15),)),
    ("b", "abc=15:15", (Constraint(ConstraintKind.EXPONENT_WINDOW, "abc", 15, 15),)),
    ("b", "abc=0:0", (Constraint(ConstraintKind.EXPONENT_WINDOW, "abc", 0, 0),)),
    (
        "b",
        "ab=0:0, c=1:1",
        (
            Constraint(ConstraintKind.EXPONENT_WINDOW, "ab", 0, 0),
            Constraint(ConstraintKind.EXPONENT_WINDOW, "c", 1, 1),
        ),
    ),
]


def study_window(args, solvers) -> dict:
    """(iii) exponent windows: a restriction can turn a satisfiable query unsat."""
    out = []
    body = []
    for name, label, cons in [(n, "none", ()) for n in ("a", "b")] + WINDOWS:
        bq = BY_NAME[name]
        q = bq.query(cons)
        r = timed(q, smtlib(q), "bitwuzla", args.timeout)
        body.append([f"({name})", label, run_text(r, args.timeout)])
        out.append({"query": name, "window": label, "run": _run_json(r)})
    study_table(
        "(iii) Exponent windows (bitwuzla)",
        ["query", "--exponent-window", "bitwuzla"],
        body,
        [
            "A window LO:HI keeps zero or 2^LO <= |x| < 2^(HI+1) for the inputs named; "
            "fp16 normal exponents are -14..15."
        ],
    )
    return {"window": out}


def static_variant(variant: str, instr: str | None) -> str:
    """The variant a static bound would build: the unbounded accumulator when the sum of
    n terms each below 2^int_bits units can never reach 2^(int_bits + carry_bits)."""
    p = make_query(variant, variant, instr).p
    if p.carry_bits is not None and min(p.L, p.K) + 1 <= (1 << p.carry_bits):
        base = variant.split("[")[0]
        over = variant[len(base) :].strip("[]")
        kept = [x for x in over.split(",") if x and not x.startswith("carry_bits")]
        return f"{base}[{','.join(kept + ['carry_bits=none'])}]"
    return variant


def study_carry(args, solvers) -> dict:
    """(iv) the carry register: what the solver proves vs what a static bound would fold."""
    out = []
    body = []
    for name in ("a", "c", "b", "e9", "d", "e17"):
        bq = BY_NAME[name]
        q = bq.query()
        p = q.p
        n = min(p.L, p.K) + 1
        sx, sy = static_variant(bq.x, bq.instr), static_variant(bq.y, bq.instr)
        qs = make_query(sx, sy, bq.instr, bq.goal, name=f"{name} static")
        now = {s: timed(q, smtlib(q), s, args.timeout) for s in study_solvers(solvers)}
        t0 = time.perf_counter()
        folded = trivially_unsat(qs)
        fold_s = time.perf_counter() - t0
        if folded:
            static = {s: None for s in study_solvers(solvers)}
            static_text = f"by construction ({fold_s * 1000:.0f} ms)"
        else:
            text = smtlib(qs)
            static = {s: timed(qs, text, s, args.timeout) for s in study_solvers(solvers)}
            static_text = " / ".join(run_text(static[s], args.timeout) for s in static)
        bits = f"carry {p.carry_bits} vs {q.params[1].carry_bits}"
        body.append(
            [
                f"({name})",
                f"{n} terms, {bits}",
                " / ".join(run_text(now[s], args.timeout) for s in now),
                f"`{sx}` vs `{sy}`",
                static_text,
            ]
        )
        out.append(
            {
                "query": name,
                "terms": n,
                "carry_bits": [p.carry_bits, q.params[1].carry_bits],
                "static_variants": [sx, sy],
                "by_construction": folded,
                "fold_s": fold_s,
                "now": {s: _run_json(r) for s, r in now.items()},
                "static": {s: _run_json(r) for s, r in static.items() if r is not None},
            }
        )
    premise = []
    for name, x, instr in (
        ("c'", "volta", None),
        ("e9'", "ampere", "m16n8k8.f32.f16.f16.f32"),
        ("e17'", "hopper", "m16n8k16.f32.f16.f16.f32"),
    ):
        y = static_variant(x, instr)
        q = make_query(x, y, instr, Goal.EQUIVALENT, name=name)
        text = smtlib(q)
        runs = {s: timed(q, text, s, args.timeout) for s in study_solvers(solvers)}
        premise.append(
            [
                f"({name})",
                f"`{x}` = `{y}`",
                " / ".join(run_text(r, args.timeout) for r in runs.values()),
            ]
        )
        out.append(
            {"query": name, "variants": [x, y], "runs": {s: _run_json(r) for s, r in runs.items()}}
        )
    solver_names = " / ".join(study_solvers(solvers))
    study_table(
        "(iv) The carry register: built always (now) or only when a static bound fails",
        ["query", "group", f"now: {solver_names}", "with the static bound", solver_names],
        body,
        [
            "Static bound: a group of n terms, each below 2^int_bits units of 2^e_max, sums "
            "below n * 2^int_bits <= 2^(int_bits + carry_bits) when n <= 2^carry_bits, so the "
            "register can be replaced by the unbounded accumulator (`carry_bits=none`)."
        ],
    )
    study_table(
        "(iv b) The bound's premise, proved by the solver: the preset's register never overflows",
        ["query", "proof", solver_names],
        premise,
        [],
    )
    return {"carry": out}


def study_dag(args, solvers) -> dict:
    """(v) hash-consing: node counts, text size, and the tree the sharing avoids."""
    out = []
    body = []
    for bq in QUERIES:
        q = bq.query()
        t0 = time.perf_counter()
        s, built = symbolic(q)
        text = smtlib(q)
        build_s = time.perf_counter() - t0
        roots = [built.constraint.v, built.goal.v, *(o.v for o in built.outputs)]
        reachable, tree = dag_sizes(roots)
        defs = text.count("(define-fun")
        body.append(
            [
                f"({bq.name})",
                bq.terms,
                s.node_count(),
                reachable,
                defs,
                f"{tree:.2e}",
                f"{len(text):,}",
                f"{build_s * 1000:.0f} ms",
            ]
        )
        out.append(
            {
                "query": bq.name,
                "table_nodes": s.node_count(),
                "reachable_nodes": reachable,
                "define_funs": defs,
                "tree_nodes": tree,
                "chars": len(text),
                "build_s": build_s,
            }
        )
    study_table(
        "(v) DAG sharing",
        [
            "query",
            "terms",
            "node table",
            "reachable",
            "define-funs",
            "as a tree",
            "SMT-LIB chars",
            "build + print",
        ],
        body,
        [
            "'as a tree': nodes of the same formula with every shared subterm repeated at each "
            "use, i.e. the size of the text without sharing (let-free, define-free)."
        ],
    )
    return {"dag": out}


BITWUZLA_OWN = {"PROP_FIRST": 0, "BV_SOLVER": "bitblast", "PP_NORMALIZE": True}
"""bitwuzla's own defaults in place of the back end's (no local-search phase first,
the normalization pass on): the configuration before study (vii)."""

BITWUZLA_CONFIGS = [
    ("default (PROP_FIRST=250000, BV_SOLVER=preprop, PP_NORMALIZE=false)", {}),
    ("bitwuzla's own (PROP_FIRST=0, BV_SOLVER=bitblast, PP_NORMALIZE=true)", BITWUZLA_OWN),
    ("ABSTRACTION=false", {"ABSTRACTION": False}),
    ("REWRITE_LEVEL=1", {"REWRITE_LEVEL": 1}),
    ("PREPROCESS=false", {"PREPROCESS": False}),
    ("PP_VARIABLE_SUBST_NORM_BV_INEQ=true", {"PP_VARIABLE_SUBST_NORM_BV_INEQ": True}),
    ("SAT_SOLVER=kissat", {"SAT_SOLVER": "kissat"}),
    ("SAT_SOLVER=cms", {"SAT_SOLVER": "cms"}),
]
CVC5_CONFIGS = [
    ("default", {}),
    ("bitblast=eager", {"bitblast": "eager"}),
    ("bitblast=eager, bv-assert-input", {"bitblast": "eager", "bv-assert-input": "true"}),
]


def study_options(args, solvers) -> dict:
    """(vi) solver options, each run in a fresh child through this script's own driver."""
    out = {"bitwuzla": [], "cvc5": []}
    seeds = list(range(args.seeds))
    names = ("a", "b", "c", "d")
    texts = {bq.name: (bq.query(), smtlib(bq.query())) for bq in QUERIES}
    body = []
    if "bitwuzla" in solvers:
        for label, opts in BITWUZLA_CONFIGS:
            row = [f"`{label}`"]
            for n in names:
                q, text = texts[n]
                runs = [drive(q, text, "bitwuzla", opts, args.timeout, sd) for sd in seeds]
                row.append(_seed_text(runs, args.timeout))
                out["bitwuzla"].append(
                    {"config": label, "query": n, "runs": [_run_json(r) for r in runs]}
                )
                if any("not compiled in" in r.reason for r in runs):
                    break
            row += [""] * (len(names) + 1 - len(row))
            body.append(row)
        study_table(
            f"(vi) bitwuzla options ({_seeds(args)}: best / median)",
            ["option", *(f"({n})" for n in names)],
            body,
            [],
        )
    body = []
    if "cvc5" in solvers:
        cnames = ("a", "c", "b", "e9", "d", "e17")
        for label, opts in CVC5_CONFIGS:
            row = [f"`{label}`"]
            timed_out_at = None
            for n in cnames:
                q, text = texts[n]
                if timed_out_at is not None and BY_NAME[n].terms > BY_NAME[timed_out_at].terms:
                    row.append("not run")
                    continue
                r = drive(q, text, "cvc5", opts, args.timeout, 0)
                if not r.answer.definite:
                    timed_out_at = timed_out_at or n
                row.append(run_text(r, args.timeout))
                out["cvc5"].append({"config": label, "query": n, "run": _run_json(r)})
            body.append(row)
        study_table(
            "(vi b) cvc5 options (seed 0)",
            ["option", *(f"({n})" for n in cnames)],
            body,
            [],
        )
    return {"options": out}


SMALL_CONFIGS = [
    ("bitwuzla's own: PROP_FIRST=0, BV_SOLVER=bitblast, PP_NORMALIZE=true", BITWUZLA_OWN),
    ("PROP_FIRST=0, BV_SOLVER=bitblast", {"PROP_FIRST": 0, "BV_SOLVER": "bitblast"}),
    ("PROP_FIRST=0, BV_SOLVER=preprop, PP_NORMALIZE=true", {"PROP_FIRST": 0, "PP_NORMALIZE": True}),
    ("PROP_FIRST=0", {"PROP_FIRST": 0}),
    ("PROP_FIRST=100000", {"PROP_FIRST": 100_000}),
    ("default: PROP_FIRST=250000", {}),
    ("PROP_FIRST=1000000", {"PROP_FIRST": 1_000_000}),
]
"""(label, bitwuzla options on top of the back end's): `PROP_FIRST` is the budget of the
local-search phase (0: none), the rest apply to the bit-blasting phase."""


def study_small(args, solvers) -> dict:
    """(vii) bitwuzla options on the Table 4 rows and the carry-bit queries (a), (c),
    (b), (e9): the solver's own query time (solver_s), each run in a fresh child. The
    configurations take turns on each query and seed, so that a change in the machine's
    load during the study reaches them all alike."""
    out = []
    names = [*TABLE4, "c", "e9"]
    runs: dict[tuple[str, str], list[Run]] = {}
    for n in names:
        q = BY_NAME[n].query()
        text = smtlib(q)
        for sd in range(args.seeds):
            for label, opts in SMALL_CONFIGS:
                r = drive(q, text, "bitwuzla", opts, args.timeout, sd)
                runs.setdefault((label, n), []).append(r)
    body = []
    for label, _ in SMALL_CONFIGS:
        row = [f"`{label}`"]
        for n in names:
            rs = runs[(label, n)]
            row.append(_seed_text(rs, args.timeout, solver_s=True))
            out.append({"config": label, "query": n, "runs": [_run_json(r) for r in rs]})
        body.append(row)
    study_table(
        f"(vii) bitwuzla options on small queries (solver_s, {_seeds(args)}: best / median)",
        ["option", *(f"({n})" for n in names)],
        body,
        ["solver_s: parse + check inside the child, the figure Table 4 compares."],
    )
    return {"small": out}


def _seeds(args: argparse.Namespace) -> str:
    return "seed 0" if args.seeds == 1 else f"seeds 0..{args.seeds - 1}"


def _seed_text(runs: list[Run] | None, timeout: float, solver_s: bool = False) -> str:
    if not runs:
        return "—"
    if len(runs) == 1 and not solver_s:
        return run_text(runs[0], timeout)
    bad = [r for r in runs if not r.answer.definite]
    if bad and "not compiled in" in bad[0].reason:
        return "not compiled in"
    if bad:
        return f"> {timeout:g} s ({len(bad)}/{len(runs)})"
    ts = [r.solver_s if solver_s and r.solver_s is not None else r.seconds for r in runs]
    answers = {r.answer.value for r in runs}
    tag = "/".join(sorted(answers))
    if runs[0].answer == Answer.SAT:
        tag += " BAD" if any(r.reproduces is False for r in runs) else " ok"
    return f"{fmt_s(min(ts))} / {fmt_s(statistics.median(ts))} {tag}"


def _run_json(r: Run) -> dict:
    return {
        "answer": r.answer.value,
        "seconds": round(r.seconds, 3),
        "solver_s": None if r.solver_s is None else round(r.solver_s, 6),
        "reason": r.reason,
        "reproduces": r.reproduces,
    }


# --- the study's own solver driver (options the back ends do not set) ---------------------


def drive(q: Query, text: str, solver: str, opts: dict, timeout: float, seed: int) -> Run:
    """Run `solver` with `opts` on `text` in a fresh child; wall time of the child."""
    names = [o.name for o in q.operands] + list(q.output_names)
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        path = Path(tmp) / "query.smt2"
        path.write_text(text)
        cmd = [sys.executable, __file__, "--driver", solver, str(path), json.dumps(opts)]
        cmd += [repr(timeout), str(seed), ",".join(names)]
        t0 = time.monotonic()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout + GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return Run(Answer.UNKNOWN, time.monotonic() - t0, f"timeout after {timeout:g} s")
        seconds = time.monotonic() - t0
    try:
        data = json.loads(stdout.decode().strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        err = stderr.decode(errors="replace").strip().splitlines()
        return Run(Answer.UNKNOWN, seconds, err[-1][:200] if err else f"exit {proc.returncode}")
    run = Run(Answer(data["answer"]), seconds, data.get("reason", ""), None, data.get("solver_s"))
    if run.answer == Answer.SAT:
        run.reproduces = recheck(q, {k: int(v) for k, v in data["model"].items()}).reproduces
    print(f"  {q.name} {solver} {opts} seed {seed}: {run_text(run, timeout)}", file=sys.stderr)
    return run


def driver_main(argv: list[str]) -> int:
    solver, path, opts_json, timeout_s, seed_s, names_s = argv
    opts, timeout, seed = json.loads(opts_json), float(timeout_s), int(seed_s)
    names = [n for n in names_s.split(",") if n]
    text = Path(path).read_text()
    out: dict = {"answer": "unknown", "model": {}, "reason": ""}
    try:
        from tensorcore_smt.solvers.backends import BACKENDS

        outcome = BACKENDS[solver].solve(text, names, timeout, seed, extra_options=opts)
        answer, model, reason, solver_s = outcome
        out.update(answer=answer, model={k: str(v) for k, v in model.items()}, solver_s=solver_s)
        if reason:
            out["reason"] = reason
    except Exception as e:  # noqa: BLE001 - reported to the parent as the reason
        out["reason"] = f"{type(e).__name__}: {str(e).strip()[:200]}"
    print(json.dumps(out))
    return 0


# --- main --------------------------------------------------------------------------------

STUDIES = {
    "fixed": study_fixed,
    "sign": study_sign,
    "window": study_window,
    "carry": study_carry,
    "dag": study_dag,
    "options": study_options,
    "small": study_small,
}
ROMAN = {
    "i": "fixed",
    "ii": "sign",
    "iii": "window",
    "iv": "carry",
    "v": "dag",
    "vi": "options",
    "vii": "small",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--driver"]:
        return driver_main(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--solvers", help="comma-separated (default: every installed solver)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per solver run")
    ap.add_argument("--repeat", type=int, default=5, help="runs per query and solver")
    ap.add_argument(
        "--slow",
        type=float,
        default=5.0,
        help="a solver whose first run on a query takes longer (wall seconds) runs it once",
    )
    ap.add_argument(
        "--only", action="append", help=f"query names, comma-separated ({', '.join(BY_NAME)})"
    )
    ap.add_argument(
        "--table4", action="store_true", help="only paper 000's Table 4 rows and the calibration"
    )
    ap.add_argument(
        "--write", type=Path, metavar="DIR", help="write DIR/table4.md and DIR/table4.json"
    )
    ap.add_argument(
        "--no-calibration", action="store_true", help="skip timing the paper's own formulas"
    )
    ap.add_argument("--keep-going", action="store_true", help="no skipping after a timeout")
    ap.add_argument("--json", type=Path, help="write the raw results to this file")
    ap.add_argument(
        "--study",
        nargs="?",
        const="all",
        help=f"run the encoding study instead: all, or some of {', '.join(STUDIES)} (or i..vii)",
    )
    ap.add_argument("--seeds", type=int, default=3, help="seeds per option in the study")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    if args.only:
        args.only = {n.strip() for x in args.only for n in x.split(",") if n.strip()}
        unknown = args.only - set(BY_NAME)
        if unknown:
            ap.error(f"--only: no query {', '.join(sorted(unknown))}; known: {', '.join(BY_NAME)}")
    picked_q = [
        q
        for q in QUERIES
        if (not args.only or q.name in args.only) and (not args.table4 or q.table4)
    ]
    if args.write and not any(q.table4 for q in picked_q):
        ap.error("--write: no Table 4 row among the queries picked")
    inst = available()
    solvers = [s.strip() for s in args.solvers.split(",")] if args.solvers else list(inst)
    missing = [s for s in solvers if s not in inst]
    if missing:
        ap.error(f"not installed: {', '.join(missing)} (installed: {', '.join(inst)})")
    picked: list[str] = []
    if args.study:
        names = list(STUDIES) if args.study == "all" else args.study.split(",")
        for x in names:
            key = ROMAN.get(x.strip().lower(), x.strip().lower())
            if key not in STUDIES:
                ap.error(f"--study: no study {x!r}; known: {', '.join(STUDIES)} (or i..vii)")
            picked.append(key)
    info = machine()
    versions = solver_versions(solvers)
    print_machine(info, versions)
    t0 = time.monotonic()
    result: dict = {"machine": info, "solvers": versions, "timeout_s": args.timeout}
    if picked:
        print(f"encoding study: {', '.join(picked)}; timeout {args.timeout:g} s per run")
        for key in picked:
            result.update(STUDIES[key](args, solvers))
    else:
        print(
            f"timeout {args.timeout:g} s per run, {args.repeat} run(s) per query and solver "
            f"(1 when the first takes over {args.slow:g} s)"
        )
        result.update(repeat=args.repeat, slow_s=args.slow, bar=BAR)
        result["rows"] = bench(args, solvers, picked_q)
        if not args.no_calibration:
            names = [q.name for q in picked_q if q.table4]
            result["calibration"] = calibrate(args, solvers, names)
            if any(BY_NAME[n].table4 for n in names):
                result["floor"] = floor(args, solvers)
    elapsed = time.monotonic() - t0
    result["elapsed_s"] = elapsed
    result["load_average_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    if not picked:
        print_results(result, solvers, args.timeout)
    print(f"\ntotal {elapsed:.0f} s; load average at end {result['load_average_end'][0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
        print(f"raw results: {args.json}")
    if args.write and not picked:
        for path in write_table4(result, solvers, args.write):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
