"""Local rewrites of the symbolic interpreter that keep every node's semantics.

The model code asks the same question in several shapes: "is this product zero" as
`(= (bvmul (zext a) (zext b)) 0)` next to the operands' own zero tests, "is a zero" as
`zero-bits and not NaN` although a zero exponent already rules NaN out. Neither the
solvers nor LLVM see through all of these (a product's zero test needs the
no-overflow argument below), so the DAG carries both shapes. These rules rewrite a new
node into an equivalent one built from nodes that usually exist already, so hash-consing
merges the two shapes:

- `(= (zext x) k)`: `(= x k)`;
- `(= (concat h l) k)`: `(and (= h k_hi) (= l k_lo))`;
- `(= (ite c k1 k2) k)` with constant arms: c, (not c) or false;
- `(= (bvmul x y) 0)` when the product cannot wrap (value ranges): `(or (= x 0) (= y 0))`;
- `(and x (not z))` when z's conjuncts contradict x's (`(= v k1)` against `(= v k2)`,
  k1 != k2, or a literal against its negation): x; `(and x y)` whose conjuncts
  contradict each other: false;
- absorption: `(or x y)` where y is a conjunction containing x, or a disjunction
  containing x: x or y (and the duals for `and`).

Each rule is an identity of QF_BV; tests prove DAGs built with and without them
equivalent (bitwuzla) and run both on the concrete interpreter. `SymbolicBackend
(rewrite=False)` builds without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .symbolic import SymbolicBackend, Term

MAX_LITERALS = 8
"""Largest conjunction (or disjunction) flattened when looking for a contradiction or
an absorbed argument: enough for the classification tests, bounded so building a
node stays O(1)."""


def eq_const(s: SymbolicBackend, v: Term, k: int) -> Term | None:
    """An equivalent of `(= v k)` for constant k, or None when no rule applies."""
    if v.op == "zext":
        x = v.args[0]  # a k that does not fit x: the value ranges decided (= v k) already
        return s.eq(x, s.const(k, x.width), x.width) if k >> x.width == 0 else None
    if v.op == "concat":
        h, low = v.args
        lo_k = k & ((1 << low.width) - 1)
        return s.band(
            s.eq(h, s.const(k >> low.width, h.width), h.width),
            s.eq(low, s.const(lo_k, low.width), low.width),
        )
    if v.op == "ite" and v.args[1].is_const and v.args[2].is_const:
        c, k1, k2 = v.args[0], v.args[1].value, v.args[2].value
        if k == k1:
            return c
        if k == k2:
            return s.bnot(c)
        return s.bool_const(False)
    if v.op == "mul" and k == 0:
        x, y = v.args
        if s.range(x).uhi * s.range(y).uhi < 1 << v.width:  # no wrap: zero iff a factor is
            return s.bor(
                s.eq(x, s.const(0, x.width), x.width), s.eq(y, s.const(0, y.width), y.width)
            )
    return None


def _flatten(t: Term, op: str) -> list[Term] | None:
    """The arguments of a tree of `op` ("band" or "bor") nodes rooted at t (t itself when
    it is another node), or None past MAX_LITERALS."""
    out: list[Term] = []
    stack = [t]
    while stack:
        u = stack.pop()
        if u.op == op:
            stack.extend(u.args)
        else:
            out.append(u)
            if len(out) > MAX_LITERALS:
                return None
    return out


def _eq_const(t: Term) -> tuple[Term, int] | None:
    """(v, k) when t is `(= v k)` or `(= k v)` with k constant, else None."""
    if t.op != "eq":
        return None
    p, q = t.args
    if q.is_const and not p.is_const:
        return p, q.value
    if p.is_const and not q.is_const:
        return q, p.value
    return None


def _contradict(xs: list[Term], ys: list[Term]) -> bool:
    """Whether some literal of xs and some literal of ys cannot both be true."""
    for x in xs:
        ex = _eq_const(x)
        for y in ys:
            if (x.op == "bnot" and x.args[0] is y) or (y.op == "bnot" and y.args[0] is x):
                return True
            ey = _eq_const(y) if ex is not None else None
            if ey is not None and ex[0] is ey[0] and ex[1] != ey[1]:
                return True
    return False


def band(s: SymbolicBackend, x: Term, y: Term) -> Term | None:
    """An equivalent of `(and x y)`, or None when no rule applies."""
    xs, ys = _flatten(x, "band"), _flatten(y, "band")
    if xs is None or ys is None:
        return None
    if _contradict(xs, ys):
        return s.bool_const(False)
    for a, b, a_conj, b_conj in ((x, y, xs, ys), (y, x, ys, xs)):
        if b.op == "bnot":
            zs = _flatten(b.args[0], "band")
            if zs is not None and _contradict(a_conj, zs):
                return a  # a implies (not z)
        if len(b_conj) > 1 and any(u is a for u in b_conj):
            return b  # a is one of b's conjuncts
        ds = _flatten(b, "bor")
        if ds is not None and len(ds) > 1 and any(u is a for u in ds):
            return a  # (and a (or a ...)) = a
    return None


def bor(s: SymbolicBackend, x: Term, y: Term) -> Term | None:
    """An equivalent of `(or x y)`, or None when no rule applies."""
    for a, b in ((x, y), (y, x)):
        ds = _flatten(b, "bor")
        if ds is not None and len(ds) > 1 and any(u is a for u in ds):
            return b  # a is one of b's disjuncts
        cs = _flatten(b, "band")
        if cs is not None and len(cs) > 1 and any(u is a for u in cs):
            return a  # (or a (and a ...)) = a
    return None
