"""IEEE reference operations as SMT-LIB FP-theory terms (symbolic interpreter only).

The bit-vector IEEE operations of `ieee.py` are what the model runs; these are the
solvers' own floating-point semantics (`fp.add`, `fp.mul`, `fp.fma`, `(_ to_fp ...)`),
connected to bit-vectors through the IEEE encodings with `(_ to_fp eb sb)` applied to a
bit pattern. A query asserting that the two differ and answered unsat is a proof that the
bit-vector operation is the IEEE operation (tests/test_ieee.py).

Terms are nodes of a `SymbolicBackend` DAG (`to_z3` and `to_smtlib` translate them):
`fp_from_bits` (params (eb, sb), sort ("fp", eb, sb)), `fp_add` / `fp_mul` / `fp_fma`
(params (rm,)), `fp_to_fp` (params (rm, eb, sb)), and the Boolean `fp_eq` (SMT `=`:
structural, so every NaN equals every NaN and +0 differs from -0) and `fp_isnan`.
"""

from __future__ import annotations

from ..bv.core import BV, Bool
from ..bv.symbolic import SymbolicBackend, Term
from ..formats import Format, Rounding, Specials

RM_NAMES = {
    Rounding.RNE: "RNE",
    Rounding.RZ: "RTZ",
    Rounding.RTP: "RTP",
    Rounding.RTN: "RTN",
    Rounding.RNA: "RNA",
}
"""SMT-LIB rounding-mode names of our rounding directions."""


def fp_sort(fmt: Format) -> tuple[int, int]:
    """(eb, sb) of an IEEE interchange-like format: sb counts the hidden bit."""
    s = fmt.spec
    if s.specials != Specials.IEEE or s.ignored_low or s.ignored_high or not s.signed:
        raise ValueError(f"{s.name} has no SMT-LIB FloatingPoint sort")
    return s.ebits, s.mbits + 1


def from_bits(sb: SymbolicBackend, bits: BV, fmt: Format) -> Term:
    """The FP value a bit pattern encodes: `((_ to_fp eb sb) bits)`."""
    eb, sig = fp_sort(fmt)
    if bits.w != eb + sig:
        raise ValueError(f"{bits.w}-bit pattern for {fmt.spec.name}")
    return sb.mk("fp_from_bits", (bits.v,), 0, (eb, sig), ("fp", eb, sig))


def _sort_of(t: Term) -> tuple:
    if not t.sort or t.sort[0] != "fp":
        raise ValueError(f"not a floating-point term: {t.op}")
    return t.sort


def add(sb: SymbolicBackend, mode: Rounding, x: Term, y: Term) -> Term:
    return sb.mk("fp_add", (x, y), 0, (RM_NAMES[mode],), _sort_of(x))


def mul(sb: SymbolicBackend, mode: Rounding, x: Term, y: Term) -> Term:
    return sb.mk("fp_mul", (x, y), 0, (RM_NAMES[mode],), _sort_of(x))


def fma(sb: SymbolicBackend, mode: Rounding, x: Term, y: Term, z: Term) -> Term:
    """x * y + z with one rounding."""
    return sb.mk("fp_fma", (x, y, z), 0, (RM_NAMES[mode],), _sort_of(x))


def convert(sb: SymbolicBackend, mode: Rounding, x: Term, out: Format) -> Term:
    """x rounded into `out` (`(_ to_fp eb sb) rm x`)."""
    _sort_of(x)
    eb, sig = fp_sort(out)
    return sb.mk("fp_to_fp", (x,), 0, (RM_NAMES[mode], eb, sig), ("fp", eb, sig))


def same(sb: SymbolicBackend, x: Term, y: Term) -> Bool:
    """SMT-LIB `=` on FP terms: identical values (NaN = NaN, +0 != -0)."""
    if _sort_of(x) != _sort_of(y):
        raise ValueError("fp terms of different sorts")
    return Bool(sb, sb.mk("fp_eq", (x, y), 0))


def is_nan(sb: SymbolicBackend, x: Term) -> Bool:
    _sort_of(x)
    return Bool(sb, sb.mk("fp_isnan", (x,), 0))


def reference(
    sb: SymbolicBackend, op: str, args: list[BV], fmts: list[Format], mode: Rounding, out: Format
) -> Term:
    """The FP-theory result of `op` ('add', 'mul', 'fma' or 'convert') on bit-pattern
    arguments, rounded into `out`. add/mul/fma need all formats equal to `out` (the FP
    theory's operations are homogeneous); convert takes any IEEE input format."""
    xs = [from_bits(sb, a, f) for a, f in zip(args, fmts)]
    if op == "convert":
        return convert(sb, mode, xs[0], out)
    if any(f != out for f in fmts):
        raise ValueError(f"{op}: operand and result formats must be equal")
    if op == "add":
        return add(sb, mode, xs[0], xs[1])
    if op == "mul":
        return mul(sb, mode, xs[0], xs[1])
    if op == "fma":
        return fma(sb, mode, xs[0], xs[1], xs[2])
    raise ValueError(f"unknown operation {op!r}")


def differs(sb: SymbolicBackend, bv_result: BV, out: Format, ref: Term) -> Bool:
    """Holds when the bit-vector result encodes a different FP value than `ref` (NaNs
    of any payload count as equal, as IEEE 754 does not fix a NaN's payload)."""
    return ~same(sb, from_bits(sb, bv_result, out), ref)
