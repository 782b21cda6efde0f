"""Queries as data: declared inputs, the variants compared, constraints, and a goal.

Most goals compare two variants X and Y on the same inputs. The `non-monotone` goal
instead evaluates one variant X twice, on inputs u and u_2 >= u (Fasi et al. §III-D5):
the operands of the groups that grow are declared a second time with the suffix `_2`
(`c_2`, or `a0_2 .. b3_2, c_2`), the others are shared by both evaluations.

A `Query` is built on any interpreter. On the symbolic one it becomes SMT-LIB2 text
for the solvers (and for `tcsmt export`); on the concrete one it re-checks a solver's
witness: the same code decides what the solver was asked and whether its answer holds.
(About 620 lines, one module on purpose: building a query and re-checking its witness
must stay side by side so that they cannot drift apart.)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from fractions import Fraction

from ..bv.concrete import CONCRETE
from ..bv.core import BV, Bool, all_of
from ..bv.smtlib import to_smtlib
from ..bv.symbolic import SymbolicBackend
from ..errors import UserError
from ..formats import (
    EXP_W,
    Format,
    Unpacked,
    decode,
    format_hex,
    max_finite_bits,
    parse_hex,
    payload,
    value_of,
)
from ..model import dot_add
from ..model.exact import exact_dot, grid, on_grid_checked, value_on_grid
from ..model.measure import Measure, exceeds, reference_terms
from ..model.params import ModelParams, Sparsity
from ..model.sparse import describe_metadata, metadata_for
from ..model.sparse import positions as sparse_positions
from ..model.terms import operand_addend
from ..spec.presets import parse_variant
from ..version import __version__


class Goal(Enum):
    """What a query asks of its two variants X and Y."""

    DIFFER = "differ"  # sat: inputs where X and Y give different bits
    EQUIVALENT = "equivalent"  # unsat: X and Y agree on every input (same formula as DIFFER)
    COMPARE_ERRORS = "compare-errors"  # sat: inputs where |X - exact| < |Y - exact|
    # sat: inputs u <= u_2 (the groups in Query.grows grow, the rest are equal) with
    # X(u_2) < X(u); unsat: X is monotone in that sense (Fasi et al. §III-D5)
    NON_MONOTONE = "non-monotone"
    # sat: inputs where X's error (Query.measure, against the exact result or against Y)
    # exceeds Query.threshold; unsat: the threshold bounds X's error on every input
    ERROR_EXCEEDS = "error-exceeds"

    @property
    def one_variant(self) -> bool:
        """Whether the goal asks about one variant X (on two inputs), not two."""
        return self == Goal.NON_MONOTONE

    @property
    def meaning_of_sat(self) -> str:
        return {
            Goal.DIFFER: "inputs on which the variants' outputs differ",
            Goal.EQUIVALENT: "a counterexample: inputs on which the variants differ",
            Goal.COMPARE_ERRORS: "inputs on which the first variant's error is smaller",
            Goal.NON_MONOTONE: "inputs u <= u_2 on which X(u_2) < X(u)",
            Goal.ERROR_EXCEEDS: "inputs on which X's error exceeds the threshold",
        }[self]

    @property
    def meaning_of_unsat(self) -> str:
        return {
            Goal.COMPARE_ERRORS: "X is never more accurate than Y",
            Goal.NON_MONOTONE: "X never decreases when its inputs grow as the relation says",
            Goal.ERROR_EXCEEDS: "the threshold bounds X's error on every input",
        }.get(self, "X and Y equal on every input")


EXACT = "exact"  # the reference of an error-exceeds query that is not a second variant
SECOND = "_2"  # suffix of the second input set's operands (goal non-monotone)
GROW_GROUPS = "abc"


def split_name(name: str) -> tuple[str, int | None, bool]:
    """`a3_2` -> ("a", 3, True); `c` -> ("c", None, False): operand group, index, and
    whether the operand belongs to the second input set."""
    m = re.fullmatch(r"([abc])(\d*)(_2)?", name)
    if not m:
        raise ValueError(f"not an operand name: {name!r}")
    return m.group(1), int(m.group(2)) if m.group(2) else None, bool(m.group(3))


class ConstraintKind(Enum):
    """Input restrictions a query may carry."""

    POSITIVE = "positive"  # sign bit clear
    NEGATIVE = "negative"  # sign bit set
    FINITE = "finite"  # no Inf, no NaN
    NORMAL_ONLY = "normal-only"  # zero or a normal finite number
    NONZERO = "nonzero"  # not zero
    EXPONENT_WINDOW = "exponent-window"  # zero, or 2^lo <= |x| < 2^(hi+1)
    FIX = "fix"  # one input has a given bit pattern
    # only products 0..lo-1 are free; a_k = b_k = +0 for k >= lo (a sparse query: for k
    # >= hi, the position just after the lo-th product the metadata keeps)
    TERMS = "terms"
    ZERO_K = "zero-k"  # a_k = b_k = +0 for lo <= k < hi (a GEMM's K: blocks left out)
    REPRESENTABLE = "representable"  # zero or a normal number of the narrower format `fmt`
    INTEGER = "integer"  # an integer of at most `lo` bits: |x| <= 2^lo - 1 (Ozaki slices)
    # |c| + sum |a_k b_k| at most the output format's largest finite number: no exact
    # magnitude overflows (a constraint on all inputs together, see `class_holds`)
    NO_OVERFLOW = "no-overflow"
    # |c| + sum |a_k b_k| at least the output format's smallest normal number (or every
    # input zero): the exact magnitudes do not lie in the output's underflow range
    NO_UNDERFLOW = "no-underflow"
    # a_k = +0 at the positions `positions` the metadata of a structured-sparse
    # instruction does not select (Query.meta: the uncompressed row of A)
    UNSELECTED = "unselected"


GLOBAL_KINDS = frozenset({ConstraintKind.NO_OVERFLOW, ConstraintKind.NO_UNDERFLOW})
"""Constraints on the inputs together, not on each operand."""

ZERO_KINDS = frozenset({ConstraintKind.TERMS, ConstraintKind.ZERO_K, ConstraintKind.UNSELECTED})
"""Constraints that fix the inputs they apply to at +0."""


@dataclass(frozen=True)
class Constraint:
    """One input restriction. `operands` picks the operand groups it applies to
    (letters of "abc"), or, for FIX, the single input named (`a0`, `b3`, `c`)."""

    kind: ConstraintKind
    operands: str = "abc"
    lo: int | None = None
    hi: int | None = None
    bits: int | None = None
    reason: str = ""
    fmt: Format | None = None  # REPRESENTABLE: the narrower format
    positions: tuple[int, ...] = ()  # UNSELECTED: the k where a_k = +0
    meta_text: str = ""  # UNSELECTED: the metadata as --meta takes it

    def applies_to(self, name: str) -> bool:
        """Whether the constraint restricts input `name` (both input sets of a
        non-monotone query alike, except FIX, which names one input)."""
        if self.kind == ConstraintKind.FIX:
            return name == self.operands
        if self.kind in GLOBAL_KINDS:
            return False
        group, index, _ = split_name(name)
        if self.kind == ConstraintKind.TERMS:
            return group in "ab" and index >= (self.lo if self.hi is None else self.hi)
        if self.kind == ConstraintKind.ZERO_K:
            return group in "ab" and self.lo <= index < self.hi
        if self.kind == ConstraintKind.UNSELECTED:
            return group == "a" and index in self.positions
        return group in self.operands

    def holds(self, x: BV, fmt: Format) -> Bool:
        """Whether the input `x` (format `fmt`) satisfies this constraint."""
        u = decode(x, fmt)
        b = x.b
        finite = ~u.is_inf & ~u.is_nan
        if self.kind == ConstraintKind.POSITIVE:
            return ~u.sign
        if self.kind == ConstraintKind.NEGATIVE:
            return u.sign
        if self.kind in ZERO_KINDS:
            return x.eq(0)
        if self.kind == ConstraintKind.FINITE:
            return finite
        if self.kind == ConstraintKind.NONZERO:
            return ~u.is_zero
        if self.kind == ConstraintKind.NORMAL_ONLY:
            return finite & (u.is_zero | u.sig.bit(u.mbits))
        if self.kind == ConstraintKind.EXPONENT_WINDOW:
            return finite & (u.is_zero | _lead_in(u, self.lo, self.hi))
        if self.kind == ConstraintKind.FIX:
            return x.eq(self.bits)
        if self.kind == ConstraintKind.INTEGER:
            return finite & (u.is_zero | _integer(u, self.lo))
        if self.kind == ConstraintKind.REPRESENTABLE:
            # the bits fmt has no room for are zero, and the exponent is in its normal range
            t = self.fmt.spec
            drop = u.mbits - t.mbits
            low = x.extract(drop - 1, 0).eq(0) if drop > 0 else Bool.const(b, True)
            return finite & (u.is_zero | (_lead_in(u, t.emin, t.emax) & low))
        raise AssertionError(self.kind)

    def describe(self) -> str:
        """The constraint as the command-line option that sets it."""
        if self.kind == ConstraintKind.FIX:
            return f"--fix {self.operands}={self.bits:#x}"
        if self.kind == ConstraintKind.TERMS:
            return f"--terms {self.lo}"
        if self.kind == ConstraintKind.ZERO_K:
            return f"--zero-k {self.lo}:{self.hi}"
        if self.kind == ConstraintKind.UNSELECTED:
            return f"--meta {self.meta_text}"
        sel = "" if self.operands == "abc" else f"{self.operands}="
        if self.kind == ConstraintKind.EXPONENT_WINDOW:
            return f"--exponent-window {sel}{self.lo}:{self.hi}"
        if self.kind == ConstraintKind.REPRESENTABLE:
            return f"--representable {sel}{self.fmt.spec.name}"
        if self.kind == ConstraintKind.INTEGER:
            return f"--integer {sel}{self.lo}"
        return f"--{self.kind.value}" + (f" {self.operands}" if sel else "")


def _lead_in(u: Unpacked, lo: int, hi: int) -> Bool:
    """Whether 2^lo <= |u| < 2^(hi+1): the exponent of the leading one (exp minus the
    significand's leading zeros) lies in [lo, hi]."""
    b = u.exp.b
    lead = u.exp - u.sig.clz().resize(EXP_W)
    return lead.sge(BV.const(b, lo, EXP_W)) & lead.sle(BV.const(b, hi, EXP_W))


def _integer(u: Unpacked, bits: int) -> Bool:
    """Whether a nonzero finite u is an integer with |u| <= 2^bits - 1: its leading one
    below 2^bits and no significand bit below 2^0 (value = sig 2^(exp - mbits))."""
    b = u.exp.b
    lead = u.exp - u.sig.clz().resize(EXP_W)
    small = lead.slt(BV.const(b, bits, EXP_W))
    # k = mbits - exp fraction bits of sig lie below 2^0; they must be zero
    k = BV.const(b, u.mbits, EXP_W) - u.exp
    w = u.sig.w
    kk = k.smax(0).smin(w).resize(w)
    frac_zero = (u.sig << (BV.const(b, w, w) - kk)).eq(0) | kk.eq(0)
    return small & frac_zero


def parse_integer(text: str) -> Constraint:
    """`P` or `OPERANDS=P` (e.g. `ab=7`): inputs that are integers of at most P bits."""
    m = re.fullmatch(r"\s*(?:([abc]+)=)?(\d+)\s*", text)
    if not m or int(m.group(2)) < 1:
        raise UserError(f"--integer: expected P or OPERANDS=P with P >= 1 bits, got {text!r}")
    return Constraint(ConstraintKind.INTEGER, m.group(1) or "abc", lo=int(m.group(2)))


def parse_window(text: str) -> Constraint:
    """`LO:HI` or `OPERANDS=LO:HI` (e.g. `ab=-15:14`) as an exponent-window constraint."""
    m = re.fullmatch(r"\s*(?:([abc]+)=)?(-?\d+):(-?\d+)\s*", text)
    if not m:
        raise UserError(f"--exponent-window: expected LO:HI or OPERANDS=LO:HI, got {text!r}")
    lo, hi = int(m.group(2)), int(m.group(3))
    if lo > hi:
        raise UserError(f"--exponent-window: LO {lo} is above HI {hi}")
    return Constraint(ConstraintKind.EXPONENT_WINDOW, m.group(1) or "abc", lo, hi)


def parse_representable(text: str) -> Constraint:
    """`FMT` or `OPERANDS=FMT` (e.g. `ab=fp16`): inputs that are zero or normal FMT numbers."""
    m = re.fullmatch(r"\s*(?:([abc]+)=)?([A-Za-z0-9_]+)\s*", text)
    if not m:
        raise UserError(f"--representable: expected FMT or OPERANDS=FMT, got {text!r}")
    try:
        fmt = Format.parse(m.group(2))
    except ValueError as e:
        raise UserError(f"--representable: {e}") from None
    return Constraint(ConstraintKind.REPRESENTABLE, m.group(1) or "abc", fmt=fmt)


@dataclass(frozen=True)
class Operand:
    """One declared input: its SMT name (a0.., b0.., c) and format."""

    name: str
    fmt: Format

    @property
    def width(self) -> int:
        return self.fmt.spec.storage


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
            return _safe(self.name)
        if self.goal.one_variant:
            return _safe(f"{self.goal.value}_{self.variants[0]}_{self.grows}_{self.instruction}")
        return _safe(
            f"{self.goal.value}_{self.variants[0]}_vs_{self.variants[1]}_{self.instruction}"
        )

    def build(self, inputs: dict[str, BV]) -> Built:
        """The query's formula on the interpreter of `inputs` (see `build`)."""
        return build(self, inputs)

    def header_lines(self) -> list[str]:
        """What an exported SMT-LIB2 file says about the query in its comments."""
        return _header(self)

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


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=+-]+", "_", text).strip("_")


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
) -> Query:
    """Resolve two variant expressions on one instruction; UserError if they cannot be
    compared (different instruction shapes or operand formats). A structured-sparse
    instruction is asked for the metadata `meta` (see `with_meta`).

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
    if goal.one_variant:
        return with_meta(_make_one_variant_query(a, b, instr, goal, constraints, name, grows), meta)
    if grows:
        raise UserError(f"grow={grows!r} applies only to goal {Goal.NON_MONOTONE.value}")
    if not b:
        raise UserError(f"goal {goal.value} compares two variants X and Y; Y is missing")
    va, vb = parse_variant(a), parse_variant(b)
    inst = va.instruction(instr)
    try:
        inst_b = vb.instruction(instr or inst.name)
    except UserError:
        raise UserError(
            f"{b!r} has no instruction {inst.name!r} (the default of {a!r}); "
            f"pick a common one with --instr"
        ) from None
    pa, pb = va.params(inst.name), vb.params(inst_b.name)
    for what in ("K", "n_a", "a_fmt", "b_fmt", "c_fmt", "d_fmt"):
        if getattr(pa, what) != getattr(pb, what):
            raise UserError(
                f"{a!r} and {b!r} differ in {what} on {inst.name}; only variants of one "
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
    )
    _check_fixes(q)
    return with_meta(q, meta)


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


def parse_fix(text: str, q_operands: list[Operand]) -> Constraint:
    """`a0=0x3c00` as a FIX constraint, the hex checked against the input's format."""
    if "=" not in text:
        raise UserError(f"--fix: expected NAME=HEX, got {text!r}")
    name, value = (s.strip() for s in text.split("=", 1))
    ops = {o.name: o for o in q_operands}
    if name not in ops:
        raise UserError(f"--fix {name}: no such input; inputs are {', '.join(ops)}")
    return Constraint(ConstraintKind.FIX, name, bits=parse_hex(value, ops[name].fmt, name))


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
        goal = _error_exceeds(q, x, y, a, b, c)
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
            goal = _more_accurate(x, y, a, b, c, pa)
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
    """The inputs the class fixes: --fix NAME=HEX, and +0 where a constraint of
    ZERO_KINDS leaves products (or a sparse row's entries) out."""
    out: dict[str, int] = {}
    for cn in q.constraints:
        if cn.kind == ConstraintKind.FIX:
            out[cn.operands] = cn.bits
        elif cn.kind in ZERO_KINDS:
            out.update({o.name: 0 for o in q.operands if cn.applies_to(o.name)})
    return out


