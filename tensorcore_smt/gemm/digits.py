"""A·B exactly, as a short sum of fp64 matrices: digit products by BLAS (Ozaki et al. 2012).

Every finite value of A is an integer times 2^lsb (accuracy.grid_values). Each row of A
is put on its own grid, 2^(lsb + its smallest shift), so its values are integers of a
few dozen bits for any data whose rows span few binades, and those integers are cut
into signed digits of w_a bits: A = sum_p A_p 2^(p w_a), row-scaled (B likewise by
columns, digits of w_b bits). A digit product A_p·B_q sums K products below
2^(w_a + w_b), so with K · 2^(w_a + w_b) <= 2^53 every partial sum BLAS forms, in any
order, is an integer that fp64 holds exactly; scaled back by powers of two (exact in
fp64's normal range), the n_a · n_b digit products are fp64 matrices whose exact sum is
A·B. The widths are chosen for the fewest products: fp16 inputs of standard normal
data at K = 1024 take 2 (one 23-bit digit of A, two of B), e4m3 inputs 1. Callers fall
back to the exponent slices of gemm/accuracy.py where `products` exceeds MAX_PRODUCTS
(rows spanning very many binades) or `usable` says no (grids below 2^-400: fp64).
"""

from __future__ import annotations

import numpy as np

from ..formats import Format
from .accuracy import GridValues, grid_values

SAFE_BITS = 53
"""A digit product is exact while K · 2^(w_a + w_b) <= 2^53 (partial sums fp64 integers)."""
SHIFT_BITS = 62
"""A digit is cut from sig << (up to its width) in int64: width + significand <= 62."""
MAX_PRODUCTS = 9
"""More digit products than this: the exponent slices are used instead."""
MIN_LSB = -400
"""Grids finer than 2^-400 (fp64 inputs) are left to the exponent slices: the scaled
digit products must stay far inside fp64's normal range."""
A_KEPT = 1 << 22
"""A of at most this many elements is decoded once and its digits kept; a larger A is
decoded again for every row block of tiles (one block's digits alive at a time)."""
K_CHUNK = 1 << 21
"""K is cut into chunks of at most this many terms (digits of 32 bits a pair at least)."""


