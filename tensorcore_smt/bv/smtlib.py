"""Print a term DAG as SMT-LIB2 text that z3, cvc5 and bitwuzla all accept.

Every shared node becomes a `define-fun` of its own, so the text stays linear in the DAG
size and each solver sees the sharing. Names avoid characters any solver reserves.
"""

from __future__ import annotations

from .dag import post_order
from .symbolic import Term

_BIN = {
    "add": "bvadd",
    "sub": "bvsub",
    "mul": "bvmul",
    "and": "bvand",
    "or": "bvor",
    "xor": "bvxor",
    "shl": "bvshl",
    "lshr": "bvlshr",
    "ashr": "bvashr",
    "ult": "bvult",
    "slt": "bvslt",
    "eq": "=",
    "concat": "concat",
    "band": "and",
    "bor": "or",
    "bxor": "xor",
    "fp_eq": "=",
}


def sort_of(t: Term) -> str:
    if t.sort:
        if t.sort[0] == "fp":
            return f"(_ FloatingPoint {t.sort[1]} {t.sort[2]})"
        raise ValueError(f"unknown sort {t.sort}")
    return "Bool" if t.width == 0 else f"(_ BitVec {t.width})"


def _rm(name: str) -> str:
    return {"RNE": "RNE", "RTZ": "RTZ", "RTP": "RTP", "RTN": "RTN", "RNA": "RNA"}[name]


def to_smtlib(
    assertions: list[Term],
    logic: str = "QF_BV",
    get_values: list[str] | None = None,
    header: list[str] | None = None,
    declare: list[Term] | None = None,
) -> str:
    """Return a complete script: declarations, definitions, assertions, check-sat.
    `declare`: variables declared even where no assertion reads them (so that
    `get_values` may name every input of a query)."""
    lines: list[str] = [f"; {h}" for h in (header or [])]
    lines.append(f"(set-logic {logic})")
    lines.append("(set-option :produce-models true)")
    names: dict[int, str] = {}
    order: list[Term] = post_order(list(declare or []) + list(assertions))

    def ref(t: Term) -> str:
        if t.op == "const":
            return f"(_ bv{t.value} {t.width})"
        if t.op == "bconst":
            return "true" if t.value else "false"
        return names[t.uid]

    for t in order:
        if t.op in ("const", "bconst"):
            continue
        if t.op in ("var", "bvar"):
            names[t.uid] = t.params[0]
            lines.append(f"(declare-fun {t.params[0]} () {sort_of(t)})")
            continue
        a = [ref(x) for x in t.args]
        op = t.op
        if op in _BIN:
            body = f"({_BIN[op]} {a[0]} {a[1]})"
        elif op == "not":
            body = f"(bvnot {a[0]})"
        elif op == "bnot":
            body = f"(not {a[0]})"
        elif op in ("ite", "bite"):
            body = f"(ite {a[0]} {a[1]} {a[2]})"
        elif op == "extract":
            body = f"((_ extract {t.params[0]} {t.params[1]}) {a[0]})"
        elif op == "zext":
            body = f"((_ zero_extend {t.params[0]}) {a[0]})"
        elif op == "sext":
            body = f"((_ sign_extend {t.params[0]}) {a[0]})"
        elif op == "fp_from_bits":
            body = f"((_ to_fp {t.params[0]} {t.params[1]}) {a[0]})"
        elif op == "fp_add":
            body = f"(fp.add {_rm(t.params[0])} {a[0]} {a[1]})"
        elif op == "fp_mul":
            body = f"(fp.mul {_rm(t.params[0])} {a[0]} {a[1]})"
        elif op == "fp_fma":
            body = f"(fp.fma {_rm(t.params[0])} {a[0]} {a[1]} {a[2]})"
        elif op == "fp_to_fp":
            body = f"((_ to_fp {t.params[1]} {t.params[2]}) {_rm(t.params[0])} {a[0]})"
        elif op == "fp_isnan":
            body = f"(fp.isNaN {a[0]})"
        else:
            raise ValueError(f"no SMT-LIB form for term op {op!r}")
        name = f"t{t.uid}"
        names[t.uid] = name
        lines.append(f"(define-fun {name} () {sort_of(t)} {body})")
    for root in assertions:
        lines.append(f"(assert {ref(root)})")
    lines.append("(check-sat)")
    if get_values:
        lines.append(f"(get-value ({' '.join(get_values)}))")
    return "\n".join(lines) + "\n"