def scale_inputs(u: dict, p: ModelParams) -> tuple[list | None, list | None]:
    """The scale factors sa0.., sb0.. among the inputs `u` when `p` takes them (None,
    None otherwise: a variant without block scaling ignores them)."""
    if p.scale_fmt is None or "sa0" not in u:
        return None, None
    n = p.n_scales
    return [u[f"sa{i}"] for i in range(n)], [u[f"sb{i}"] for i in range(n)]


def _order_key(x: BV, fmt: Format) -> tuple[Bool, BV]:
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
    nx, kx = _order_key(x, fmt)
    ny, ky = _order_key(y, fmt)
    return ~nx & ~ny & kx.sle(ky)


def value_lt(x: BV, y: BV, fmt: Format) -> Bool:
    """x < y as real numbers; false if either is NaN."""
    nx, kx = _order_key(x, fmt)
    ny, ky = _order_key(y, fmt)
    return ~nx & ~ny & kx.slt(ky)


def _more_accurate(x: BV, y: BV, a: list[BV], b: list[BV], c: BV, p: ModelParams) -> Bool:
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


def _finite(bits: BV, fmt: Format) -> Bool:
    u = decode(bits, fmt)
    return ~u.is_inf & ~u.is_nan


def _group_range(group: str, fmt: Format, constraints: tuple[Constraint, ...]):
    """(lsb, top) of operand group `group` ("a", "b" or "c") in the class: every value is a
    multiple of 2^lsb below 2^top; None when the class fixes the group to zero."""
    s = fmt.spec
    lsb, top = s.emin - s.mbits, s.emax + 1
    for cn in constraints:
        if cn.kind == ConstraintKind.FIX:
            if cn.operands != group:
                continue
            v = value_of(cn.bits, fmt)
            if isinstance(v, float):
                continue
            if v == 0:
                return None
            num, den = abs(v).numerator, abs(v).denominator
            low = (num & -num).bit_length() - den.bit_length()
            high = num.bit_length() - den.bit_length() + 1
            lsb, top = max(lsb, low), min(top, high)
        elif cn.kind in GLOBAL_KINDS or group not in cn.operands:
            continue
        elif cn.kind == ConstraintKind.EXPONENT_WINDOW:
            lsb, top = max(lsb, cn.lo - s.mbits), min(top, cn.hi + 1)
        elif cn.kind == ConstraintKind.INTEGER:
            lsb, top = max(lsb, 0), min(top, cn.lo)
        elif cn.kind == ConstraintKind.REPRESENTABLE:
            t = cn.fmt.spec
            lsb, top = max(lsb, t.emin - t.mbits), min(top, t.emax + 1)
    return lsb, max(top, lsb + 1)


