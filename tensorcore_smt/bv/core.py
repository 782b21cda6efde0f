"""The arithmetic interface every model algorithm is written against.

A model algorithm manipulates fixed-width bit-vectors (`BV`) and booleans (`Bool`).
Both are thin wrappers around a raw value owned by a `Backend`: a Python int (concrete
interpreter), a numpy array (vector interpreter) or an SMT term (symbolic interpreter).
Widths and every model parameter are plain Python ints; only operand values vary.

Semantics follow SMT-LIB QF_BV: values are unsigned modulo 2**width, shifts by an amount
greater than or equal to the width give zero (or the sign fill for `ashr`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class Backend:
    """Primitive operations of one interpreter. Subclasses implement every method."""

    name = "abstract"

    # --- constants -------------------------------------------------------------------
    def const(self, value: int, width: int) -> Any: ...
    def bool_const(self, value: bool) -> Any: ...

    # --- bit-vector arithmetic (operands of equal width) -----------------------------
    def add(self, x: Any, y: Any, w: int) -> Any: ...
    def sub(self, x: Any, y: Any, w: int) -> Any: ...
    def mul(self, x: Any, y: Any, w: int) -> Any: ...
    def and_(self, x: Any, y: Any, w: int) -> Any: ...
    def or_(self, x: Any, y: Any, w: int) -> Any: ...
    def xor(self, x: Any, y: Any, w: int) -> Any: ...
    def not_(self, x: Any, w: int) -> Any: ...
    def shl(self, x: Any, n: Any, w: int) -> Any: ...
    def lshr(self, x: Any, n: Any, w: int) -> Any: ...
    def ashr(self, x: Any, n: Any, w: int) -> Any: ...

    # --- comparisons -> raw bool ------------------------------------------------------
    def eq(self, x: Any, y: Any, w: int) -> Any: ...
    def ult(self, x: Any, y: Any, w: int) -> Any: ...
    def slt(self, x: Any, y: Any, w: int) -> Any: ...

    # --- structure --------------------------------------------------------------------
    def ite(self, c: Any, x: Any, y: Any, w: int) -> Any: ...
    def extract(self, x: Any, hi: int, lo: int, w: int) -> Any: ...
    def concat(self, x: Any, y: Any, wx: int, wy: int) -> Any: ...
    def zext(self, x: Any, n: int, w: int) -> Any: ...
    def sext(self, x: Any, n: int, w: int) -> Any: ...

    # --- booleans ---------------------------------------------------------------------
    def band(self, x: Any, y: Any) -> Any: ...
    def bor(self, x: Any, y: Any) -> Any: ...
    def bnot(self, x: Any) -> Any: ...
    def bxor(self, x: Any, y: Any) -> Any: ...
    def bite(self, c: Any, x: Any, y: Any) -> Any: ...

    def known(self, x: Any) -> bool | None:
        """The value of raw bool `x` when it is the same on every input the backend
        represents (a constant), else None. Lets an algorithm skip work that a constant
        makes void, such as adding a term that is zero on every input."""
        return None

    # --- derived primitives a backend may implement faster ----------------------------
    # Each default below builds its result from the primitives above, in the order the
    # corresponding `BV` method always did, so the symbolic DAG does not depend on them.
    def ne(self, x: Any, y: Any, w: int) -> Any:
        return self.bnot(self.eq(x, y, w))

    def ule(self, x: Any, y: Any, w: int) -> Any:
        return self.bnot(self.ult(y, x, w))

    def sle(self, x: Any, y: Any, w: int) -> Any:
        return self.bnot(self.slt(y, x, w))

    def bit(self, x: Any, i: int, w: int) -> Any:
        """Bit `i` of `x` as a raw bool."""
        xi = x if (i == 0 and w == 1) else self.extract(x, i, i, w)
        return self.eq(xi, self.const(1, 1), 1)

    def abs(self, x: Any, w: int) -> Any:
        """Two's-complement magnitude (the minimum value maps to itself)."""
        neg = self.bit(x, w - 1, w)
        return self.ite(neg, self.sub(self.const(0, w), x, w), x, w)

    def smax(self, x: Any, y: Any, w: int) -> Any:
        return self.ite(self.slt(x, y, w), y, x, w)

    def smin(self, x: Any, y: Any, w: int) -> Any:
        return self.ite(self.slt(x, y, w), x, y, w)

    def umin(self, x: Any, y: Any, w: int) -> Any:
        return self.ite(self.ult(x, y, w), x, y, w)

    def clz(self, x: Any, w: int) -> Any:
        """Count leading zeros of `x` as a `w`-bit value (w when x == 0), by bisection."""
        bx = BV(self, x, w)
        span = 1
        while span < w:
            span *= 2
        cur = bx.zext(span - w) << (span - w) if span > w else bx
        cw = span.bit_length() + 1
        count = BV.const(self, 0, cw)
        step = span // 2
        while step >= 1:
            top_zero = cur.lshr(span - step).eq(0)
            count = top_zero.ite(count + step, count)
            cur = top_zero.ite(cur << step, cur)
            step //= 2
        count = bx.eq(0).ite(BV.const(self, w, cw), count)
        return count.resize(w).v


