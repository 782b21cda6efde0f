"""The first random-row stream (stream 1), frozen: the rows `random_rows` drew before the
generator of `tensorcore_smt.validation.rows` (stream 2) replaced it. It is kept only to
redraw the rows of runs recorded with it: results/hardware/h100 holds 15.7 million rows
the H100 answered, recorded as (seed, count) and row numbers, and `tcsmt hardware
recheck` regenerates them from here. New rows never come from this module.

Stream 1 drew every candidate (normal, wide, subnormal, small, zero, special, raw bits)
for every operand and kept one by kind: about 140,000 rows/s for K = 16. The kinds and
their mix are those of `validation.kinds.MIX`, as in stream 2.
"""

from __future__ import annotations

import numpy as np

from ..formats import Format, Specials
from .kinds import MIX, RowKind

KINDS: tuple[RowKind, ...] = MIX


def _compose(fmt: Format, sign, exp_field, mant) -> np.ndarray:
    """Bit patterns from sign, biased exponent field and mantissa (mbits wide)."""
    s = fmt.spec
    low = s.ignored_low
    bits = (
        (sign.astype(np.uint64) << np.uint64(s.ebits + s.mbits + low))
        | (exp_field.astype(np.uint64) << np.uint64(s.mbits + low))
        | (mant.astype(np.uint64) << np.uint64(low))
    )
    return bits


def _max_normal_field(fmt: Format) -> int:
    s = fmt.spec
    top = (1 << s.ebits) - 1
    return top - 1 if s.specials == Specials.IEEE else top


def _normal(fmt: Format, rng: np.random.Generator, centre, width, shape) -> np.ndarray:
    """Normal numbers with unbiased exponents centre +- width (clipped to the format).
    For formats without Inf (fn: e4m3) the all-ones mantissa of the top binade is NaN:
    it is avoided."""
    s = fmt.spec
    lo_f, hi_f = 1, _max_normal_field(fmt)
    w = width[:, None]
    # uniform in -w..w; drawn as floats (integers with per-row bounds is slow)
    e = centre[:, None] + (rng.random(shape) * (2 * w + 1)).astype(np.int64) - w
    field = np.clip(e + s.bias, lo_f, hi_f)
    mant = rng.integers(0, 1 << s.mbits, size=shape, dtype=np.uint64)
    if s.specials == Specials.FN:
        nan = (field == hi_f) & (mant == (1 << s.mbits) - 1)
        mant = np.where(nan, mant - 1, mant)
    sign = rng.integers(0, 2, size=shape) if s.signed else np.zeros(shape, dtype=np.int64)
    return _compose(fmt, sign, field, mant)


def _subnormal(fmt: Format, rng: np.random.Generator, shape) -> np.ndarray:
    s = fmt.spec
    mant = rng.integers(1, 1 << s.mbits, size=shape, dtype=np.uint64)
    sign = rng.integers(0, 2, size=shape)
    return _compose(fmt, sign, np.zeros(shape, dtype=np.int64), mant)


def _special(fmt: Format, rng: np.random.Generator, shape) -> np.ndarray:
    """Inf (where the format has one) or NaN with a random payload."""
    s = fmt.spec
    top = (1 << s.ebits) - 1
    sign = rng.integers(0, 2, size=shape)
    field = np.full(shape, top)
    if s.specials == Specials.IEEE:
        inf = rng.random(shape) < 0.5
        mant = np.where(inf, 0, rng.integers(1, 1 << s.mbits, size=shape, dtype=np.uint64))
    elif s.specials == Specials.FN:  # only all-ones is NaN
        mant = np.full(shape, (1 << s.mbits) - 1, dtype=np.uint64)
    else:  # fnuz: the negative zero pattern is the NaN
        return np.full(shape, 1 << (s.storage - 1), dtype=np.uint64)
    return _compose(fmt, sign, field, mant.astype(np.uint64))


def _centres(fmt: Format, rng: np.random.Generator, n: int) -> np.ndarray:
    s = fmt.spec
    lo, hi = s.emin, s.emax
    # keep most rows away from overflow of the sum and of the products
    return rng.integers(lo + (hi - lo) // 4, hi - (hi - lo) // 4 + 1, size=n)


def _operand(fmt: Format, kind: np.ndarray, rng: np.random.Generator, n: int, k: int):
    """(n, k) bit patterns of `fmt` following each row's kind."""
    s = fmt.spec
    shape = (n, k)
    centre = _centres(fmt, rng, n)
    width = rng.choice(np.array([0, 2, 6, 12]), size=n)
    out = _normal(fmt, rng, centre, width, shape)
    kinds = kind[:, None] * np.ones(shape, dtype=np.int64)
    idx = {kd: i for i, kd in enumerate(KINDS)}
    full = np.full(n, (s.emax - s.emin) // 2 + 1)
    mid = np.full(n, (s.emax + s.emin) // 2)
    wide = _normal(fmt, rng, mid, full, shape)
    sub = _subnormal(fmt, rng, shape)
    small = _normal(fmt, rng, np.full(n, s.emin + 2), np.full(n, 2), shape)
    zero = (rng.integers(0, 2, size=shape).astype(np.uint64) << np.uint64(s.storage - 1)) * (
        1 if s.signed else 0
    )
    spec = _special(fmt, rng, shape)
    bits = rng.integers(0, 1 << s.storage, size=shape, dtype=np.uint64)
    coin = rng.random(shape)
    wide_pick = rng.random(shape) < 0.15
    out = np.where(kinds == idx[RowKind.WIDE], np.where(wide_pick, sub, wide), out)
    out = np.where(kinds == idx[RowKind.SUBNORMAL], np.where(coin < 0.5, sub, small), out)
    out = np.where(kinds == idx[RowKind.ZEROS], np.where(coin < 0.5, zero, out), out)
    n_spec = np.where(rng.random(n) < 0.5, 1, 2)
    where = np.argsort(rng.random(shape), axis=1) < n_spec[:, None]
    out = np.where((kinds == idx[RowKind.SPECIAL]) & where, spec, out)
    out = np.where(kinds == idx[RowKind.BITS], bits, out)
    return out.astype(np.uint64)


def random_rows(
    a_fmt: Format, b_fmt: Format, c_fmt: Format, K: int, n: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Stream 1's `n` random rows: a (n, K), b (n, K), c (n,) as uint64 bit patterns, and
    each row's kind index into `KINDS`. The same arguments give the same rows."""
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, len(KINDS), size=n)
    a = _operand(a_fmt, kind, rng, n, K)
    b = _operand(b_fmt, kind, rng, n, K)
    cancel = kind == KINDS.index(RowKind.CANCEL)
    if K >= 2 and cancel.any():
        h = K // 2
        sign_b = np.uint64(1) << np.uint64(b_fmt.spec.storage - 1)
        noise = rng.integers(0, 2, size=(n, h)).astype(np.uint64) << np.uint64(
            b_fmt.spec.ignored_low
        )
        a[cancel, h : 2 * h] = a[cancel, :h]
        flipped = (b[:, :h] ^ sign_b) ^ noise
        b[cancel, h : 2 * h] = flipped[cancel]
    c = _operand(c_fmt, kind, rng, n, 1)[:, 0]
    return a, b, c, kind


__all__ = ["KINDS", "RowKind", "random_rows"]
