"""Vector interpreter on any array namespace of the Python array API (torch, numpy, ...).

`ArrayBackend(xp, device)` runs the same model code as `vector.py` on arrays of the
namespace `xp` (from `array_api_compat`), e.g. torch tensors on a CPU or a CUDA device.
It uses only what every namespace has, so one lane type serves all widths:

- a value of width w <= 63 lives in an int64 array, non-negative, below 2**w: int64
  arithmetic wraps modulo 2**64 and a mask brings the result back to w bits, so add,
  sub, mul, and, or, xor, shifts and unsigned comparisons are the plain operators, and
  signed views are made by sign extension ``(x ^ 2**(w-1)) - 2**(w-1)``;
- values of 64 bits and more (fp64 operands, wide exact accumulators) are handed to the
  numpy vector interpreter on the host (`vector.VECTOR`, uint64 and object arrays) and
  come back to the device when an extract narrows them below 64 bits.

Constants are Python ints and booleans Python bools, as in the numpy interpreter, so
row-independent values cost nothing. Shift amounts are clamped to 63 before shifting
(every namespace defines shifts by 0..63 of int64), which gives SMT-LIB's results for
amounts of at least the width once the result is masked.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .core import Backend
from .vector import VECTOR

WIDE = 64
"""Widths from here up run on the host's numpy interpreter."""


def _mask(w: int) -> int:
    return (1 << w) - 1