def class_grid(p: ModelParams, constraints: tuple[Constraint, ...]) -> tuple[int, int]:
    """(lsb, width): a grid that holds every input of the class, every product and their
    exact sum (model/exact.py's grid, narrowed by the class's exponent windows, integer
    and representable constraints and fixed inputs). Outputs may fall off it: an error
    query counts such an output as exceeding any threshold, so an unsat answer on the
    narrow grid is a proof for the class (and a witness is measured exactly)."""
    ra = _group_range("a", p.a_fmt, constraints)
    rb = _group_range("b", p.b_fmt, constraints)
    rc = _group_range("c", p.c_fmt, constraints)
    lows, tops = [], []
    if ra is not None and rb is not None:
        lows.append(ra[0] + rb[0])
        tops.append(ra[1] + rb[1])
    if rc is not None:
        lows.append(rc[0])
        tops.append(rc[1])
    if not lows:
        return 0, 4
    lsb = min(lows)
    top = max(tops) + (p.K + 1).bit_length() + 1
    return lsb, top - lsb + 2


def class_holds(cn: Constraint, a: list[BV], b: list[BV], c: BV, p: ModelParams) -> Bool:
    """Whether the inputs together satisfy a constraint of GLOBAL_KINDS."""
    if cn.kind == ConstraintKind.NO_OVERFLOW:
        lsb, width = grid(p.a_fmt, p.b_fmt, p.c_fmt, p.d_fmt, p.K)
        _, norm = reference_terms(a, b, c, (p.a_fmt, p.b_fmt, p.c_fmt), lsb, width)
        top = value_on_grid(
            BV.const(c.b, max_finite_bits(p.d_fmt), p.d_fmt.spec.storage), p.d_fmt, lsb, width
        )
        return norm.ule(top)
    if cn.kind == ConstraintKind.NO_UNDERFLOW:
        lsb, width = grid(p.a_fmt, p.b_fmt, p.c_fmt, p.d_fmt, p.K)
        _, norm = reference_terms(a, b, c, (p.a_fmt, p.b_fmt, p.c_fmt), lsb, width)
        s = p.d_fmt.spec
        smallest = BV.const(c.b, 1 << (s.emin - lsb), width)
        return norm.eq(0) | norm.uge(smallest)
    raise AssertionError(cn.kind)


