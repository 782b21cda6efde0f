"""The cancellation probe: inputs whose product k is +big at k = i, -big at k = j and one
unit elsewhere, and the reading of an output as a count of units.

With big/unit at least 2^(p+2)·K for an accumulator of p bits, a unit (or a sum of units)
added to a partial sum that holds ±big is lost, +big and -big cancel exactly where they
meet, and units summed away from both survive; so an output of the probe is, in units,
the number of products summed outside the smallest subtree holding i and j, and K minus
it is that subtree's size (tree.py). Xie, Gao, Wang, Xue, "Revealing Floating-Point
Accumulation Orders in Software/Hardware Implementations" (USENIX ATC 2025).

A GEMM call with row m holding s at position P[m] (t elsewhere) and column n holding d at
position Q[n] (w elsewhere) probes the pair (P[m], Q[n]) in output (m, n): s·w = big,
t·d = -big, t·w = unit (hardware/recordings.py PAIR_VALUES, Kind.PAIRS, is the case
P = Q = 0..K-1). All values are powers of two, exact in every format used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import UserError
from ..formats import Format


@dataclass(frozen=True)
class PairValues:
    """s, t (the A side), w, d (the B side): s·w = big, t·d = -big, t·w = unit."""

    s: float
    t: float
    w: float
    d: float

    @property
    def unit(self) -> float:
        return self.t * self.w

    @property
    def ratio_bits(self) -> int:
        return round(math.log2(self.s / self.t))


EXPONENTS: dict[Format, tuple[int, int, int, int]] = {
    # (smallest normal exponent, largest exponent, precision in bits incl. the leading 1,
    #  smallest subnormal exponent)
    Format.FP32: (-126, 127, 24, -149),
    Format.TF32: (-126, 127, 11, -136),
    Format.BF16: (-126, 127, 8, -133),
    Format.FP16: (-14, 15, 11, -24),
}
"""What the probe needs of each input or output format (IEEE 754; bf16 and TF32 share
fp32's exponent range). Units are kept normal in the output, and inputs normal unless the
oracle reads subnormal inputs as they are (a CPU library may flush them; a matrix unit
reads fp16 subnormals: hardware/recordings.py PAIR_VALUES uses them)."""


def needed_ratio_bits(k: int, acc_bits: int) -> int:
    """log2 of the smallest big/unit for which K units added to ±big in an accumulator of
    `acc_bits` bits are lost (K·unit below half an ulp of big, with one bit to spare)."""
    return acc_bits + 2 + max(1, math.ceil(math.log2(k)))


def pair_values(
    fmt: Format, out: Format, k: int, acc_bits: int, subnormal_inputs: bool = False
) -> PairValues:
    """Probe values in input format `fmt` for K products summed in an accumulator of up to
    `acc_bits` bits and read in output format `out`: big/unit large enough, the unit and
    every count up to K exact in `out`. UserError (saying the largest K that fits) when
    the formats' ranges cannot hold such values."""
    r = needed_ratio_bits(k, acc_bits)
    found = _exponents(fmt, out, r, subnormal_inputs)
    if found is None:
        r_max = max(
            (q for q in range(r) if _exponents(fmt, out, q, subnormal_inputs) is not None),
            default=0,
        )
        room = r_max - acc_bits - 2
        most = f"; the largest K that fits is {2**room}" if room >= 1 else "; no K >= 2 fits"
        raise UserError(
            f"K={k}: {fmt.spec.name} inputs read back as {out.spec.name} cannot hold a pair "
            f"probe for an accumulator of {acc_bits} bits (big/unit >= 2^{r}){most}"
        )
    et, ew = found
    return PairValues(2.0 ** (et + r), 2.0**et, 2.0**ew, -(2.0 ** (ew + r)))


def _exponents(fmt: Format, out: Format, r: int, subnormal: bool) -> tuple[int, int] | None:
    """Exponents (of t, of w) for ratio 2^r: every value normal in `fmt`, the unit normal in
    `out` with room for counts above it, big = 2^(et + ew + r) as near 1 as allowed."""
    lo, hi, _, sub = EXPONENTS[fmt]
    lo = sub if subnormal else lo
    out_lo, out_hi = EXPONENTS[out][:2]
    best = None
    for et in range(lo, hi - r + 1):
        ew = min(max(-r - et, lo, out_lo - et), hi - r)
        unit = et + ew
        if ew < lo or unit < out_lo or unit + 32 > out_hi:
            continue
        score = (abs(unit + r), abs(et - ew))
        if best is None or score < best[0]:
            best = (score, et, ew)
    return None if best is None else (best[1], best[2])


def check_counts_exact(out: Format, k: int) -> None:
    """UserError when counts up to K - 2 are not all exact in output format `out`."""
    p = EXPONENTS[out][2]
    if k - 2 > 2**p:
        raise UserError(
            f"K={k}: outputs in {out.spec.name} ({p} bits) count units exactly only up to "
            f"{2**p}, so K can be at most {2**p + 2}"
        )


def pair_inputs(
    pv: PairValues, rows: np.ndarray, cols: np.ndarray, k: int, dtype=np.float64
) -> tuple[np.ndarray, np.ndarray]:
    """A (len(rows) x K) and B (K x len(cols)) in `dtype` (default float64; the values are
    powers of two, exact in the input format, so the library's own dtype spares a
    conversion of K-long rows): row m has s at rows[m], column n has d at cols[n]; output
    (m, n) probes (rows[m], cols[n])."""
    a = np.full((len(rows), k), pv.t, dtype)
    a[np.arange(len(rows)), rows] = pv.s
    b = np.full((k, len(cols)), pv.w, dtype)
    b[cols, np.arange(len(cols))] = pv.d
    return a, b


def counts_to_sizes(d: np.ndarray, pv: PairValues, k: int, what: str) -> np.ndarray:
    """Pair sizes K - count from probe outputs `d` (any float dtype). ValueError naming
    `what` when an output is not a whole count of units between 0 and K - 2."""
    x = np.asarray(d, np.float64) / pv.unit
    ok = np.isfinite(x) & (x == np.round(x)) & (x >= 0) & (x <= k - 2)
    if not ok.all():
        bad = x[~ok].ravel()[0]
        raise ValueError(
            f"{what}: an output of the pair probe is {bad!r} units, not a count from 0 to "
            f"{k - 2}: the outputs are not those of one summation tree of these products"
        )
    return k - x.astype(np.int64)
