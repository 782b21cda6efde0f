"""Correctly rounded sums of a few fp64 terms per element, exactly, at array speed.

A value given as an unevaluated sum of fp64 arrays (each term exact: the digit products
of gemm/digits.py, an output D, an fp64 matmul) is rounded once to the nearest fp64
(ties to even) without wide integers wherever that can be proved on the spot: TwoSum
(Knuth 1969; Moller 1965) turns a + b into s + e with s = fl(a + b) and s + e = a + b
exactly, and a pass of TwoSum along the terms (VecSum, Ogita, Rump and Oishi 2005)
keeps the sum exact while it moves it into the last partial sum. Once every error term
of a pass but one is zero, the value is s + e exactly, so fl(s + e) is its correct
rounding, and the TwoSum remainder of that addition says whether the rounding crossed a
power of two (the exact floor(log2 |value|)). The elements where a few passes leave more
than one error term are rounded from wide integers (gemm/wide.py), the terms decoded
exactly onto each element's own grid. No overflow can occur below 2^1000 per term.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..formats import Format
from .wide import LIMB, Wide

PASSES = 3
"""VecSum passes before an element is left to the wide integers."""


@dataclass(frozen=True)
class Rounded:
    """|sum of the terms| per element: `value` its correct rounding to fp64 (ties to
    even), `log2` the exact floor(log2 |sum|) (meaningless where value is 0)."""

    value: np.ndarray
    log2: np.ndarray


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s, e): s = fl(a + b) and s + e = a + b exactly (no overflow)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def rounded_sum(terms: list[np.ndarray]) -> Rounded:
    """The correctly rounded |sum| of `terms` (fp64 arrays of one shape, finite, each
    below 2^1000 in magnitude), element by element."""
    shape = np.shape(terms[0])
    x = [np.asarray(t, dtype=np.float64).reshape(-1) for t in terms]
    n = x[0].size
    value, log2 = np.zeros(n), np.zeros(n, dtype=np.int64)
    todo = np.arange(n)
    for _ in range(PASSES):
        if len(x) == 1:
            s, errs = x[0], []
        else:
            s, errs = x[0], []
            for t in x[1:]:
                s, e = two_sum(s, t)
                errs.append(e)
        nonzero = (
            sum((e != 0).astype(np.int8) for e in errs) if errs else np.zeros(s.shape, np.int8)
        )
        done = nonzero <= 1
        if done.any():
            tail = sum(np.where(done, e, 0.0) for e in errs) if errs else 0.0
            r, rr = two_sum(s[done], (tail[done] if errs else np.zeros(int(done.sum()))))
            value[todo[done]], log2[todo[done]] = _floor_log2(r, rr)
        if done.all():
            break
        keep = ~done
        todo = todo[keep]
        x = [e[keep] for e in errs] + [s[keep]]
    else:
        wide_v, wide_l = _wide_rounded(x)  # the terms left, of the elements left
        value[todo], log2[todo] = wide_v, wide_l
    return Rounded(value.reshape(shape), log2.reshape(shape))


def pair(terms: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(hi, lo, ok): one VecSum pass over `terms` (as for `rounded_sum`); where `ok`,
    hi + lo equals the sum exactly and hi = fl(hi + lo)."""
    s, errs = terms[0], []
    for t in terms[1:]:
        s, e = two_sum(s, t)
        errs.append(e)
    if not errs:
        return s, np.zeros_like(s), np.ones(np.shape(s), bool)
    nonzero = sum((e != 0).astype(np.int8) for e in errs)
    ok = nonzero <= 1
    tail = sum(np.where(ok, e, 0.0) for e in errs)
    hi, lo = two_sum(s, tail)
    return hi, lo, ok


def rounded_pair(hi: np.ndarray, lo: np.ndarray) -> Rounded:
    """The correctly rounded |hi + lo| for hi = fl(hi + lo) (a `pair`)."""
    return Rounded(*_floor_log2(hi, lo))


def _floor_log2(r: np.ndarray, rr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(|r|, floor(log2 |r + rr|)) for r = fl(r + rr) (r + rr exact)."""
    m, ex = np.frexp(np.abs(r))
    below = (m == 0.5) & (rr != 0) & ((rr < 0) != (r < 0))  # rounded up onto 2^k
    return np.abs(r), ex.astype(np.int64) - 1 - below


def _wide_rounded(terms: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(correctly rounded |sum|, exact floor(log2 |sum|)) of 1-D fp64 terms, through
    wide integers: each term decoded exactly to sig * 2^(exp) and put on the element's
    own grid, the finest of its terms."""
    n = terms[0].size
    if n == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    sig, exp = [], []
    for t in terms:
        m, e = np.frexp(t)  # t = m * 2^e, |m| in [0.5, 1): m * 2^53 an integer
        sig.append(np.ldexp(m, 53).astype(np.int64))
        exp.append(np.where(t == 0, np.iinfo(np.int64).max, e.astype(np.int64) - 53))
    lo = np.minimum.reduce(exp)
    lo = np.where(lo == np.iinfo(np.int64).max, 0, lo)
    shifts = [np.where(s == 0, 0, e - lo) for s, e in zip(sig, exp)]
    top = int(max(int(sh.max(initial=0)) for sh in shifts))
    w = Wide.zeros((top + 54 + len(terms).bit_length()) // LIMB + 4, (n,))
    for s, sh in zip(sig, shifts):
        w.add(s, sh)
    mag = w.normalised().abs()
    _, bit = mag.msb()
    return mag.to_float(lo), bit + lo


def decoded(bits: np.ndarray, fmt: Format) -> tuple[np.ndarray, np.ndarray]:
    """(values, finite): the values of bit patterns of `fmt` as fp64 (exact: every format
    but fp64's own subnormal-free range fits), 0 where not finite."""
    from .accuracy import grid_values

    g = grid_values(bits, fmt)
    return np.ldexp(g.sig.astype(np.float64), g.shift + g.lsb), g.finite