def _coerce(backend: Backend, other: Any, w: int) -> Any:
    """Turn a Python int into a raw constant of width `w`; pass BV values through."""
    if isinstance(other, BV):
        if other.w != w:
            raise ValueError(f"width mismatch: {other.w} vs {w}")
        return other.v
    if isinstance(other, int):
        return backend.const(other % (1 << w), w)
    raise TypeError(f"cannot use {type(other).__name__} as a bit-vector")


def _check_shift(n: Any) -> None:
    """A shift by a constant must be by a nonnegative amount: a negative one would be
    read modulo the width (a shift by nearly the whole width) and silently lose bits."""
    if isinstance(n, int) and n < 0:
        raise ValueError(f"shift by a negative constant amount ({n})")


class Bool:
    """A boolean of one interpreter; combine with & | ^ ~ and choose with `ite`."""

    __slots__ = ("b", "v")

    def __init__(self, backend: Backend, v: Any):
        self.b = backend
        self.v = v

    @staticmethod
    def const(backend: Backend, value: bool) -> Bool:
        return Bool(backend, backend.bool_const(bool(value)))

    def _raw(self, other: Bool | bool) -> Any:
        if isinstance(other, Bool):
            return other.v
        return self.b.bool_const(bool(other))

    def __and__(self, other: Bool | bool) -> Bool:
        return Bool(self.b, self.b.band(self.v, self._raw(other)))

    __rand__ = __and__

    def __or__(self, other: Bool | bool) -> Bool:
        return Bool(self.b, self.b.bor(self.v, self._raw(other)))

    __ror__ = __or__

    def __xor__(self, other: Bool | bool) -> Bool:
        return Bool(self.b, self.b.bxor(self.v, self._raw(other)))

    def __invert__(self) -> Bool:
        return Bool(self.b, self.b.bnot(self.v))

    def ite(self, x: BV | Bool | int, y: BV | Bool | int) -> Any:
        """If-then-else on bit-vectors (ints are coerced to the other arm's width) or bools."""
        if isinstance(x, Bool) or isinstance(y, Bool) or isinstance(x, bool):
            xr = x.v if isinstance(x, Bool) else self.b.bool_const(bool(x))
            yr = y.v if isinstance(y, Bool) else self.b.bool_const(bool(y))
            return Bool(self.b, self.b.bite(self.v, xr, yr))
        if isinstance(x, BV):
            w = x.w
        elif isinstance(y, BV):
            w = y.w
        else:
            raise TypeError("ite needs at least one bit-vector arm")
        return BV(self.b, self.b.ite(self.v, _coerce(self.b, x, w), _coerce(self.b, y, w), w), w)

    def known(self) -> bool | None:
        """True/False when this bool is a constant of its interpreter, else None."""
        return self.b.known(self.v)

    def to_bv(self, w: int = 1) -> BV:
        return self.ite(BV.const(self.b, 1, w), BV.const(self.b, 0, w))


