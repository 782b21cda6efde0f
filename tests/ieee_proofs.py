"""Solver proofs that the bit-vector IEEE operations (tensorcore_smt/model/ieee.py) are the
SMT-LIB FP theory's, split into cases a solver answers quickly.

A query asserts `(not (= (fp_from_bits bv_result) fp_reference))` over free operand bits;
unsat for every case proves the operation for every input. A case fixes the shape of each
operand (an `OperandClass`): its sign and mantissa stay free, and its exponent field is
fixed in its high bits (low bits free), or is zero with the leading one of the mantissa at
a fixed place. That makes the hidden bit and any subnormal normalisation constants, so the
solver's multiplier and ours see the same significands and merge; without the split a
product of free fp16 operands does not finish in 10 minutes. `classes_partition` checks
that a class list covers every bit pattern exactly once, so the cases are exhaustive.

Worker functions take plain arguments so spawned processes can run them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tensorcore_smt.bv.core import BV
from tensorcore_smt.bv.smtlib import to_smtlib
from tensorcore_smt.bv.symbolic import SymbolicBackend
from tensorcore_smt.formats import Format, Rounding
from tensorcore_smt.model import fpref, ieee

ARITY = {"add": 2, "mul": 2, "fma": 3, "convert": 1}


@dataclass(frozen=True)
class OperandClass:
    """Bit patterns of one format with a fixed exponent prefix, or subnormals with a fixed
    leading-one position: kind 'any', 'exp' (exponent = hi over `free` low bits, `free`
    low exponent bits free) or 'sub' (exponent 0, mantissa 0^lead 1 x...; lead = mbits
    means the zeros)."""

    kind: str
    hi: int = 0
    free: int = 0
    lead: int = 0

    def build(self, sb: SymbolicBackend, name: str, fmt: Format) -> BV:
        s = fmt.spec
        if self.kind == "any":
            return sb.var(name, s.storage)
        sign = sb.var(name + "_s", 1)
        if self.kind == "exp":
            e = BV.const(sb, self.hi, s.ebits - self.free) if self.free < s.ebits else None
            if self.free:
                ev = sb.var(name + "_e", self.free)
                e = ev if e is None else e.concat(ev)
            return sign.concat(e).concat(sb.var(name + "_m", s.mbits))
        # subnormal / zero with a fixed leading one
        out = sign.concat(BV.const(sb, 0, s.ebits + self.lead))
        if self.lead < s.mbits:
            out = out.concat(BV.const(sb, 1, 1))
            rest = s.mbits - self.lead - 1
            if rest:
                out = out.concat(sb.var(name + "_m", rest))
        return out

    def contains(self, bits: int, fmt: Format) -> bool:
        s = fmt.spec
        e = (bits >> s.mbits) & ((1 << s.ebits) - 1)
        m = bits & ((1 << s.mbits) - 1)
        if self.kind == "any":
            return True
        if self.kind == "exp":
            return e >> self.free == self.hi
        if e:
            return False
        if self.lead == s.mbits:
            return m == 0
        return m >> (s.mbits - self.lead - 1) == 1

    def label(self, fmt: Format) -> str:
        if self.kind == "any":
            return "*"
        if self.kind == "exp":
            return f"e{self.hi:0{fmt.spec.ebits - self.free}b}{'x' * self.free}"
        return f"sub{self.lead}"


def multiplicative_classes(fmt: Format, free: int = 0) -> list[OperandClass]:
    """Exponent blocks of 2^free values with a nonzero fixed prefix, smaller blocks below
    2^free (1, then {2,3}, ...), zero exponent split by the leading one: every pattern
    of `fmt`, each once, with a constant hidden bit. The default fixes every exponent
    (42 classes for fp16): with free exponent bits some fp16 mul cases take minutes
    (e.g. {2,3} x [28,31] in RTP), with none every case takes under a second."""
    s = fmt.spec
    out = [OperandClass("exp", hi, free) for hi in range(1, 1 << (s.ebits - free))]
    out += [OperandClass("exp", 1, f) for f in range(free - 1, -1, -1)]  # [2^f, 2^(f+1))
    out += [OperandClass("sub", lead=k) for k in range(s.mbits + 1)]
    return out


def exponent_blocks(fmt: Format, free: int) -> list[OperandClass]:
    """All patterns, split by the top exponent bits only (for operations without a
    multiplier, where subnormals need no special shape)."""
    s = fmt.spec
    return [OperandClass("exp", hi, free) for hi in range(1 << (s.ebits - free))]


def classes_partition(classes: list[OperandClass], fmt: Format) -> bool:
    """Every pattern of `fmt` lies in exactly one class."""
    return all(
        sum(c.contains(bits, fmt) for c in classes) == 1 for bits in range(1 << fmt.spec.storage)
    )


def apply(op: str, xs: list[BV], fin: Format, out: Format, mode: Rounding) -> BV:
    if op == "add":
        return ieee.add(xs[0], fin, xs[1], fin, out, mode)
    if op == "mul":
        return ieee.mul(xs[0], fin, xs[1], fin, out, mode)
    if op == "fma":
        return ieee.fma(xs[0], fin, xs[1], fin, xs[2], fin, out, mode)
    return ieee.convert(xs[0], fin, out, mode)


def query(op: str, fin: Format, out: Format, mode: Rounding, classes: tuple[OperandClass, ...]):
    """(backend, Bool) asserting that the BV operation and the FP reference differ on
    operands of the given classes."""
    sb = SymbolicBackend()
    xs = [c.build(sb, f"x{i}", fin) for i, c in enumerate(classes)]
    result = apply(op, xs, fin, out, mode)
    ref = fpref.reference(sb, op, xs, [fin] * len(xs), mode, out)
    return sb, fpref.differs(sb, result, out, ref)


def solve(q, solver: str, timeout_s: float) -> str:
    """'unsat', 'sat: <model>' or 'unknown' from z3 (direct translation) or bitwuzla
    (through the SMT-LIB printer)."""
    if solver == "z3":
        import z3

        from tensorcore_smt.bv.to_z3 import to_z3

        (expr,), _ = to_z3([q.v])
        s = z3.Solver()
        s.set("timeout", int(timeout_s * 1000))
        s.add(expr)
        r = s.check()
        return f"sat: {s.model()}" if r == z3.sat else str(r)
    import bitwuzla

    text = to_smtlib([q.v], logic="QF_BVFP")
    options = bitwuzla.Options()
    options.set(bitwuzla.Option.TIME_LIMIT_PER, int(timeout_s * 1000))
    parser = bitwuzla.Parser(bitwuzla.TermManager(), options)
    parser.parse(text, True, False)
    r = parser.bitwuzla().check_sat()
    return {bitwuzla.Result.UNSAT: "unsat", bitwuzla.Result.SAT: "sat"}.get(r, "unknown")


def prove_cases(
    op: str,
    fin_name: str,
    out_name: str,
    mode_name: str,
    cases: list[tuple[OperandClass, ...]],
    solver: str,
    timeout_s: float,
) -> list[tuple[str, str, float]]:
    """Run a batch of cases; returns (case label, answer, seconds) for each."""
    fin, out, mode = Format[fin_name], Format[out_name], Rounding[mode_name]
    results = []
    for classes in cases:
        t = time.perf_counter()
        _, q = query(op, fin, out, mode, classes)
        answer = solve(q, solver, timeout_s)
        label = ",".join(c.label(fin) for c in classes)
        results.append((label, answer, time.perf_counter() - t))
    return results


def bitwuzla_unsat(query) -> bool:
    """Whether bitwuzla answers unsat on the z3 formula `query` (passed as SMT-LIB)."""
    import bitwuzla
    import z3

    solver = z3.Solver()
    solver.add(query)
    parser = bitwuzla.Parser(bitwuzla.TermManager(), bitwuzla.Options())
    parser.parse(solver.to_smt2(), True, False)
    return parser.bitwuzla().check_sat() == bitwuzla.Result.UNSAT


def z3_unsat(query) -> bool:
    """Whether z3 answers unsat on the z3 formula `query`."""
    import z3

    solver = z3.Solver()
    solver.add(query)
    return solver.check() == z3.unsat