def widths(K: int, span_a: int, span_b: int, max_a: int, max_b: int) -> tuple[int, int]:
    """(w_a, w_b): digit widths with K · 2^(w_a + w_b) <= 2^53, each at most max_*, that
    cut integers of span_a and span_b bits into the fewest digit products."""
    budget = SAFE_BITS - max(0, (K - 1).bit_length())
    best: tuple[int, int, int] | None = None
    for n_a in range(1, span_a + 1):
        w_a = min(-(-span_a // n_a), max_a)
        w_b = min(budget - w_a, max_b)
        if w_b < 1:
            continue
        cost = -(-span_a // w_a) * -(-span_b // w_b)
        if best is None or cost < best[0]:
            best = (cost, w_a, w_b)
    if best is None:
        raise ValueError("the digit products need K below 2^51")
    return best[1], best[2]


def _scaled_rows(g: GridValues) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(|integer| sig, shift within the row, row exponent, bits of the widest row) of the
    rows of grid values: value = sign * sig * 2^(shift + row exponent)."""
    nz = g.sig != 0
    low = np.where(nz, g.shift, np.iinfo(np.int64).max).min(axis=1)
    low = np.where(low == np.iinfo(np.int64).max, 0, low)
    shift = np.where(nz, g.shift - low[:, None], 0)
    span = int(shift.max(initial=0)) + g.sig_bits
    return np.abs(g.sig), shift, low + g.lsb, span


def _digits(sig: np.ndarray, shift: np.ndarray, neg: np.ndarray, w: int, n: int) -> list:
    """The n signed w-bit digits of sign * sig * 2^shift (fp64 matrices, exact)."""
    out = []
    mask = (1 << w) - 1
    sign = np.where(neg, -1.0, 1.0)
    if int(shift.max(initial=0)) + int(sig.max(initial=0)).bit_length() <= SHIFT_BITS:
        v = sig << shift  # every integer fits int64: digits are its bit fields
        return [((v >> (p * w)) & mask).astype(np.float64) * sign for p in range(n)]
    for p in range(n):
        lo = p * w - shift  # bit of sig at the digit's bit 0 (negative: shifted up)
        up = np.clip(-lo, 0, w)
        down = np.clip(lo, 0, 63)
        d = ((sig << up) >> down) & mask
        d = np.where(lo <= -w, 0, d)
        out.append(np.where(neg, -d, d).astype(np.float64))
    return out


def _cols(g: GridValues) -> GridValues:
    """B's columns as rows."""
    return GridValues(g.sig.T, g.shift.T, g.lsb, g.sig_bits, g.finite.T)


class DigitProduct:
    """A·B for tiles of rows and columns, as fp64 terms whose exact sum is the tile:
    B decoded and cut into digits once; A too when it is small (A_KEPT), else per
    row block of tiles. `finite`: whether A and B are (the product needs it)."""

    def __init__(self, a_bits: np.ndarray, a_fmt: Format, b_bits: np.ndarray, b_fmt: Format):
        self.a_bits, self.a_fmt = a_bits, a_fmt
        gb = _cols(grid_values(b_bits, b_fmt))
        K = gb.sig.shape[1]
        self.kchunk = min(max(K, 1), K_CHUNK)
        b_sig, b_shift, b_low, span_b = _scaled_rows(gb)
        self.finite = bool(gb.finite.all())
        ga = None
        if np.size(a_bits) <= A_KEPT:
            ga = grid_values(a_bits, a_fmt)
            self.finite &= bool(ga.finite.all())
            span_a = _scaled_rows(ga)[3]
        else:
            span_a = 1
            rows = max(1, A_KEPT // max(K, 1))
            for r in range(0, len(a_bits), rows):  # A's widest row; whether A is finite
                g = grid_values(a_bits[r : r + rows], a_fmt)
                self.finite &= bool(g.finite.all())
                span_a = max(span_a, _scaled_rows(g)[3])
        sa, sb = a_fmt.spec, b_fmt.spec
        self.w_a, self.w_b = widths(
            self.kchunk, span_a, span_b, SHIFT_BITS - _sig_bits(sa), SHIFT_BITS - _sig_bits(sb)
        )
        self.n_a, self.n_b = -(-span_a // self.w_a), -(-span_b // self.w_b)
        self.b_scale = np.ldexp(1.0, b_low)
        k = self.kchunk
        self.b_digits = [
            [
                d.T.copy()
                for d in _digits(
                    b_sig[:, i : i + k],
                    b_shift[:, i : i + k],
                    gb.sig[:, i : i + k] < 0,
                    self.w_b,
                    self.n_b,
                )
            ]
            for i in range(0, max(K, 1), k)
        ]
        self._whole = None if ga is None else self._decode(ga)  # A's scales and digits
        self._a: tuple | None = None

    @staticmethod
    def usable(a_fmt: Format, b_fmt: Format) -> bool:
        """Whether both formats have grids inside the digit products' safe range."""
        return all(
            f.spec.is_integer or f.spec.emin - f.spec.mbits >= MIN_LSB for f in (a_fmt, b_fmt)
        )

    def _decode(self, ga: GridValues) -> tuple[np.ndarray, list]:
        """(row scales, digits per K chunk) of rows of A."""
        sig, shift, low, _ = _scaled_rows(ga)
        K = sig.shape[1]
        k = self.kchunk
        digits = [
            _digits(
                sig[:, i : i + k], shift[:, i : i + k], ga.sig[:, i : i + k] < 0, self.w_a, self.n_a
            )
            for i in range(0, max(K, 1), k)
        ]
        return np.ldexp(1.0, low), digits

    def _rows(self, rows: slice) -> tuple[np.ndarray, list]:
        if self._whole is not None:
            scale, digits = self._whole
            return scale[rows], [[d[rows] for d in chunk] for chunk in digits]
        key = (rows.start, rows.stop, rows.step)
        if self._a is None or self._a[0] != key:
            self._a = (key, *self._decode(grid_values(self.a_bits[rows], self.a_fmt)))
        return self._a[1], self._a[2]

    @property
    def products(self) -> int:
        """Digit products a tile takes (every K chunk)."""
        return self.n_a * self.n_b * len(self.b_digits)

    def tile(self, rows: slice, cols: slice) -> list[np.ndarray]:
        """fp64 matrices whose exact sum is A·B[rows, cols] (each exact)."""
        a_scale, a_digits = self._rows(rows)
        b_scale = self.b_scale[cols]
        terms = []
        for ad, bd in zip(a_digits, self.b_digits):
            for p in range(self.n_a):
                for q in range(self.n_b):
                    c = ad[p] @ bd[q][:, cols]  # integers below 2^53: exact
                    c *= a_scale[:, None]  # powers of two in fp64's normal range: exact
                    c *= np.ldexp(b_scale, p * self.w_a + q * self.w_b)[None, :]
                    terms.append(c)
        return terms


def _sig_bits(s) -> int:
    """Significand bits of a grid value of the format (grid_values' sig_bits)."""
    return s.storage if s.is_integer else s.mbits + 1
