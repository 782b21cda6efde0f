"""Lowering of a QF_BV term DAG to LLVM IR: one LLVM instruction (or a few) per node.

QF_BV maps onto LLVM's integers: a `w`-bit vector is `iw`, a boolean `i1`, `ite` a
`select`. LLVM integers of any width are used as they are, including widths over 64 bits
(exact accumulators reach a few hundred bits): the x86-64 and NVPTX back ends legalise
them into 64-bit pieces, so the one DAG needs no second lowering and no fallback. The
differences between the two semantics are guarded here (LLVM Language Reference,
"shl"/"lshr"/"ashr": a shift amount >= the width gives poison; SMT-LIB QF_BV: bvshl and
bvlshr give 0, bvashr the sign fill):

- shl/lshr by a variable amount: `select (amount <u w), shift, 0`;
- ashr by a variable amount: the amount clamped to w - 1 first;
- clz (a node of compiled DAGs only, engine/dag.py KernelBackend): `llvm.ctlz` with
  zero not poison, which gives w for 0 as the bisection does.

The body is emitted once per DAG node, in the order of the shared walk (bv/dag.py), so
a node shared by many uses is computed once per row.
"""

from __future__ import annotations

from collections.abc import Callable

from ..bv.dag import post_order
from ..bv.symbolic import Term

_BIN = {"add": "add", "sub": "sub", "mul": "mul", "and": "and", "or": "or", "xor": "xor"}
_BOOL = {"band": "and", "bor": "or", "bxor": "xor"}
_CMP = {"eq": "eq", "ult": "ult", "slt": "slt"}


def lit(value: int, width: int) -> str:
    """An LLVM integer literal for an unsigned `width`-bit value (LLVM parses literals as
    signed, so the upper half is written negative)."""
    if width == 0:
        return "true" if value else "false"
    if value >> (width - 1):
        value -= 1 << width
    return str(value)


def ty(t: Term) -> str:
    """The LLVM type of a term: i1 for booleans, iw for w-bit vectors."""
    if t.sort:
        raise ValueError(f"the compiled engine has no lowering for sort {t.sort}")
    return f"i{t.width or 1}"


class Body:
    """Straight-line LLVM instructions of one DAG, appended to `lines`."""

    def __init__(self, load: Callable[[Term, Body], str], prefix: str = "t") -> None:
        self.lines: list[str] = []
        self.declarations: dict[str, None] = {}  # intrinsics called, in order of first use
        self.names: dict[int, str] = {}
        self._load = load
        self._prefix = prefix
        self._tmp = 0

    def fresh(self) -> str:
        self._tmp += 1
        return f"%{self._prefix}x{self._tmp}"

    def emit(self, text: str) -> str:
        """Append `%new = text` and return %new."""
        name = self.fresh()
        self.lines.append(f"  {name} = {text}")
        return name

    def declare(self, line: str) -> None:
        """Record a `declare` line the module must carry for a call in the body."""
        self.declarations[line] = None

    def ref(self, t: Term) -> str:
        if t.op == "const":
            return lit(t.value, t.width)
        if t.op == "bconst":
            return "true" if t.value else "false"
        return self.names[t.uid]

    def lower(self, roots: list[Term]) -> list[str]:
        """Emit every node reachable from `roots`; return the roots' value names."""
        for t in post_order(roots, set(self.names)):
            if t.op in ("const", "bconst"):
                continue
            self.names[t.uid] = self._node(t)
        return [self.ref(r) for r in roots]

    def _node(self, t: Term) -> str:
        op, w = t.op, t.width
        a = [self.ref(x) for x in t.args]
        T = ty(t)
        if op in ("var", "bvar"):
            return self._load(t, self)
        if op in _BIN:
            return self.emit(f"{_BIN[op]} {T} {a[0]}, {a[1]}")
        if op in _BOOL:
            return self.emit(f"{_BOOL[op]} i1 {a[0]}, {a[1]}")
        if op == "not":
            return self.emit(f"xor {T} {a[0]}, -1")
        if op == "bnot":
            return self.emit(f"xor i1 {a[0]}, true")
        if op in _CMP:
            return self.emit(f"icmp {_CMP[op]} {ty(t.args[0])} {a[0]}, {a[1]}")
        if op in ("ite", "bite"):
            return self.emit(f"select i1 {a[0]}, {T} {a[1]}, {T} {a[2]}")
        if op in ("shl", "lshr"):
            n = t.args[1]
            if n.is_const:  # the symbolic interpreter folds constant amounts >= w to 0
                return self.emit(f"{op} {T} {a[0]}, {a[1]}")
            s = self.emit(f"{op} {T} {a[0]}, {a[1]}")
            ok = self.emit(f"icmp ult {T} {a[1]}, {w}")
            return self.emit(f"select i1 {ok}, {T} {s}, {T} 0")
        if op == "ashr":
            n = t.args[1]
            if n.is_const:
                return self.emit(f"ashr {T} {a[0]}, {min(n.value, w - 1)}")
            ok = self.emit(f"icmp ult {T} {a[1]}, {w}")
            amount = self.emit(f"select i1 {ok}, {T} {a[1]}, {T} {w - 1}")
            return self.emit(f"ashr {T} {a[0]}, {amount}")
        if op == "extract":
            hi, lo = t.params
            x, src = a[0], ty(t.args[0])
            if lo:
                x = self.emit(f"lshr {src} {x}, {lo}")
            return self.emit(f"trunc {src} {x} to {T}")
        if op == "concat":
            hi_t, lo_t = t.args
            h = self.emit(f"zext {ty(hi_t)} {a[0]} to {T}")
            h = self.emit(f"shl {T} {h}, {lo_t.width}")
            low = self.emit(f"zext {ty(lo_t)} {a[1]} to {T}")
            return self.emit(f"or {T} {h}, {low}")
        if op == "clz":
            self.declare(f"declare {T} @llvm.ctlz.{T}({T}, i1)")
            return self.emit(f"call {T} @llvm.ctlz.{T}({T} {a[0]}, i1 false)")
        if op in ("zext", "sext"):
            return self.emit(f"{op} {ty(t.args[0])} {a[0]} to {T}")
        raise ValueError(f"the compiled engine has no lowering for term op {op!r}")
