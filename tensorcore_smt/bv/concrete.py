"""Concrete interpreter: bit-vectors are Python ints, booleans are Python bools."""

from __future__ import annotations

from .core import Backend


def _mask(w: int) -> int:
    return (1 << w) - 1


def _signed(x: int, w: int) -> int:
    return x - (1 << w) if x >> (w - 1) else x


class ConcreteBackend(Backend):
    """Exact evaluation of one dot product at a time; the reference for debugging."""

    name = "concrete"

    def const(self, value: int, width: int) -> int:
        return value & _mask(width)

    def bool_const(self, value: bool) -> bool:
        return bool(value)

    def known(self, x: bool) -> bool:
        return bool(x)

    def add(self, x: int, y: int, w: int) -> int:
        return (x + y) & _mask(w)

    def sub(self, x: int, y: int, w: int) -> int:
        return (x - y) & _mask(w)

    def mul(self, x: int, y: int, w: int) -> int:
        return (x * y) & _mask(w)

    def and_(self, x: int, y: int, w: int) -> int:
        return x & y

    def or_(self, x: int, y: int, w: int) -> int:
        return x | y

    def xor(self, x: int, y: int, w: int) -> int:
        return x ^ y

    def not_(self, x: int, w: int) -> int:
        return ~x & _mask(w)

    def shl(self, x: int, n: int, w: int) -> int:
        return (x << n) & _mask(w) if n < w else 0

    def lshr(self, x: int, n: int, w: int) -> int:
        return x >> n if n < w else 0

    def ashr(self, x: int, n: int, w: int) -> int:
        return (_signed(x, w) >> min(n, w)) & _mask(w)

    def eq(self, x: int, y: int, w: int) -> bool:
        return x == y

    def ult(self, x: int, y: int, w: int) -> bool:
        return x < y

    def slt(self, x: int, y: int, w: int) -> bool:
        return _signed(x, w) < _signed(y, w)

    def ite(self, c: bool, x: int, y: int, w: int) -> int:
        return x if c else y

    def extract(self, x: int, hi: int, lo: int, w: int) -> int:
        return (x >> lo) & _mask(hi - lo + 1)

    def concat(self, x: int, y: int, wx: int, wy: int) -> int:
        return (x << wy) | y

    def zext(self, x: int, n: int, w: int) -> int:
        return x

    def sext(self, x: int, n: int, w: int) -> int:
        return _signed(x, w) & _mask(w + n)

    def band(self, x: bool, y: bool) -> bool:
        return x and y

    def bor(self, x: bool, y: bool) -> bool:
        return x or y

    def bnot(self, x: bool) -> bool:
        return not x

    def bxor(self, x: bool, y: bool) -> bool:
        return x != y

    def bite(self, c: bool, x: bool, y: bool) -> bool:
        return x if c else y

    def clz(self, x: int, w: int) -> int:
        return w - x.bit_length()


CONCRETE = ConcreteBackend()