class ArrayBackend(Backend):
    """The vector interpreter on the array namespace `xp`, arrays on `device`."""

    name = "array"

    def __init__(self, xp: Any, device: Any = None) -> None:
        import array_api_compat

        self.xp = xp
        self.device = device
        self.int64 = xp.int64
        self.is_numpy = array_api_compat.is_numpy_namespace(xp)

    # --- conversions between lanes, the host and the device -----------------------------
    def _d(self, x: Any) -> Any:
        """A raw value of width < 64 as a Python int or an int64 array on the device."""
        if type(x) is int:
            return x
        if isinstance(x, np.ndarray):
            if x.ndim == 0:
                return int(x)
            if self.is_numpy:
                return x if x.dtype == np.int64 else x.astype(np.int64)
            return self.xp.asarray(x.astype(np.int64), device=self.device)
        if isinstance(x, np.integer):
            return int(x)
        return x

    def _h(self, x: Any) -> Any:
        """A raw value as numpy's vector interpreter takes it (host arrays, Python ints)."""
        if type(x) is int or isinstance(x, np.ndarray):
            return x
        if isinstance(x, np.integer):
            return int(x)
        return _to_numpy(x)

    def _b(self, c: Any) -> Any:
        """A raw bool as a Python bool or a bool array on the device."""
        if type(c) is bool:
            return c
        if isinstance(c, np.ndarray):
            if c.ndim == 0:
                return bool(c)
            if self.is_numpy:
                return c
            return self.xp.asarray(c, device=self.device)
        if isinstance(c, np.bool_):
            return bool(c)
        return c

    def _hb(self, c: Any) -> Any:
        c = self._b(c)
        return c if type(c) is bool else self._h(c)

    def _full(self, v: int, like: Any) -> Any:
        return self.xp.full(like.shape, v, dtype=self.int64, device=self.device)

    def _arr(self, x: Any, like: Any) -> Any:
        return self._full(x, like) if type(x) is int else x

    def to_host(self, x: Any, n: int) -> np.ndarray:
        """A raw result as an (n,) uint64 (or object, above 64 bits) numpy array."""
        if type(x) is int or isinstance(x, np.integer):
            return np.full(n, int(x), dtype=np.uint64 if int(x) >> 64 == 0 else object)
        a = x if isinstance(x, np.ndarray) else _to_numpy(x)
        return a if a.dtype == object else a.astype(np.uint64)

    # --- constants and inputs -------------------------------------------------------------
    def const(self, value: int, width: int) -> Any:
        return int(value)

    def bool_const(self, value: bool) -> Any:
        return bool(value)

    def lanes(self, x: Any, w: int) -> Any:
        """A 1-D array of `w`-bit patterns (numpy, or an array of the namespace)."""
        if w >= WIDE:
            return VECTOR.lanes(self._h(x), w)
        if isinstance(x, np.ndarray):
            return self._d(np.ascontiguousarray(x, dtype=np.int64))
        return self.xp.asarray(x, dtype=self.int64, device=self.device)

    def columns(self, a: Any, w: int) -> list[Any]:
        """The columns of an (N, K) array of `w`-bit patterns."""
        if w >= WIDE:
            return VECTOR.columns(self._h(a), w)
        if isinstance(a, np.ndarray):
            return [self._d(col) for col in np.ascontiguousarray(a.T, dtype=np.int64)]
        t = self.xp.asarray(a, dtype=self.int64, device=self.device)
        return [t[:, k] for k in range(t.shape[1])]

    # --- arithmetic ---------------------------------------------------------------------
    def _wrap(self, op: str, x: Any, y: Any, w: int) -> Any:
        x, y = self._d(x), self._d(y)
        if op == "+":
            r = x + y
        elif op == "-":
            r = x - y
        else:
            r = x * y
        return r & _mask(w)

    def add(self, x: Any, y: Any, w: int) -> Any:
        if w >= WIDE:
            return VECTOR.add(self._h(x), self._h(y), w)
        return self._wrap("+", x, y, w)

    def sub(self, x: Any, y: Any, w: int) -> Any:
        if w >= WIDE:
            return VECTOR.sub(self._h(x), self._h(y), w)
        return self._wrap("-", x, y, w)

    def mul(self, x: Any, y: Any, w: int) -> Any:
        if w >= WIDE:
            return VECTOR.mul(self._h(x), self._h(y), w)
        return self._wrap("*", x, y, w)

    def and_(self, x: Any, y: Any, w: int) -> Any:
        if w >= WIDE:
            return VECTOR.and_(self._h(x), self._h(y), w)
        return self._d(x) & self._d(y)

    def or_(self, x: Any, y: Any, w: int) -> Any:
        if w >= WIDE:
            return VECTOR.or_(self._h(x), self._h(y), w)
        return self._d(x) | self._d(y)

    def xor(self, x: Any, y: Any, w: int) -> Any:
        if w >= WIDE:
            return VECTOR.xor(self._h(x), self._h(y), w)
        return self._d(x) ^ self._d(y)

    def not_(self, x: Any, w: int) -> Any:
        if w >= WIDE:
            return VECTOR.not_(self._h(x), w)
        return self._d(x) ^ _mask(w)

    # --- shifts -------------------------------------------------------------------------
    def _amount(self, n: Any) -> Any:
        return min(n, WIDE - 1) if type(n) is int else self.xp.minimum(n, self._full(63, n))

    def shl(self, x: Any, n: Any, w: int) -> Any:
        if w >= WIDE:
            return VECTOR.shl(self._h(x), self._h(n), w)
        x, n = self._d(x), self._d(n)
        if type(n) is int:
            if n >= w:
                return 0
            return (x << n) & _mask(w)
        if type(x) is int:
            if x == 0:
                return 0
            x = self._full(x, n)
        return self.xp.bitwise_left_shift(x, self._amount(n)) & _mask(w)

    def lshr(self, x: Any, n: Any, w: int) -> Any:
        if w >= WIDE:
            return VECTOR.lshr(self._h(x), self._h(n), w)
        x, n = self._d(x), self._d(n)
        if type(n) is int:
            return 0 if n >= w else x >> n
        if type(x) is int:
            if x == 0:
                return 0
            x = self._full(x, n)
        return self.xp.bitwise_right_shift(x, self._amount(n))

    def _signed(self, x: Any, w: int) -> Any:
        sb = 1 << (w - 1)
        return (x ^ sb) - sb

    def ashr(self, x: Any, n: Any, w: int) -> Any:
        if w >= WIDE:
            return VECTOR.ashr(self._h(x), self._h(n), w)
        x, n = self._d(x), self._d(n)
        if type(n) is int and n == 0:
            return x
        xs = self._signed(x, w)
        if type(n) is int:
            return (xs >> min(n, WIDE - 1)) & _mask(w)
        xs = self._arr(xs, n)
        return self.xp.bitwise_right_shift(xs, self._amount(n)) & _mask(w)

    # --- comparisons --------------------------------------------------------------------
    def _cmp(self, op: str, x: Any, y: Any) -> Any:
        if op == "==":
            r = x == y
        elif op == "!=":
            r = x != y
        elif op == "<":
            r = x < y
        else:
            r = x <= y
        return self._b(r) if type(r) is not bool else r

    def eq(self, x: Any, y: Any, w: int) -> Any:
        if w >= WIDE:
            return self._b(VECTOR.eq(self._h(x), self._h(y), w))
        return self._cmp("==", self._d(x), self._d(y))

    def ne(self, x: Any, y: Any, w: int) -> Any:
        if w >= WIDE:
            return self._b(VECTOR.ne(self._h(x), self._h(y), w))
        return self._cmp("!=", self._d(x), self._d(y))

    def ult(self, x: Any, y: Any, w: int) -> Any:
        if w >= WIDE:
            return self._b(VECTOR.ult(self._h(x), self._h(y), w))
        return self._cmp("<", self._d(x), self._d(y))

    def ule(self, x: Any, y: Any, w: int) -> Any:
        if w >= WIDE:
            return self._b(VECTOR.ule(self._h(x), self._h(y), w))
        return self._cmp("<=", self._d(x), self._d(y))

    def slt(self, x: Any, y: Any, w: int) -> Any:
        if w >= WIDE:
            return self._b(VECTOR.slt(self._h(x), self._h(y), w))
        return self._cmp("<", self._signed(self._d(x), w), self._signed(self._d(y), w))

    def sle(self, x: Any, y: Any, w: int) -> Any:
        if w >= WIDE:
            return self._b(VECTOR.sle(self._h(x), self._h(y), w))
        return self._cmp("<=", self._signed(self._d(x), w), self._signed(self._d(y), w))

    # --- derived operations -------------------------------------------------------------
    def abs(self, x: Any, w: int) -> Any:
        if w >= WIDE:
            return VECTOR.abs(self._h(x), w)
        return super().abs(x, w)

    def smax(self, x: Any, y: Any, w: int) -> Any:
        if w >= WIDE:
            return VECTOR.smax(self._h(x), self._h(y), w)
        return super().smax(x, y, w)

    def smin(self, x: Any, y: Any, w: int) -> Any:
        if w >= WIDE:
            return VECTOR.smin(self._h(x), self._h(y), w)
        return super().smin(x, y, w)

    def umin(self, x: Any, y: Any, w: int) -> Any:
        if w >= WIDE:
            return VECTOR.umin(self._h(x), self._h(y), w)
        return super().umin(x, y, w)

    def clz(self, x: Any, w: int) -> Any:
        if w >= WIDE:
            return VECTOR.clz(self._h(x), w)
        x = self._d(x)
        if type(x) is int:
            return w - x.bit_length()
        return super().clz(x, w)

    # --- structure ----------------------------------------------------------------------
    def ite(self, c: Any, x: Any, y: Any, w: int) -> Any:
        c = self._b(c)
        if type(c) is bool:
            return x if c else y
        if w >= WIDE:
            return VECTOR.ite(self._h(c), self._h(x), self._h(y), w)
        x, y = self._d(x), self._d(y)
        if x is y or (type(x) is int and type(y) is int and x == y):
            return x
        return self.xp.where(c, self._arr(x, c), self._arr(y, c))

    def extract(self, x: Any, hi: int, lo: int, w: int) -> Any:
        ow = hi - lo + 1
        if w >= WIDE:
            r = VECTOR.extract(self._h(x), hi, lo, w)
            return r if ow >= WIDE else self._d(r)
        x = self._d(x)
        return (x >> lo) & _mask(ow)

    def concat(self, x: Any, y: Any, wx: int, wy: int) -> Any:
        if wx + wy >= WIDE:
            return VECTOR.concat(self._h(x), self._h(y), wx, wy)
        x, y = self._d(x), self._d(y)
        if type(x) is int and type(y) is not int:
            x = self._full(x, y)
        return (x << wy) | y

    def zext(self, x: Any, n: int, w: int) -> Any:
        if w + n >= WIDE:
            return VECTOR.zext(self._h(x), n, w)
        return self._d(x)

    def sext(self, x: Any, n: int, w: int) -> Any:
        if w + n >= WIDE:
            return VECTOR.sext(self._h(x), n, w)
        return self._signed(self._d(x), w) & _mask(w + n)

    # --- booleans -----------------------------------------------------------------------
    def band(self, x: Any, y: Any) -> Any:
        x, y = self._b(x), self._b(y)
        if type(x) is bool:
            return y if x else False
        if type(y) is bool:
            return x if y else False
        return self.xp.logical_and(x, y)

    def bor(self, x: Any, y: Any) -> Any:
        x, y = self._b(x), self._b(y)
        if type(x) is bool:
            return True if x else y
        if type(y) is bool:
            return True if y else x
        return self.xp.logical_or(x, y)

    def bnot(self, x: Any) -> Any:
        x = self._b(x)
        if type(x) is bool:
            return not x
        return self.xp.logical_not(x)

    def bxor(self, x: Any, y: Any) -> Any:
        x, y = self._b(x), self._b(y)
        if type(x) is bool:
            return self.bnot(y) if x else y
        if type(y) is bool:
            return self.bnot(x) if y else x
        return self.xp.logical_xor(x, y)

    def bite(self, c: Any, x: Any, y: Any) -> Any:
        c, x, y = self._b(c), self._b(x), self._b(y)
        if type(c) is bool:
            return x if c else y
        if x is y:
            return x
        if type(x) is bool:
            return self.bor(c, y) if x else self.band(self.xp.logical_not(c), y)
        if type(y) is bool:
            return self.bor(self.xp.logical_not(c), x) if y else self.band(c, x)
        return self.xp.where(c, x, y)


def _to_numpy(x: Any) -> np.ndarray:
    """An array of any namespace as a numpy array on the host."""
    import array_api_compat

    if array_api_compat.is_torch_array(x):
        return x.detach().cpu().numpy()
    return np.asarray(array_api_compat.to_device(x, "cpu"))


_BACKENDS: dict[tuple[str, str], ArrayBackend] = {}


def backend_for(device: str | None) -> ArrayBackend:
    """The array backend for a device name: "cpu", "cuda", "cuda:1", ... on torch, or
    "numpy" (the array-API code path on numpy). ImportError if torch is missing."""
    import array_api_compat

    dev = device or "cpu"
    key = ("numpy", "cpu") if dev == "numpy" else ("torch", dev)
    if key not in _BACKENDS:
        if key[0] == "numpy":
            import array_api_compat.numpy as xp

            _BACKENDS[key] = ArrayBackend(xp, None)
        else:
            import torch

            xp = array_api_compat.array_namespace(torch.empty(0))
            _BACKENDS[key] = ArrayBackend(xp, torch.device(dev))
    return _BACKENDS[key]


__all__ = ["WIDE", "ArrayBackend", "backend_for"]