def no_overflow_implied(p: ModelParams, constraints: tuple[Constraint, ...]) -> bool:
    """Whether the class's own ranges keep |c| + sum |a_k b_k| within d's largest finite
    number, so that the no-overflow constraint adds nothing to a formula."""
    lsb, width = class_grid(p, constraints)
    return lsb + width - 2 <= p.d_fmt.spec.emax


def _error_exceeds(q: Query, x: BV, y: BV, a: list[BV], b: list[BV], c: BV) -> Bool:
    """X's error against the reference (the exact result, or Y's output) is above the
    threshold in the query's measure, on the class's grid (class_grid). With finite
    inputs a non-finite X, or an X off the grid, counts as exceeding; a non-finite Y
    leaves nothing to measure against (false), a Y off the grid counts as exceeding."""
    p = q.p
    lsb, width = class_grid(p, q.constraints)
    finite_in = [_finite(v, p.a_fmt) for v in a] + [_finite(v, p.b_fmt) for v in b]
    finite_in.append(_finite(c, p.c_fmt))
    e, norm = reference_terms(a, b, c, (p.a_fmt, p.b_fmt, p.c_fmt), lsb, width)
    ref_ok, ref_fits = Bool.const(c.b, True), Bool.const(c.b, True)
    if not q.against_exact:
        e, ref_fits = on_grid_checked(operand_addend(decode(y, p.d_fmt)), lsb, width)
        ref_ok = _finite(y, p.d_fmt)
    dv, fits = on_grid_checked(operand_addend(decode(x, p.d_fmt)), lsb, width)
    over = exceeds(dv, e, norm, p.d_fmt, q.measure, q.threshold, lsb, width)
    bad_x = ~_finite(x, p.d_fmt) | ~fits | ~ref_fits
    return all_of(c.b, finite_in) & ref_ok & (bad_x | over)


