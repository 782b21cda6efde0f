"""Exact integers of any width as numpy arrays of 32-bit limbs: one integer per element.

`Wide.limbs` has shape (L, *shape), int64: the value of an element is
sum_j limbs[j] * 2^(32 j). Normalised (after `normalised()`), limbs 0 .. L-2 are in
[0, 2^32) and the top limb carries the sign, so every operation here is a handful of
whole-array integer operations per limb: no Python int per element and no
floating-point operation on a value. `to_float` rounds to the nearest fp64 (ties to
even) exactly, subnormals and overflow included.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LIMB = 32
_MASK = np.int64((1 << LIMB) - 1)
PIECE = 21
"""Bits of the pieces an int64 addend is cut into (a piece shifted by up to 31 bits
stays below 2^63)."""


@dataclass(frozen=True)
class Wide:
    """Integers, one per element of `shape`, in limbs (L, *shape) int64."""

    limbs: np.ndarray

    @staticmethod
    def zeros(n_limbs: int, shape: tuple[int, ...]) -> Wide:
        return Wide(np.zeros((n_limbs, *shape), dtype=np.int64))

    @property
    def shape(self) -> tuple[int, ...]:
        return self.limbs.shape[1:]

    def add(self, x: np.ndarray, shift) -> None:
        """Add x * 2^shift in place (x int64 of `shape`; shift >= 0, an int or an int
        array of `shape`; the limbs must reach bit shift + 96). Limbs are not normalised (each may gather up to
        2^30 additions before `normalised`)."""
        x = np.asarray(x, dtype=np.int64)
        shift = np.asarray(shift, dtype=np.int64)
        for i in range(0, 64, PIECE):  # x = sum of PIECE-bit pieces (top one signed)
            piece = (x >> i) if i + PIECE >= 64 else ((x >> i) & ((1 << PIECE) - 1))
            s = shift + i
            q, r = s // LIMB, s % LIMB
            v = piece << r  # |v| < 2^(PIECE + 32) or, for the top piece, < 2^63
            lo, hi = v & _MASK, v >> LIMB
            if q.ndim == 0:
                self.limbs[int(q)] += lo
                self.limbs[int(q) + 1] += hi
            else:
                idx = np.indices(self.shape, sparse=True)
                self.limbs[(q, *idx)] += lo  # each element once: fancy += is exact
                self.limbs[(q + 1, *idx)] += hi

    def normalised(self) -> Wide:
        """The same integers with limbs 0 .. L-2 in [0, 2^32) (carries propagated)."""
        out = self.limbs.copy()
        for j in range(len(out) - 1):
            c = out[j] >> LIMB
            out[j] &= _MASK
            out[j + 1] += c
        return Wide(out)

    def negative(self) -> np.ndarray:
        """Sign of each element (a normalised Wide)."""
        return self.limbs[-1] < 0

    def __sub__(self, other: Wide) -> Wide:
        return Wide(self.limbs - other.limbs).normalised()

    def abs(self) -> Wide:
        """|x| (normalised)."""
        return Wide(np.where(self.negative(), -self.limbs, self.limbs)).normalised()

    def times(self, k: int) -> Wide:
        """x * k for a Python int k (normalised)."""
        out = Wide.zeros(len(self.limbs) + abs(k).bit_length() // LIMB + 4, self.shape)
        sign, k = (-1 if k < 0 else 1), abs(k)
        src = self.normalised().limbs
        i = 0
        while k:
            chunk = (k & ((1 << 24) - 1)) * sign
            if chunk:
                for j in range(len(src)):  # limb < 2^32 times chunk < 2^24: below 2^56
                    out.add(src[j] * chunk, LIMB * j + i)
            k >>= 24
            i += 24
        return out.normalised()

    def shifted(self, s: int, n_limbs: int | None = None) -> Wide:
        """x * 2^s (s >= 0), with at least `n_limbs` limbs (normalised)."""
        src = self.normalised().limbs
        n = max(n_limbs or 0, len(src) + s // LIMB + 3)
        out = Wide.zeros(n, self.shape)
        for j in range(len(src)):
            out.add(src[j], LIMB * j + s)
        return out.normalised()

    def msb(self) -> tuple[np.ndarray, np.ndarray]:
        """(top, bit): for a normalised non-negative Wide, the index of its highest
        nonzero limb and the position of its highest set bit (-1 for 0)."""
        nz = self.limbs != 0
        L = len(self.limbs)
        top = L - 1 - np.argmax(nz[::-1], axis=0)
        any_nz = nz.any(axis=0)
        t = np.take_along_axis(self.limbs, top[None], axis=0)[0]
        _, e = np.frexp(t.astype(np.float64))  # t < 2^32: exact
        bit = np.where(any_nz, LIMB * top + e.astype(np.int64) - 1, -1)
        return np.where(any_nz, top, 0), bit

    def to_float(self, exp) -> np.ndarray:
        """x * 2^exp rounded to the nearest fp64, ties to even (x normalised and
        non-negative; exp an int or int array): exact rounding, subnormals included,
        inf past the largest finite value."""
        pad = np.concatenate([np.zeros((2, *self.shape), np.int64), self.limbs]).astype(np.uint64)
        top, bit = self.msb()
        t = top + 2  # in pad
        bl = (bit - LIMB * top + 1).astype(np.uint64)  # bits of the top limb, 1..32

        def limb(i):
            return np.take_along_axis(pad, i[None], axis=0)[0]

        hi, mid, lo = limb(t), limb(t - 1), limb(t - 2)
        one = np.uint64(1)
        m64 = (hi << (np.uint64(64) - bl)) | (mid << (np.uint64(32) - bl)) | (lo >> bl)
        below = np.logical_or.accumulate(pad != 0, axis=0)  # any nonzero limb at or below
        sticky = ((lo & ((one << bl) - one)) != 0) | (
            np.take_along_axis(below, np.maximum(t - 3, 0)[None], axis=0)[0] & (t >= 3)
        )
        E = bit + np.asarray(exp, dtype=np.int64)  # value in [2^E, 2^(E+1))
        k = np.clip(E + 1075, 0, 53)  # significand bits the result can have
        drop = (np.int64(62) - k).astype(np.uint64)  # keep k + 2 bits of m64
        m = (m64 >> drop) | (((m64 & ((one << drop) - one)) != 0) | sticky).astype(np.uint64)
        r, g = m >> np.uint64(2), m & np.uint64(3)
        r = r + ((g == 3) | ((g == 2) & ((r & one) == one))).astype(np.uint64)
        with np.errstate(over="ignore"):
            out = np.ldexp(r.astype(np.float64), (E - k + 1).astype(np.int64))
        out = np.where(E >= 1024, np.inf, out)
        return np.where(bit < 0, 0.0, out)

    def to_ints(self) -> np.ndarray:
        """Python ints (an object array): for tests and small reports."""
        src = self.normalised().limbs
        out = np.zeros(self.shape, dtype=object)
        for j in range(len(src)):
            out = out + src[j].astype(object) * (1 << (LIMB * j))
        return out


def from_ints(values: np.ndarray, n_limbs: int) -> Wide:
    """A Wide of Python ints (tests)."""
    shape = np.shape(values)
    out = Wide.zeros(n_limbs, shape)
    flat = np.asarray(values, dtype=object).reshape(-1)
    for j in range(n_limbs - 1):
        out.limbs[j] = np.array([(int(v) >> (LIMB * j)) & 0xFFFFFFFF for v in flat]).reshape(shape)
    out.limbs[-1] = np.array([int(v) >> (LIMB * (n_limbs - 1)) for v in flat]).reshape(shape)
    return out