class BV:
    """A fixed-width bit-vector of one interpreter.

    Operators: + - * & | ^ ~ (modular), << and >> (logical) by an int or a BV of equal
    width. Comparisons are methods because signedness must be explicit.
    """

    __slots__ = ("b", "v", "w")

    def __init__(self, backend: Backend, v: Any, w: int):
        self.b = backend
        self.v = v
        self.w = w

    @staticmethod
    def const(backend: Backend, value: int, w: int) -> BV:
        return BV(backend, backend.const(value % (1 << w), w), w)

    def _o(self, other: Any) -> Any:
        return _coerce(self.b, other, self.w)

    def _mk(self, v: Any) -> BV:
        return BV(self.b, v, self.w)

    # arithmetic
    def __add__(self, o: Any) -> BV:
        return self._mk(self.b.add(self.v, self._o(o), self.w))

    __radd__ = __add__

    def __sub__(self, o: Any) -> BV:
        return self._mk(self.b.sub(self.v, self._o(o), self.w))

    def __rsub__(self, o: Any) -> BV:
        return self._mk(self.b.sub(self._o(o), self.v, self.w))

    def __mul__(self, o: Any) -> BV:
        return self._mk(self.b.mul(self.v, self._o(o), self.w))

    __rmul__ = __mul__

    def __neg__(self) -> BV:
        return self._mk(self.b.sub(self.b.const(0, self.w), self.v, self.w))

    def __and__(self, o: Any) -> BV:
        return self._mk(self.b.and_(self.v, self._o(o), self.w))

    __rand__ = __and__

    def __or__(self, o: Any) -> BV:
        return self._mk(self.b.or_(self.v, self._o(o), self.w))

    __ror__ = __or__

    def __xor__(self, o: Any) -> BV:
        return self._mk(self.b.xor(self.v, self._o(o), self.w))

    __rxor__ = __xor__

    def __invert__(self) -> BV:
        return self._mk(self.b.not_(self.v, self.w))

    def __lshift__(self, n: Any) -> BV:
        _check_shift(n)
        if isinstance(n, int) and n >= self.w:
            return BV.const(self.b, 0, self.w)
        return self._mk(self.b.shl(self.v, self._o(n), self.w))

    def __rshift__(self, n: Any) -> BV:
        return self.lshr(n)

    def lshr(self, n: Any) -> BV:
        _check_shift(n)
        if isinstance(n, int) and n >= self.w:
            return BV.const(self.b, 0, self.w)
        return self._mk(self.b.lshr(self.v, self._o(n), self.w))

    def ashr(self, n: Any) -> BV:
        _check_shift(n)
        if isinstance(n, int):
            n = min(n, self.w - 1)
        return self._mk(self.b.ashr(self.v, self._o(n), self.w))

    # comparisons
    def eq(self, o: Any) -> Bool:
        return Bool(self.b, self.b.eq(self.v, self._o(o), self.w))

    def ne(self, o: Any) -> Bool:
        return Bool(self.b, self.b.ne(self.v, self._o(o), self.w))

    def ult(self, o: Any) -> Bool:
        return Bool(self.b, self.b.ult(self.v, self._o(o), self.w))

    def ule(self, o: Any) -> Bool:
        return Bool(self.b, self.b.ule(self.v, self._o(o), self.w))

    def ugt(self, o: Any) -> Bool:
        return Bool(self.b, self.b.ult(self._o(o), self.v, self.w))

    def uge(self, o: Any) -> Bool:
        return Bool(self.b, self.b.ule(self._o(o), self.v, self.w))

    def slt(self, o: Any) -> Bool:
        return Bool(self.b, self.b.slt(self.v, self._o(o), self.w))

    def sle(self, o: Any) -> Bool:
        return Bool(self.b, self.b.sle(self.v, self._o(o), self.w))

    def sgt(self, o: Any) -> Bool:
        return Bool(self.b, self.b.slt(self._o(o), self.v, self.w))

    def sge(self, o: Any) -> Bool:
        return Bool(self.b, self.b.sle(self._o(o), self.v, self.w))

    # structure
    def extract(self, hi: int, lo: int) -> BV:
        if lo == 0 and hi == self.w - 1:
            return self
        return BV(self.b, self.b.extract(self.v, hi, lo, self.w), hi - lo + 1)

    def bit(self, i: int) -> Bool:
        return Bool(self.b, self.b.bit(self.v, i, self.w))

    def concat(self, low: BV) -> BV:
        return BV(self.b, self.b.concat(self.v, low.v, self.w, low.w), self.w + low.w)

    def zext(self, n: int) -> BV:
        if n == 0:
            return self
        return BV(self.b, self.b.zext(self.v, n, self.w), self.w + n)

    def sext(self, n: int) -> BV:
        if n == 0:
            return self
        return BV(self.b, self.b.sext(self.v, n, self.w), self.w + n)

    def resize(self, w: int, signed: bool = False) -> BV:
        """Zero/sign-extend or truncate (keeping low bits) to width `w`."""
        if w == self.w:
            return self
        if w < self.w:
            return self.extract(w - 1, 0)
        return self.sext(w - self.w) if signed else self.zext(w - self.w)

    def msb(self) -> Bool:
        return self.bit(self.w - 1)

    def is_neg(self) -> Bool:
        return self.msb()

    def abs(self) -> BV:
        return self._mk(self.b.abs(self.v, self.w))

    def clz(self) -> BV:
        return BV(self.b, self.b.clz(self.v, self.w), self.w)

    def smax(self, o: BV | int) -> BV:
        return self._mk(self.b.smax(self.v, self._o(o), self.w))

    def smin(self, o: BV | int) -> BV:
        return self._mk(self.b.smin(self.v, self._o(o), self.w))

    def umin(self, o: BV | int) -> BV:
        return self._mk(self.b.umin(self.v, self._o(o), self.w))

    def any_bits(self) -> Bool:
        return self.ne(0)


def any_of(backend: Backend, flags: Sequence[Bool]) -> Bool:
    """Disjunction of `flags` (false when empty)."""
    out = Bool.const(backend, False)
    for f in flags:
        out = out | f
    return out


def all_of(backend: Backend, flags: Sequence[Bool]) -> Bool:
    """Conjunction of `flags` (true when empty)."""
    out = Bool.const(backend, True)
    for f in flags:
        out = out & f
    return out