def symbolic(q: Query) -> tuple[SymbolicBackend, Built]:
    """The query on the symbolic interpreter (fresh variables named after the operands)."""
    s, inputs, _ = _symbolic_inputs(q)
    return s, q.build(inputs)


def _symbolic_inputs(q: Query) -> tuple[SymbolicBackend, dict[str, BV], list[Bool]]:
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
    s, inputs, ties = _symbolic_inputs(q)
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


def _header(q: Query) -> list[str]:
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


@dataclass
class Recheck:
    """A witness re-run on the concrete interpreter."""

    inputs: dict[str, int]
    outputs: tuple[int, int]
    constraint_ok: bool
    goal_ok: bool
    solver_outputs: tuple[int | None, int | None]
    emulated: tuple[int, int] | None = None  # the outputs by the query's second path

    @property
    def reproduces(self) -> bool:
        agree = all(s is None or s == o for s, o in zip(self.solver_outputs, self.outputs))
        same = self.emulated is None or tuple(self.emulated) == tuple(self.outputs)
        return self.constraint_ok and self.goal_ok and agree and same


def recheck(q: Query, model: dict[str, int]) -> Recheck:
    """Re-run the solver's inputs on the concrete interpreter and check the goal holds."""
    inputs = {o.name: BV.const(CONCRETE, model.get(o.name, 0), o.width) for o in q.operands}
    built = q.build(inputs)
    outs = (int(built.outputs[0].v), int(built.outputs[1].v))
    solver_outs = tuple(model.get(n) for n in q.output_names)
    values = {k: int(v.v) for k, v in inputs.items()}
    return Recheck(
        values,
        outs,
        bool(built.constraint.v),
        bool(built.goal.v),
        solver_outs,
        q.emulated(values),
    )


def hex_inputs(q: Query, values: dict[str, int]) -> dict[str, str]:
    return {o.name: format_hex(values[o.name], o.fmt) for o in q.operands}
