"""Symbolic interpreter: bit-vectors are nodes of a hash-consed term DAG.

Running a model algorithm on this backend builds one shared DAG for the whole query.
Nodes whose arguments are all constants are folded with the concrete interpreter (the
same primitive semantics), and a handful of algebraic identities are applied on the fly,
so fixed inputs and plain-int parameters cost no solver work. The DAG is solver
neutral: `tensorcore_smt.bv.smtlib` prints it as SMT-LIB2 and `tensorcore_smt.bv.to_z3`
translates it for z3's API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import ranges as R
from . import rewrite
from .concrete import CONCRETE
from .core import BV, Backend, Bool
from .dag import fold


@dataclass(frozen=True, eq=False)
class Term:
    """One DAG node. `width` is 0 for booleans; `sort` names non-BV sorts (FP, RM)."""

    op: str
    args: tuple[Term, ...]
    width: int
    params: tuple = ()
    sort: tuple = field(default=())
    uid: int = 0

    def __hash__(self) -> int:
        return self.uid

    @property
    def is_const(self) -> bool:
        return self.op in ("const", "bconst")

    @property
    def value(self) -> Any:
        return self.params[0]


_BIN_CONCRETE = {
    "add": CONCRETE.add,
    "sub": CONCRETE.sub,
    "mul": CONCRETE.mul,
    "and": CONCRETE.and_,
    "or": CONCRETE.or_,
    "xor": CONCRETE.xor,
    "shl": CONCRETE.shl,
    "lshr": CONCRETE.lshr,
    "ashr": CONCRETE.ashr,
}
_CMP_CONCRETE = {"eq": CONCRETE.eq, "ult": CONCRETE.ult, "slt": CONCRETE.slt}
_RANGE_BIN = {
    "add": R.add,
    "sub": R.sub,
    "mul": R.mul,
    "and": R.and_,
    "or": R.or_,
    "xor": R.xor,
    "shl": R.shl,
    "lshr": R.lshr,
    "ashr": R.ashr,
}
_RANGE_CMP = {"eq": R.eq, "ult": R.ult, "slt": R.slt}


def _sign_bit_of(p: Term, q: Term) -> Term | None:
    """v when (= p q) is (= #b1 ((_ extract w-1 w-1) v)), the test `v < 0`."""
    if p.is_const and p.value == 1 and p.width == 1 and q.op == "extract":
        v = q.args[0]
        if q.params == (v.width - 1, v.width - 1):
            return v
    return None


def _on_path(arm: Term, v: Term, rv: R.Range, plain: R.Range) -> R.Range:
    """The range of `arm` on a path where `v` lies in `rv`: for v itself, or its
    negation 0 - v (the arm of an absolute value); otherwise `plain`."""
    if arm is v:
        return R.intersect(plain, None, (rv.slo, rv.shi))
    negation = arm.op == "sub" and arm.args[0].is_const and arm.args[0].value == 0
    if negation and arm.args[1] is v and rv.slo > -(1 << (v.width - 1)):  # no wrap
        return R.intersect(plain, None, (-rv.shi, -rv.slo))
    return plain


def _same_clamp(c: Term, x: Term, y: Term) -> Term | None:
    """The inner clamp when (ite c x y) repeats a min/max clamp already applied to one
    arm: min(min(q, k), k) or max(max(q, k), k), written as (ite (p < k) p k) and
    (ite (p < k) k p) with `<` unsigned or signed; else None."""
    if c.op not in ("ult", "slt"):
        return None
    p, k = c.args
    inner, other = (x, y) if x is p else (y, x) if y is p else (None, None)
    if inner is None or other is not k or inner.op != "ite":
        return None
    ic, ix, iy = inner.args
    if ic.op != c.op or ic.args[1] is not k:
        return None
    q = ic.args[0]
    # the inner clamp has the same shape: the same arm order relative to the comparison
    same = (ix is q and iy is k and x is p) or (ix is k and iy is q and y is p)
    return inner if same else None


class SymbolicBackend(Backend):
    """Builds terms; one instance per query so its node table is the query's DAG."""

    name = "symbolic"

    def __init__(self, rewrite: bool = True) -> None:
        self.rewrite = rewrite  # apply bv/rewrite.py's rules
        self._table: dict[tuple, Term] = {}
        self._ranges: dict[int, R.Range] = {}
        self._nodes = 0
        self.variables: dict[str, Term] = {}

    # --- node construction ---------------------------------------------------------
    def mk(self, op: str, args: tuple, width: int, params: tuple = (), sort: tuple = ()) -> Term:
        """The node (op args), shared with an equal node built before; a bit-vector node
        whose value range (tensorcore_smt.bv.ranges) is one value becomes that constant."""
        key = (op, tuple(a.uid for a in args), width, params, sort)
        t = self._table.get(key)
        if t is not None:
            return t
        rng = None
        if width and not sort and op != "const":
            rng = self._range_of(op, args, width, params)
            if rng.const is not None:
                t = self.const(rng.const, width)
                self._table[key] = t
                return t
        self._nodes += 1
        t = Term(op, args, width, params, sort, uid=len(self._table) + 1)
        self._table[key] = t
        if op == "const":
            rng = R.exact(params[0], width)
        if rng is not None:
            self._ranges[t.uid] = rng
        return t

    def range(self, t: Term) -> R.Range:
        """Bounds on the values of bit-vector term `t`."""
        r = self._ranges.get(t.uid)
        return r if r is not None else R.full(t.width)

    def _range_of(self, op: str, args: tuple, w: int, params: tuple) -> R.Range:
        """Bounds of a new node from its arguments' bounds (full when nothing is known)."""
        g = [self.range(a) if a.width else None for a in args]
        if op in _RANGE_BIN:
            return _RANGE_BIN[op](g[0], g[1])
        if op == "not":
            return R.not_(g[0])
        if op == "ite":
            return self._ite_range(args)
        if op == "extract":
            return R.extract(g[0], params[0], params[1])
        if op == "concat":
            return R.concat(g[0], g[1])
        if op == "zext":
            return R.zext(g[0], params[0])
        if op == "sext":
            return R.sext(g[0], params[0])
        return R.full(w)

    def _ite_range(self, args: tuple) -> R.Range:
        """Bounds of (ite c x y): the hull of the arms, each narrowed by what `c` says on
        its path when the arm is an operand of the comparison `c` (min, max, clamps) or
        `c` tests a sign (absolute values)."""
        c, x, y = args
        rx, ry = self.range(x), self.range(y)
        if c.op in ("ult", "slt"):
            p, q = c.args
            rp, rq = self.range(p), self.range(q)
            signed = c.op == "slt"
            lo_p, hi_p = (rp.slo, rp.shi) if signed else (rp.ulo, rp.uhi)
            lo_q, hi_q = (rq.slo, rq.shi) if signed else (rq.ulo, rq.uhi)
            big = 1 << x.width

            def narrow(r: R.Range, lo: int, hi: int) -> R.Range:
                return R.intersect(r, None, (lo, hi)) if signed else R.intersect(r, (lo, hi), None)

            # then-path: p < q;  else-path: p >= q
            if x is p:
                rx = narrow(rx, -big, hi_q - 1)
            elif x is q:
                rx = narrow(rx, lo_p + 1, big)
            if y is p:
                ry = narrow(ry, lo_q, big)
            elif y is q:
                ry = narrow(ry, -big, hi_p)
        elif c.op == "eq":
            p, q = c.args
            if q.is_const:
                p, q = q, p
            # (= k v): v is k on the then-path
            if p.is_const and x is q:
                rx = R.exact(p.value, x.width)
            v = _sign_bit_of(p, q)
            if v is not None:  # then-path: v < 0; else-path: v >= 0
                rv = self.range(v)
                neg = R.intersect(rv, None, (rv.slo, -1))
                nonneg = R.intersect(rv, None, (0, rv.shi))
                rx = _on_path(x, v, neg, rx)
                ry = _on_path(y, v, nonneg, ry)
        return R.hull(rx, ry)

    def const(self, value: int, width: int) -> Term:
        return self.mk("const", (), width, (value & ((1 << width) - 1),))

    def bool_const(self, value: bool) -> Term:
        return self.mk("bconst", (), 0, (bool(value),))

    def var(self, name: str, width: int) -> BV:
        """Declare (or fetch) a free bit-vector input."""
        if name in self.variables:
            return BV(self, self.variables[name], width)
        t = self.mk("var", (), width, (name,))
        self.variables[name] = t
        return BV(self, t, width)

    def known(self, x: Term) -> bool | None:
        return bool(x.value) if x.op == "bconst" else None

    def bool_var(self, name: str) -> Bool:
        t = self.mk("bvar", (), 0, (name,))
        self.variables[name] = t
        return Bool(self, t)

    # --- bit-vector ops with folding --------------------------------------------------
    def _bin(self, op: str, x: Term, y: Term, w: int) -> Term:
        if x.is_const and y.is_const:
            return self.const(_BIN_CONCRETE[op](x.value, y.value, w), w)
        zero_x = x.is_const and x.value == 0
        zero_y = y.is_const and y.value == 0
        ones = (1 << w) - 1
        if op in ("add", "or", "xor"):
            if zero_x:
                return y
            if zero_y:
                return x
        if op == "sub" and zero_y:
            return x
        if op in ("shl", "lshr", "ashr"):
            if zero_y or zero_x:
                return x
            if y.is_const and y.value >= w and op != "ashr":
                return self.const(0, w)
        if op == "and":
            if zero_x or zero_y:
                return self.const(0, w)
            if x.is_const and x.value == ones:
                return y
            if y.is_const and y.value == ones:
                return x
        if op == "mul":
            if zero_x or zero_y:
                return self.const(0, w)
            if x.is_const and x.value == 1:
                return y
            if y.is_const and y.value == 1:
                return x
        if op in ("or", "and") and x is y:
            return x
        if op in ("xor", "sub") and x is y:
            return self.const(0, w)
        if op in ("add", "mul", "and", "or", "xor") and x.uid > y.uid:
            x, y = y, x  # canonical order improves sharing
        return self.mk(op, (x, y), w)

    def add(self, x, y, w):
        return self._bin("add", x, y, w)

    def sub(self, x, y, w):
        return self._bin("sub", x, y, w)

    def mul(self, x, y, w):
        return self._bin("mul", x, y, w)

    def and_(self, x, y, w):
        return self._bin("and", x, y, w)

    def or_(self, x, y, w):
        return self._bin("or", x, y, w)

    def xor(self, x, y, w):
        return self._bin("xor", x, y, w)

    def not_(self, x, w):
        if x.is_const:
            return self.const(CONCRETE.not_(x.value, w), w)
        if x.op == "not":
            return x.args[0]
        return self.mk("not", (x,), w)

    def shl(self, x, n, w):
        return self._bin("shl", x, n, w)

    def lshr(self, x, n, w):
        return self._bin("lshr", x, n, w)

    def ashr(self, x, n, w):
        return self._bin("ashr", x, n, w)

    def _cmp(self, op: str, x: Term, y: Term, w: int) -> Term:
        if x.is_const and y.is_const:
            return self.bool_const(_CMP_CONCRETE[op](x.value, y.value, w))
        if x is y:
            return self.bool_const(op == "eq")
        decided = _RANGE_CMP[op](self.range(x), self.range(y))
        if decided is not None:
            return self.bool_const(decided)
        if op == "ult" and y.is_const and y.value == 0:
            return self.bool_const(False)
        if op == "eq" and self.rewrite and (x.is_const or y.is_const):
            v, k = (y, x.value) if x.is_const else (x, y.value)
            r = rewrite.eq_const(self, v, k)
            if r is not None:
                return r
        if op == "eq" and x.uid > y.uid:
            x, y = y, x
        return self.mk(op, (x, y), 0)

    def eq(self, x, y, w):
        return self._cmp("eq", x, y, w)

    def ult(self, x, y, w):
        return self._cmp("ult", x, y, w)

    def slt(self, x, y, w):
        return self._cmp("slt", x, y, w)

    def ite(self, c, x, y, w):
        if c.is_const:
            return x if c.value else y
        if x is y:
            return x
        if c.op == "bnot":
            return self.mk("ite", (c.args[0], y, x), w)
        inner = _same_clamp(c, x, y)
        if inner is not None:
            return inner
        return self.mk("ite", (c, x, y), w)

    def extract(self, x, hi, lo, w):
        if x.is_const:
            return self.const(CONCRETE.extract(x.value, hi, lo, w), hi - lo + 1)
        if lo == 0 and hi == w - 1:
            return x
        if x.op == "extract":
            inner_lo = x.params[1]
            return self.extract(x.args[0], hi + inner_lo, lo + inner_lo, x.args[0].width)
        if x.op == "zext" and lo >= x.args[0].width:
            return self.const(0, hi - lo + 1)
        if x.op == "zext" and hi < x.args[0].width:
            return self.extract(x.args[0], hi, lo, x.args[0].width)
        return self.mk("extract", (x,), hi - lo + 1, (hi, lo))

    def concat(self, x, y, wx, wy):
        if x.is_const and y.is_const:
            return self.const(CONCRETE.concat(x.value, y.value, wx, wy), wx + wy)
        if x.is_const and x.value == 0:
            return self.zext(y, wx, wy)
        return self.mk("concat", (x, y), wx + wy)

    def zext(self, x, n, w):
        if n == 0:
            return x
        if x.is_const:
            return self.const(x.value, w + n)
        if x.op == "zext":
            return self.zext(x.args[0], n + x.params[0], x.args[0].width)
        return self.mk("zext", (x,), w + n, (n,))

    def sext(self, x, n, w):
        if n == 0:
            return x
        if x.is_const:
            return self.const(CONCRETE.sext(x.value, n, w), w + n)
        return self.mk("sext", (x,), w + n, (n,))

    # --- booleans ---------------------------------------------------------------------
    def band(self, x, y):
        if x.is_const:
            return y if x.value else x
        if y.is_const:
            return x if y.value else y
        if x is y:
            return x
        r = rewrite.band(self, x, y) if self.rewrite else None
        if r is not None:
            return r
        if x.uid > y.uid:
            x, y = y, x
        return self.mk("band", (x, y), 0)

    def bor(self, x, y):
        if x.is_const:
            return x if x.value else y
        if y.is_const:
            return y if y.value else x
        if x is y:
            return x
        r = rewrite.bor(self, x, y) if self.rewrite else None
        if r is not None:
            return r
        if x.uid > y.uid:
            x, y = y, x
        return self.mk("bor", (x, y), 0)

    def bnot(self, x):
        if x.is_const:
            return self.bool_const(not x.value)
        if x.op == "bnot":
            return x.args[0]
        return self.mk("bnot", (x,), 0)

    def bxor(self, x, y):
        if x.is_const and y.is_const:
            return self.bool_const(x.value != y.value)
        if x.is_const:
            return self.bnot(y) if x.value else y
        if y.is_const:
            return self.bnot(x) if y.value else x
        if x.uid > y.uid:
            x, y = y, x
        return self.mk("bxor", (x, y), 0)

    def bite(self, c, x, y):
        if c.is_const:
            return x if c.value else y
        if x is y:
            return x
        if x.is_const and y.is_const:
            return c if x.value else self.bnot(c)
        return self.mk("bite", (c, x, y), 0)

    def node_count(self) -> int:
        """Distinct nodes built (folded nodes not counted)."""
        return self._nodes


def evaluate(root: Term, env: dict[str, int | bool]) -> int | bool:
    """Evaluate a term under an assignment of its variables, with concrete semantics."""
    return fold([root], lambda t, a: _eval_node(t, a, env))[root.uid]


def _eval_node(t: Term, a: list, env: dict) -> Any:
    C = CONCRETE
    op, w = t.op, t.width
    if op in ("const", "bconst"):
        return t.value
    if op in ("var", "bvar"):
        return env[t.params[0]]
    if op in _BIN_CONCRETE:
        return _BIN_CONCRETE[op](a[0], a[1], w)
    if op in _CMP_CONCRETE:
        return _CMP_CONCRETE[op](a[0], a[1], t.args[0].width)
    if op == "not":
        return C.not_(a[0], w)
    if op == "ite":
        return a[1] if a[0] else a[2]
    if op == "extract":
        return C.extract(a[0], t.params[0], t.params[1], t.args[0].width)
    if op == "concat":
        return C.concat(a[0], a[1], t.args[0].width, t.args[1].width)
    if op == "zext":
        return a[0]
    if op == "sext":
        return C.sext(a[0], t.params[0], t.args[0].width)
    if op == "band":
        return a[0] and a[1]
    if op == "bor":
        return a[0] or a[1]
    if op == "bnot":
        return not a[0]
    if op == "bxor":
        return a[0] != a[1]
    if op == "bite":
        return a[1] if a[0] else a[2]
    raise ValueError(f"cannot evaluate term op {op!r}")
