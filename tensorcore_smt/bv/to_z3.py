"""Translate a term DAG into z3 expressions (z3's Python API)."""

from __future__ import annotations

from typing import Any

from .dag import fold
from .symbolic import Term

_RM = {"RNE": "RNE", "RTZ": "RTZ", "RTP": "RTP", "RTN": "RTN", "RNA": "RNA"}


def to_z3(roots: list[Term]) -> tuple[list[Any], dict[str, Any]]:
    """Return z3 expressions for `roots` and the z3 constants made for the variables."""
    import z3

    variables: dict[str, Any] = {}

    def rm(name: str) -> Any:
        return getattr(z3, _RM[name])()

    def node(t: Term, a: list) -> Any:
        op, w = t.op, t.width
        if op == "const":
            return z3.BitVecVal(t.value, w)
        if op == "bconst":
            return z3.BoolVal(t.value)
        if op == "var":
            v = z3.BitVec(t.params[0], w)
            variables[t.params[0]] = v
            return v
        if op == "bvar":
            v = z3.Bool(t.params[0])
            variables[t.params[0]] = v
            return v
        simple = {
            "add": lambda: a[0] + a[1],
            "sub": lambda: a[0] - a[1],
            "mul": lambda: a[0] * a[1],
            "and": lambda: a[0] & a[1],
            "or": lambda: a[0] | a[1],
            "xor": lambda: a[0] ^ a[1],
            "not": lambda: ~a[0],
            "shl": lambda: a[0] << a[1],
            "lshr": lambda: z3.LShR(a[0], a[1]),
            "ashr": lambda: a[0] >> a[1],
            "eq": lambda: a[0] == a[1],
            "ult": lambda: z3.ULT(a[0], a[1]),
            "slt": lambda: a[0] < a[1],
            "ite": lambda: z3.If(a[0], a[1], a[2]),
            "bite": lambda: z3.If(a[0], a[1], a[2]),
            "concat": lambda: z3.Concat(a[0], a[1]),
            "band": lambda: z3.And(a[0], a[1]),
            "bor": lambda: z3.Or(a[0], a[1]),
            "bnot": lambda: z3.Not(a[0]),
            "bxor": lambda: z3.Xor(a[0], a[1]),
        }
        if op in simple:
            return simple[op]()
        if op == "extract":
            return z3.Extract(t.params[0], t.params[1], a[0])
        if op == "zext":
            return z3.ZeroExt(t.params[0], a[0])
        if op == "sext":
            return z3.SignExt(t.params[0], a[0])
        if op == "fp_from_bits":
            eb, sb = t.params
            return z3.fpBVToFP(a[0], z3.FPSort(eb, sb))
        if op == "fp_add":
            return z3.fpAdd(rm(t.params[0]), a[0], a[1])
        if op == "fp_mul":
            return z3.fpMul(rm(t.params[0]), a[0], a[1])
        if op == "fp_fma":
            return z3.fpFMA(rm(t.params[0]), a[0], a[1], a[2])
        if op == "fp_to_fp":
            r, eb, sb = t.params
            return z3.fpFPToFP(rm(r), a[0], z3.FPSort(eb, sb))
        if op == "fp_eq":
            return a[0] == a[1]
        if op == "fp_isnan":
            return z3.fpIsNaN(a[0])
        raise ValueError(f"no z3 translation for term op {op!r}")

    memo = fold(roots, node)
    return [memo[r.uid] for r in roots], variables
