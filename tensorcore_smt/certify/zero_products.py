"""The error of a fused unit whose every product the class fixes to zero: d = c exactly
where the conditions below hold (a normwise error of 0, closed at once), where a
solver asked "error > 0" has the whole unit to encode for an input of one number.

The argument. Let every product a_k b_k of an FDA unit be a zero by the class (--where
terms:0, or fix: of a_k or b_k to a zero pattern for every k), and c finite. In each
fused group (model/fda.py, steps 3-5) the terms are c (the input c, then the
previous group's result) and zeros:
 1. alignment: E = max(exponent of c, e_zero of the zero terms). An addend's exponent
    in a format is at least that format's e_min (a subnormal's is e_min), so e_zero <=
    e_min(c) (first group) and e_zero <= e_min(d) (later groups, whose c is read in d)
    keep E at c's own exponent. A value of c's format holds at most mbits(c) fraction
    bits below its exponent in c's format, and no more in a format that contains c's
    (mbits >= mbits(c), e_min <= e_min(c)); with F >= mbits(c) (or alignment kept
    exactly) no bit of c is cut, and the zero terms lose nothing;
 2. the fixed-point sum of c and zeros is c (one nonzero term never overflows the
    register, whose integer part holds c's leading bit; under opposing=ones only a
    nonzero term of the other sign enters as a bit flip, and no zero term is one);
 3. the rounding into the group's output format, and the storing in d, return c
    unchanged when both formats contain c's (c representable: mbits, e_max at least
    c's, e_min at most c's), in every rounding direction. A flushing unit (flush_inputs
    with flush_c, flush_sums, flush_outputs) reads or returns a subnormal as zero: it
    keeps c only where the class keeps every nonzero c at least 2^e for e the largest
    e_min among c's, the output's and d's formats (normal-only on c with those e_min at
    most c's, or no-underflow, which gives |c| = M >= 2^e_min(d)).
The exact result is c, so d = c and every measure against it is 0. Where a condition
fails the error can be nonzero and no claim is made: e_zero above c's exponent cuts c to
the grid 2^(e_zero - F); d or the output narrower than c rounds c; a flushing unit turns
a subnormal c into 0. The claim is checked on every c of small
formats through the concrete model (tests/test_zero_products.py)."""

from __future__ import annotations

from ..formats import Format
from ..inputs.constraints import Constraint, fixed_values
from ..inputs.implications import forced_normal
from ..inputs.kinds import ConstraintKind
from ..model.params import Algorithm, CAddend, ModelParams, Split
from ..model.terms import AlignMode


def no_free_product(p: ModelParams, constraints: tuple[Constraint, ...]) -> bool:
    """Whether the class fixes a_k or b_k to a zero (+0 or -0) for every k of the unit,
    a dense one (a sparse query's metadata renumbers the products: not judged here)."""
    if any(c.kind == ConstraintKind.UNSELECTED for c in constraints):
        return False
    names = [f"{g}{k}" for k in range(p.K) for g in "ab"]
    fixed = fixed_values(constraints, names)
    fmts = {"a": p.a_fmt, "b": p.b_fmt}

    def is_zero(name: str) -> bool:
        if name not in fixed:
            return False
        fmt = fmts[name[0]]
        return fixed[name] & ((1 << (fmt.spec.storage - 1)) - 1) == 0

    return all(is_zero(f"a{k}") or is_zero(f"b{k}") for k in range(p.K))


def contains(wide: Format, narrow: Format) -> bool:
    """Whether every finite value of `narrow` is a value of `wide`."""
    w, n = wide.spec, narrow.spec
    return w.mbits >= n.mbits and w.emax >= n.emax and w.emin <= n.emin


def least_c_exponent(p: ModelParams, constraints: tuple[Constraint, ...]) -> int | None:
    """The e with |c| >= 2^e for every nonzero c of the class that the argument can show
    (normal-only on c: e_min(c); no-underflow: e_min(d), since |c| = M), or None."""
    kinds = {c.kind for c in constraints}
    floors = []
    if forced_normal("c", p.c_fmt, constraints):
        floors.append(p.c_fmt.spec.emin)
    if ConstraintKind.NO_UNDERFLOW in kinds:
        floors.append(p.d_fmt.spec.emin)
    return max(floors) if floors else None


def finite_c(constraints: tuple[Constraint, ...]) -> bool:
    """Whether the class keeps c finite."""
    return any(c.kind == ConstraintKind.FINITE and "c" in c.operands for c in constraints)


def why_not_exact(p: ModelParams, constraints: tuple[Constraint, ...]) -> str | None:
    """The first condition of the module's argument that `p` over the class fails, in
    words, or None where d = c holds on every input of the class."""
    if not no_free_product(p, constraints):
        return "a product of the class can be nonzero"
    if not finite_c(constraints):
        return "c can be Inf or NaN"
    if p.algorithm != Algorithm.FDA or p.c_add != CAddend.FUSED:
        return f"the argument is for fused FDA groups (not {p.algorithm.value}, c_add)"
    if p.scale_fmt is not None or p.split != Split.NONE:
        return "block-scaled or split instruction"
    c, out, d = p.c_fmt, p.out_fmt, p.d_fmt
    if not (contains(out, c) and contains(d, c)):
        return f"{out.spec.name} or {d.spec.name} does not hold every {c.spec.name} c"
    if p.align != AlignMode.EXACT and p.F < c.spec.mbits:
        return f"F = {p.F} < {c.spec.mbits} fraction bits of c: c is cut"
    chained = len(p.groups()) > 1
    lowest = min([c.spec.emin] + ([d.spec.emin] if chained else []))
    if p.e_zero is not None and p.e_zero > lowest:
        return f"e_zero = {p.e_zero} above c's least exponent {lowest}: c is cut"
    flushes = (p.flush_inputs and p.flush_c) or p.flush_sums or p.flush_outputs
    if flushes:
        least = least_c_exponent(p, constraints)
        need = max(c.spec.emin, out.spec.emin, d.spec.emin)
        if least is None or least < need:
            return "a flushing unit reads or returns a subnormal c as zero"
    return None


def exact_lines(p: ModelParams) -> list[str]:
    """The argument's steps for `p`, in words."""
    if p.align == AlignMode.EXACT:
        kept = "alignment kept exactly"
    else:
        kept = f"F = {p.F} >= {p.c_fmt.spec.mbits} fraction bits of c"
    zeros = "zero terms ignored" if p.e_zero is None else f"e_zero = {p.e_zero} <= c's exponent"
    return [
        "every product is fixed to zero: each fused group sums c and zeros "
        "(certify/zero_products.py)",
        f"alignment keeps c: {kept}, {zeros}",
        f"rounding keeps c: {p.out_fmt.spec.name} and {p.d_fmt.spec.name} hold every "
        f"{p.c_fmt.spec.name} value (no flushed subnormal in the class)",
        "d = c = the exact result: U = 0",
    ]


__all__ = ["contains", "exact_lines", "no_free_product", "why_not_exact"]
