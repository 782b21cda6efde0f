"""Vector interpreter: bit-vectors are numpy arrays, one element per dot product.

Storage follows the width: a `w`-bit value lives in the narrowest unsigned dtype that
holds it (uint8, uint16, uint32 or uint64), so most of a model runs on 8- and 16-bit
lanes; values wider than 64 bits use object arrays of Python ints (exact, slower).
Constants and other row-independent values are plain Python ints, which broadcast and
never widen an array's dtype. Booleans are numpy bool arrays or Python bools.

Every primitive returns either an input unchanged or a freshly allocated array; in-place
operations are only applied to arrays allocated by the same call, so raw values can be
shared freely. Selection is branch-free arithmetic (`y ^ (c * (x ^ y))`), which is several
times faster than `np.where` on unpredictable conditions. Shifts rely on numpy's defined
result for amounts of at least the lane width (0, or the sign fill for signed lanes).
(About 610 lines: one class, the Backend interface's every primitive for numpy, whose
lane-width rules are shared by all of them.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .core import Backend
from .dtypes import UNSIGNED

_OBJ = np.dtype(object)
_F64 = np.dtype(np.float64)


def _lane(w: int) -> int:
    return 8 if w <= 8 else 16 if w <= 16 else 32 if w <= 32 else 64


_SIGNED = {8: np.dtype(np.int8), 16: np.dtype(np.int16), 32: np.dtype(np.int32)}
_SIGNED[64] = np.dtype(np.int64)

# Indexed by width 1..64: lane bits, unsigned and signed lane dtypes, value mask.
_BITS = [0] + [_lane(w) for w in range(1, 65)]
_DT = [None] + [UNSIGNED[_BITS[w]] for w in range(1, 65)]
_SDT = [None] + [_SIGNED[_BITS[w]] for w in range(1, 65)]
_MASK = [(1 << w) - 1 for w in range(65)]


def _const_array(value: int, dt: np.dtype) -> np.ndarray:
    a = np.array(value, dtype=dt)
    a.flags.writeable = False
    return a


# The masks as read-only 0-d lane arrays: numpy takes them faster than Python ints.
_MASKA = [None] + [_const_array(_MASK[w], _DT[w]) for w in range(1, 65)]


def _mask(w: int) -> int:
    return (1 << w) - 1


def _signed(x: int, w: int) -> int:
    return x - (1 << w) if x >> (w - 1) else x


def _nat(x: Any, w: int) -> Any:
    """A raw value of width `w` <= 64 as a Python int or an array of the lane dtype."""
    if type(x) is np.ndarray:
        dt = _DT[w]
        if x.dtype is dt:
            return x
        if x.ndim == 0:
            return int(x)
        return x.astype(dt)
    return int(x)


def _obj(x: Any) -> Any:
    """A raw value wider than 64 bits as a Python int or an object array."""
    if type(x) is np.ndarray:
        if x.dtype is _OBJ:
            return x
        if x.ndim == 0:
            return int(x)
        return x.astype(_OBJ)
    return int(x)


def _bool(c: Any) -> Any:
    if type(c) is np.ndarray:
        return c if c.ndim else bool(c)
    return bool(c)


class VectorBackend(Backend):
    """Evaluates the model on many rows at once (simulation, random validation)."""

    name = "vector"

    def const(self, value: int, width: int) -> Any:
        return int(value)

    def bool_const(self, value: bool) -> Any:
        return bool(value)

    # --- inputs --------------------------------------------------------------------------
    def lanes(self, x: Any, w: int) -> Any:
        """A 1-D array of `w`-bit patterns as one contiguous raw value of the lane dtype
        (any array works as a raw value, but a foreign dtype is converted at every use)."""
        return np.ascontiguousarray(x, dtype=_OBJ if w > 64 else _DT[w])

    def columns(self, a: Any, w: int) -> list[Any]:
        """The columns of an (N, K) array of `w`-bit patterns as K contiguous raw values,
        made by one transposing copy instead of a strided conversion at every use."""
        a = np.asarray(a)
        return list(np.ascontiguousarray(a.T, dtype=_OBJ if w > 64 else _DT[w]))

    # --- arithmetic ----------------------------------------------------------------------
    def add(self, x: Any, y: Any, w: int) -> Any:
        if w > 64:
            return (_obj(x) + _obj(y)) & _mask(w)
        x, y = _nat(x, w), _nat(y, w)
        if type(x) is int:
            if type(y) is int:
                return (x + y) & _MASK[w]
            if x == 0:
                return y
        elif type(y) is int and y == 0:
            return x
        r = np.add(x, y)
        if w != _BITS[w]:
            np.bitwise_and(r, _MASKA[w], out=r)
        return r

    def sub(self, x: Any, y: Any, w: int) -> Any:
        if w > 64:
            return (_obj(x) - _obj(y)) & _mask(w)
        x, y = _nat(x, w), _nat(y, w)
        if type(y) is int:
            if type(x) is int:
                return (x - y) & _MASK[w]
            if y == 0:
                return x
        r = np.subtract(x, y)
        if w != _BITS[w]:
            np.bitwise_and(r, _MASKA[w], out=r)
        return r

    def mul(self, x: Any, y: Any, w: int) -> Any:
        if w > 64:
            return (_obj(x) * _obj(y)) & _mask(w)
        x, y = _nat(x, w), _nat(y, w)
        if type(x) is int and type(y) is int:
            return (x * y) & _MASK[w]
        r = np.multiply(x, y)
        if w != _BITS[w]:
            np.bitwise_and(r, _MASKA[w], out=r)
        return r

    def and_(self, x: Any, y: Any, w: int) -> Any:
        if w > 64:
            return _obj(x) & _obj(y)
        x, y = _nat(x, w), _nat(y, w)
        if type(x) is int:
            if type(y) is int or x == 0:
                return x & y if type(y) is int else 0
            if x == _MASK[w]:
                return y
        elif type(y) is int:
            if y == 0:
                return 0
            if y == _MASK[w]:
                return x
        return np.bitwise_and(x, y)

    def or_(self, x: Any, y: Any, w: int) -> Any:
        if w > 64:
            return _obj(x) | _obj(y)
        x, y = _nat(x, w), _nat(y, w)
        if type(x) is int:
            if type(y) is int:
                return x | y
            if x == 0:
                return y
        elif type(y) is int and y == 0:
            return x
        return np.bitwise_or(x, y)

    def xor(self, x: Any, y: Any, w: int) -> Any:
        if w > 64:
            return _obj(x) ^ _obj(y)
        x, y = _nat(x, w), _nat(y, w)
        if type(x) is int:
            if type(y) is int:
                return x ^ y
            if x == 0:
                return y
        elif type(y) is int and y == 0:
            return x
        return np.bitwise_xor(x, y)

    def not_(self, x: Any, w: int) -> Any:
        if w > 64:
            return _mask(w) - _obj(x)
        x = _nat(x, w)
        if type(x) is int:
            return x ^ _MASK[w]
        return np.bitwise_xor(x, _MASKA[w])

    # --- shifts (SMT-LIB: amounts >= w give 0, or the sign fill for ashr) -----------------
    def shl(self, x: Any, n: Any, w: int) -> Any:
        if w > 64:
            x, n = _obj(x), _obj(n)
            n = min(n, w) if type(n) is int else np.minimum(n, w)
            return (x << n) & _mask(w)
        x, n = _nat(x, w), _nat(n, w)
        if type(n) is int:
            if n >= w:
                return 0
            if n == 0:
                return x
            if type(x) is int:
                return (x << n) & _MASK[w]
        elif type(x) is int and x == 0:
            return 0
        # x < 2**w, so any amount in [w, lane) shifts every bit above the mask, and
        # numpy gives 0 for amounts >= the lane width.
        r = np.left_shift(x, n)
        if w != _BITS[w]:
            np.bitwise_and(r, _MASKA[w], out=r)
        return r

    def lshr(self, x: Any, n: Any, w: int) -> Any:
        if w > 64:
            x, n = _obj(x), _obj(n)
            n = min(n, w) if type(n) is int else np.minimum(n, w)
            return x >> n
        x, n = _nat(x, w), _nat(n, w)
        if type(n) is int:
            if n >= w:
                return 0
            if n == 0:
                return x
            if type(x) is int:
                return x >> n
        elif type(x) is int and x == 0:
            return 0
        return np.right_shift(x, n)

    def ashr(self, x: Any, n: Any, w: int) -> Any:
        if w > 64:
            x, n = _obj(x), _obj(n)
            n = min(n, w) if type(n) is int else np.minimum(n, w)
            neg = self.bit(x, w - 1, w)
            fill = _mask(w) - ((_mask(w) - x) >> n)
            return self.ite(neg, fill, x >> n, w)
        x, n = _nat(x, w), _nat(n, w)
        bits = _BITS[w]
        if type(n) is int:
            if n == 0:
                return x
            if type(x) is int:
                return (_signed(x, w) >> min(n, w)) & _MASK[w]
            ns = min(n, bits - 1)
        else:
            ns = np.minimum(n, bits - 1).view(_SDT[w])
        if type(x) is int:
            xs = _signed(x, w)
        elif w == bits:
            xs = x.view(_SDT[w])
        else:  # sign-extend into the lane
            sb = 1 << (w - 1)
            t = np.bitwise_xor(x, sb)
            np.subtract(t, sb, out=t)
            xs = t.view(_SDT[w])
        r = np.right_shift(xs, ns).view(_DT[w])
        if w != bits:
            np.bitwise_and(r, _MASKA[w], out=r)
        return r

    # --- comparisons ---------------------------------------------------------------------
    def eq(self, x: Any, y: Any, w: int) -> Any:
        if w > 64:
            return _cmp_out(np.equal(_obj(x), _obj(y)))
        x, y = _nat(x, w), _nat(y, w)
        if type(x) is int and type(y) is int:
            return x == y
        return np.equal(x, y)

    def ne(self, x: Any, y: Any, w: int) -> Any:
        if w > 64:
            return _cmp_out(np.not_equal(_obj(x), _obj(y)))
        x, y = _nat(x, w), _nat(y, w)
        if type(x) is int and type(y) is int:
            return x != y
        return np.not_equal(x, y)

    def ult(self, x: Any, y: Any, w: int) -> Any:
        if w > 64:
            return _cmp_out(np.less(_obj(x), _obj(y)))
        x, y = _nat(x, w), _nat(y, w)
        if type(x) is int and type(y) is int:
            return x < y
        return np.less(x, y)

    def ule(self, x: Any, y: Any, w: int) -> Any:
        if w > 64:
            return _cmp_out(np.less_equal(_obj(x), _obj(y)))
        x, y = _nat(x, w), _nat(y, w)
        if type(x) is int and type(y) is int:
            return x <= y
        return np.less_equal(x, y)

    def _signed_pair(self, x: Any, y: Any, w: int) -> tuple[Any, Any]:
        """Both operands mapped so that unsigned or signed lane order is signed order."""
        if w == _BITS[w]:  # the lane's signed view is the value
            sdt = _SDT[w]
            xs = _signed(x, w) if type(x) is int else x.view(sdt)
            ys = _signed(y, w) if type(y) is int else y.view(sdt)
            return xs, ys
        f = 1 << (w - 1)  # flipping the sign bit makes unsigned order signed order
        return (x ^ f if type(x) is int else np.bitwise_xor(x, f)), (
            y ^ f if type(y) is int else np.bitwise_xor(y, f)
        )

    def slt(self, x: Any, y: Any, w: int) -> Any:
        if w > 64:
            f = 1 << (w - 1)
            return _cmp_out(np.less(_obj(x) ^ f, _obj(y) ^ f))
        x, y = _nat(x, w), _nat(y, w)
        if type(x) is int and type(y) is int:
            return _signed(x, w) < _signed(y, w)
        xs, ys = self._signed_pair(x, y, w)
        return np.less(xs, ys)

    def sle(self, x: Any, y: Any, w: int) -> Any:
        if w > 64:
            f = 1 << (w - 1)
            return _cmp_out(np.less_equal(_obj(x) ^ f, _obj(y) ^ f))
        x, y = _nat(x, w), _nat(y, w)
        if type(x) is int and type(y) is int:
            return _signed(x, w) <= _signed(y, w)
        xs, ys = self._signed_pair(x, y, w)
        return np.less_equal(xs, ys)

    def bit(self, x: Any, i: int, w: int) -> Any:
        if w > 64:
            x = _obj(x)
            if type(x) is int:
                return bool((x >> i) & 1)
            return _cmp_out(np.not_equal(np.bitwise_and(x, 1 << i), 0))
        x = _nat(x, w)
        if type(x) is int:
            return bool((x >> i) & 1)
        if i == w - 1:  # the top bit: one comparison
            if w == _BITS[w]:
                return np.less(x.view(_SDT[w]), 0)
            return np.greater_equal(x, 1 << i)
        r = np.bitwise_and(x, 1 << i)
        return r.astype(bool)

    # --- derived operations ------------------------------------------------------------
    def abs(self, x: Any, w: int) -> Any:
        if w > 64:
            return super().abs(x, w)
        x = _nat(x, w)
        if type(x) is int:
            return abs(_signed(x, w)) & _MASK[w]
        sdt = _SDT[w]
        if w == _BITS[w]:
            return np.abs(x.view(sdt)).view(_DT[w])
        sb = 1 << (w - 1)  # sign-extend into the lane; |value| <= 2**(w-1) fits
        t = np.bitwise_xor(x, sb)
        np.subtract(t, sb, out=t)
        ts = t.view(sdt)
        np.abs(ts, out=ts)
        return t

    def _sminmax(self, x: Any, y: Any, w: int, fn) -> Any:
        if w > 64:
            return None
        x, y = _nat(x, w), _nat(y, w)
        if type(x) is int and type(y) is int:
            return x if fn(_signed(x, w), _signed(y, w)) == _signed(x, w) else y
        if type(x) is int:
            x, y = y, x
        if w == _BITS[w]:
            sdt = _SDT[w]
            xs = x.view(sdt)
            if type(y) is int:
                return _minmax_const(fn, xs, _signed(y, w)).view(_DT[w])
            return fn(xs, y.view(sdt)).view(_DT[w])
        f = 1 << (w - 1)  # flipping the sign bit makes unsigned order signed order
        t = np.bitwise_xor(x, f)
        if type(y) is int:
            u = np.full(t.shape, y ^ f, t.dtype)
            fn(t, u, out=t)
        else:
            fn(t, np.bitwise_xor(y, f), out=t)
        np.bitwise_xor(t, f, out=t)
        return t

    def smax(self, x: Any, y: Any, w: int) -> Any:
        r = self._sminmax(x, y, w, np.maximum)
        return super().smax(x, y, w) if r is None else r

    def smin(self, x: Any, y: Any, w: int) -> Any:
        r = self._sminmax(x, y, w, np.minimum)
        return super().smin(x, y, w) if r is None else r

    def umin(self, x: Any, y: Any, w: int) -> Any:
        if w > 64:
            return super().umin(x, y, w)
        x, y = _nat(x, w), _nat(y, w)
        if type(x) is int and type(y) is int:
            return min(x, y)
        if type(x) is int:
            x, y = y, x
        if type(y) is int:
            if y >= _MASK[w]:
                return x
            return _minmax_const(np.minimum, x, y)
        return np.minimum(x, y)

    # --- structure -----------------------------------------------------------------------
    def ite(self, c: Any, x: Any, y: Any, w: int) -> Any:
        c = _bool(c)
        if type(c) is bool:
            return x if c else y
        if w > 64:
            x, y = _obj(x), _obj(y)
            if type(x) is int and type(y) is int:
                if x == y:
                    return x
                out = np.full(c.shape, y, dtype=_OBJ)
                out[c] = x
                return out
            return _obj(np.where(c, x, y))
        x, y = _nat(x, w), _nat(y, w)
        if x is y:
            return x
        dt = _DT[w]
        if type(x) is int and type(y) is int:
            if x == y:
                return x
            # y ^ (c * (x ^ y)) on the 0/1 lane copy of c
            r = c.astype(dt)
            d = x ^ y
            if d != 1:
                np.multiply(r, d, out=r)
            if y:
                np.bitwise_xor(r, y, out=r)
            return r
        r = np.bitwise_xor(x, y)
        np.multiply(r, c, out=r)  # the bool operand is cast blockwise, without a copy
        np.bitwise_xor(r, y, out=r)
        return r

    def extract(self, x: Any, hi: int, lo: int, w: int) -> Any:
        ow = hi - lo + 1
        if w > 64:
            x = _obj(x)
            v = (x >> lo) & _mask(ow)
            if ow <= 64 and type(v) is not int:
                v = v.astype(_DT[ow])
            return v
        x = _nat(x, w)
        if type(x) is int:
            return (x >> lo) & _MASK[ow]
        v = np.right_shift(x, lo) if lo else x
        odt = _DT[ow]
        if odt is not v.dtype:
            v = v.astype(odt)  # keeps the low lane bits
        if hi < w - 1 and ow != _BITS[ow]:
            if v is x:
                v = np.bitwise_and(v, _MASKA[ow])
            else:
                np.bitwise_and(v, _MASKA[ow], out=v)
        return v

    def concat(self, x: Any, y: Any, wx: int, wy: int) -> Any:
        w = wx + wy
        if w > 64:
            x, y = _obj(x), _obj(y)
            return (x << wy) | y
        x, y = _nat(x, wx), _nat(y, wy)
        if type(x) is int:
            if type(y) is int:
                return (x << wy) | y
            hi = x << wy
            yv = _nat(y, w)
            return np.bitwise_or(yv, hi) if hi else yv
        dt = _DT[w]
        xv = x if x.dtype is dt else x.astype(dt)
        r = np.left_shift(xv, wy)
        if type(y) is int:
            if y:
                np.bitwise_or(r, y, out=r)
        else:
            np.bitwise_or(r, y, out=r)
        return r

    def zext(self, x: Any, n: int, w: int) -> Any:
        if w + n > 64:
            return _obj(x)
        return _nat(x, w + n)

    def sext(self, x: Any, n: int, w: int) -> Any:
        W = w + n
        if W > 64:
            x = _obj(x) if w > 64 else _nat(x, w)
            if type(x) is int:
                return _signed(x, w) & _mask(W)
            neg = self.bit(x, w - 1, w)
            xv = _obj(x)
            return self.ite(neg, xv | (_mask(W) ^ _mask(w)), xv, W)
        x = _nat(x, w)
        if type(x) is int:
            return _signed(x, w) & _MASK[W]
        sb = 1 << (w - 1)  # (x ^ sb) - sb is x sign-extended, modulo the lane
        r = np.bitwise_xor(_nat(x, W), sb)
        np.subtract(r, sb, out=r)
        if W != _BITS[W]:
            np.bitwise_and(r, _MASKA[W], out=r)
        return r

    # --- booleans ------------------------------------------------------------------------
    def band(self, x: Any, y: Any) -> Any:
        x, y = _bool(x), _bool(y)
        if type(x) is bool:
            return y if x else False
        if type(y) is bool:
            return x if y else False
        return np.bitwise_and(x, y)

    def bor(self, x: Any, y: Any) -> Any:
        x, y = _bool(x), _bool(y)
        if type(x) is bool:
            return True if x else y
        if type(y) is bool:
            return True if y else x
        return np.bitwise_or(x, y)

    def bnot(self, x: Any) -> Any:
        x = _bool(x)
        if type(x) is bool:
            return not x
        return np.logical_not(x)

    def bxor(self, x: Any, y: Any) -> Any:
        x, y = _bool(x), _bool(y)
        if type(x) is bool:
            return self.bnot(y) if x else y
        if type(y) is bool:
            return self.bnot(x) if y else x
        return np.not_equal(x, y)

    def bite(self, c: Any, x: Any, y: Any) -> Any:
        c, x, y = _bool(c), _bool(x), _bool(y)
        if type(c) is bool:
            return x if c else y
        if x is y:
            return x
        if type(x) is bool:
            return self.bor(c, y) if x else self.band(np.logical_not(c), y)
        if type(y) is bool:
            return self.bor(np.logical_not(c), x) if y else self.band(c, x)
        return np.bitwise_or(np.bitwise_and(c, x), np.bitwise_and(np.logical_not(c), y))

    # --- counting --------------------------------------------------------------------------
    def clz(self, x: Any, w: int) -> Any:
        if w > 64:
            x = _obj(x)
            if type(x) is int:
                return w - x.bit_length()
            f = np.frompyfunc(lambda v: w - int(v).bit_length(), 1, 1)
            return f(x)
        x = _nat(x, w)
        if type(x) is int:
            return w - x.bit_length()
        if w <= 52:
            # x + 0.5 is exact below 2**52, has x's bit length, and is not zero: its float
            # exponent field is bitlen(x) + 1022 (1022 for x == 0).
            f = x.astype(_F64)
            np.add(f, 0.5, out=f)
            e = f.view(np.uint64)
            np.right_shift(e, 52, out=e)
            np.subtract(w + 1022, e, out=e)
        else:
            # Split so both halves convert exactly: the high part carries the leading one
            # whenever it is non-zero, and then its bit length is the larger one.
            lo_mask = (1 << (w - 52)) - 1
            hi = np.bitwise_and(x, _MASK[w] ^ lo_mask).astype(_F64).view(np.uint64)
            lo = np.bitwise_and(x, lo_mask).astype(_F64).view(np.uint64)
            e = np.maximum(hi, lo)  # same sign, so the larger float has the larger bits
            np.right_shift(e, 52, out=e)
            e = np.maximum(e, 1022)
            np.subtract(w + 1022, e, out=e)
        return e.astype(_DT[w])


def _minmax_const(fn, x: np.ndarray, k: int) -> np.ndarray:
    """fn(x, k) for a scalar k: numpy's minimum/maximum against a scalar is several times
    slower than against an array, so the constant is materialised first."""
    r = np.full(x.shape, k, x.dtype)
    fn(x, r, out=r)
    return r


def _cmp_out(r: Any) -> Any:
    """Comparison results of object arrays as bool arrays (or bools)."""
    if type(r) is np.ndarray:
        return r.astype(bool) if r.ndim else bool(r)
    return bool(r)


VECTOR = VectorBackend()
