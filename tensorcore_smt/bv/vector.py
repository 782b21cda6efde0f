"""Vector interpreter: bit-vectors are numpy arrays, one element per dot product.

Widths up to 64 bits use uint64 arrays (modular arithmetic is native); wider values use
object arrays of Python ints, which are exact but slower. Booleans are numpy bool arrays.
Scalars broadcast, so a constant costs nothing until it meets an array.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .core import Backend

_U64 = np.uint64


def _mask(w: int) -> int:
    return (1 << w) - 1


def _wide(w: int) -> bool:
    return w > 64


def _arr(x: Any, w: int) -> Any:
    """Normalise a raw value (int, array) to the storage type for width `w`."""
    if _wide(w):
        if isinstance(x, np.ndarray) and x.dtype == object:
            return x
        if isinstance(x, np.ndarray):
            return x.astype(object)
        return int(x)
    if isinstance(x, np.ndarray):
        return x if x.dtype == _U64 else x.astype(_U64)
    return _U64(x)


class VectorBackend(Backend):
    """Evaluates the model on many rows at once (simulation, random validation)."""

    name = "vector"

    def const(self, value: int, width: int) -> Any:
        return int(value) if _wide(width) else _U64(value)

    def bool_const(self, value: bool) -> Any:
        return np.bool_(value)

    def _m(self, x: Any, w: int) -> Any:
        if w == 64:
            return x
        if _wide(w):
            return x & _mask(w)
        return x & _U64(_mask(w))

    def add(self, x: Any, y: Any, w: int) -> Any:
        return self._m(_arr(x, w) + _arr(y, w), w)

    def sub(self, x: Any, y: Any, w: int) -> Any:
        if _wide(w):
            return (x - y) & _mask(w)
        return self._m(_arr(x, w) - _arr(y, w), w)

    def mul(self, x: Any, y: Any, w: int) -> Any:
        return self._m(_arr(x, w) * _arr(y, w), w)

    def and_(self, x: Any, y: Any, w: int) -> Any:
        return _arr(x, w) & _arr(y, w)

    def or_(self, x: Any, y: Any, w: int) -> Any:
        return _arr(x, w) | _arr(y, w)

    def xor(self, x: Any, y: Any, w: int) -> Any:
        return _arr(x, w) ^ _arr(y, w)

    def not_(self, x: Any, w: int) -> Any:
        if _wide(w):
            return _mask(w) - x
        return self._m(~_arr(x, w), w)

    def _shift(self, x: Any, n: Any, w: int, left: bool) -> Any:
        """Shift with SMT-LIB semantics: amounts >= w give 0."""
        if _wide(w):
            if isinstance(n, np.ndarray):
                n = np.minimum(n.astype(object), w)
            else:
                n = min(int(n), w)
            xv = _arr(x, w)
            return ((xv << n) & _mask(w)) if left else (xv >> n)
        nv = _arr(n, w)
        big = nv >= _U64(w)
        safe = np.where(big, _U64(0), nv) if np.ndim(nv) else (_U64(0) if big else nv)
        xv = _arr(x, w)
        val = self._m(xv << safe, w) if left else xv >> safe
        if np.ndim(big) == 0:
            return _U64(0) if big else val
        return np.where(big, _U64(0), val)

    def shl(self, x: Any, n: Any, w: int) -> Any:
        return self._shift(x, n, w, True)

    def lshr(self, x: Any, n: Any, w: int) -> Any:
        return self._shift(x, n, w, False)

    def ashr(self, x: Any, n: Any, w: int) -> Any:
        neg = self.slt(x, self.const(0, w), w)
        fill = self.not_(self.lshr(self.not_(x, w), n, w), w)
        return (
            np.where(neg, fill, self.lshr(x, n, w))
            if not np.isscalar(neg)
            else (fill if neg else self.lshr(x, n, w))
        )

    def eq(self, x: Any, y: Any, w: int) -> Any:
        return np.asarray(_arr(x, w) == _arr(y, w))

    def ult(self, x: Any, y: Any, w: int) -> Any:
        return np.asarray(_arr(x, w) < _arr(y, w))

    def slt(self, x: Any, y: Any, w: int) -> Any:
        flip = 1 << (w - 1)
        if _wide(w):
            return np.asarray((_arr(x, w) ^ flip) < (_arr(y, w) ^ flip))
        f = _U64(flip)
        return np.asarray((_arr(x, w) ^ f) < (_arr(y, w) ^ f))

    def ite(self, c: Any, x: Any, y: Any, w: int) -> Any:
        if np.ndim(c) == 0:
            return x if bool(c) else y
        out = np.where(c, _arr(x, w), _arr(y, w))
        return out.astype(object) if _wide(w) and out.dtype != object else out

    def extract(self, x: Any, hi: int, lo: int, w: int) -> Any:
        out_w = hi - lo + 1
        v = _arr(x, w) >> (lo if _wide(w) else _U64(lo))
        v = v & (_mask(out_w) if _wide(w) else _U64(_mask(out_w)))
        return _arr(v, out_w) if not _wide(out_w) and _wide(w) else v

    def concat(self, x: Any, y: Any, wx: int, wy: int) -> Any:
        w = wx + wy
        return _arr(self.zext(x, wy, wx), w) << (wy if _wide(w) else _U64(wy)) | _arr(y, w)

    def zext(self, x: Any, n: int, w: int) -> Any:
        return _arr(x, w + n)

    def sext(self, x: Any, n: int, w: int) -> Any:
        neg = self.slt(x, self.const(0, w), w)
        ext = _mask(w + n) ^ _mask(w)
        xv = _arr(x, w + n)
        ext_v = ext if _wide(w + n) else _U64(ext)
        if np.ndim(neg) == 0:
            return xv | ext_v if bool(neg) else xv
        return np.where(neg, xv | ext_v, xv)

    def band(self, x: Any, y: Any) -> Any:
        return np.logical_and(x, y)

    def bor(self, x: Any, y: Any) -> Any:
        return np.logical_or(x, y)

    def bnot(self, x: Any) -> Any:
        return np.logical_not(x)

    def bxor(self, x: Any, y: Any) -> Any:
        return np.logical_xor(x, y)

    def bite(self, c: Any, x: Any, y: Any) -> Any:
        return np.where(c, x, y)

    def clz(self, x: Any, w: int) -> Any:
        if _wide(w):
            f = np.frompyfunc(lambda v: w - int(v).bit_length(), 1, 1)
            return f(x) if isinstance(x, np.ndarray) else w - int(x).bit_length()
        xv = _arr(x, w)
        # Exact bit length via float64 would lose precision above 2**53; bisect instead.
        n = np.zeros(np.shape(xv), dtype=np.int64)
        v = np.array(xv, dtype=_U64, copy=True)
        for s in (32, 16, 8, 4, 2, 1):
            top = v >> _U64(s)
            has = top != 0
            n = n + np.where(has, s, 0)
            v = np.where(has, top, v)
        bitlen = n + (v != 0)
        out = (w - bitlen).astype(_U64)
        return out if out.ndim else _U64(out)


VECTOR = VectorBackend()
