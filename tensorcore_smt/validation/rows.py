"""Random dot-product rows for validation: a documented mix of the inputs that exercise a
matrix unit's arithmetic, reproducible from a seed.

Each row (a_0..a_{K-1}, b_0..b_{K-1}, c) draws one kind, uniformly, from `KINDS` (the
validation mix of the shared vocabulary `tensorcore_smt.validation.kinds`, where each kind
says what it exercises): normal, cancel, wide, subnormal, zeros, special, bits. c is drawn
in its own format with the same kind. Operands of every format are produced as bit
patterns of their storage width, so rows feed the interpreters and the GPU runner alike.

How the kinds are realised here:

- ``normal``: normal numbers, exponents uniform in a window of 0, 2, 6 or 12 binades
  either side of a centre drawn from the middle half of the exponent range;
- ``cancel``: ``normal`` rows whose second half of a repeats the first and whose second
  half of b is the first with the sign flipped and the lowest kept mantissa bit flipped
  at random (one ulp of noise);
- ``wide``: exponents uniform over the whole range, 15 % of the operands subnormal;
- ``subnormal``: half the operands subnormal (non-zero mantissa), the rest normals within
  2 binades of emin + 2;
- ``zeros``: ``normal`` rows with half the operands +-0 (+0 only where -0 is a NaN);
- ``special``: ``normal`` rows with one or two operands (one or two distinct positions, even
  odds; c always) Inf or NaN: Inf or a NaN with a random payload for IEEE formats, the
  all-ones NaN for FN formats, the pattern 1 << (storage - 1) otherwise;
- ``bits``: uniform random bit patterns of the storage width.

This is stream 2 (`STREAM`; tests pin its bits). Each operand is drawn from two 32-bit
words of the PCG64 generator (a 64-bit payload word for formats wider than 32 bits): the
payload's low bits are the mantissa (or the whole pattern for ``bits``), the control
word holds the sign, the exponent offset (16 bits, scaled to the row's window) and the
coins; each row draws its window and its special positions. Turning words and row
parameters into bit patterns is compiled by LLVM (`rows_kernel`, one pass) or, where no
kernel can be built, done with numpy (`_block`): the same bits, checked by a test.
Stream 1 (`rows_legacy`, seven candidates per operand) is kept only to redraw recorded
runs.
"""

from __future__ import annotations

import numpy as np

from ..bv.dtypes import unsigned_holding
from ..formats import Format, FormatSpec, Specials
from .kinds import MIX, RowKind

STREAM = 2
"""The row stream this module draws (recorded with runs whose rows are redrawn later)."""

KINDS: tuple[RowKind, ...] = MIX
"""The kinds of the mix (validation.kinds.MIX): kind number i is KINDS[i]."""

WIDTHS = np.array([0, 2, 6, 12], dtype=np.int64)
"""Half-widths (binades) of the exponent window of ``normal`` rows."""

# Control word layout (bits of `ctl`): sign 0, exponent offset 1..16, coin 17..24, coin2 25.
_OFF_SHIFT, _OFF_BITS = 1, 16
_COIN_SHIFT = 17
_HALF = 128  # coin < _HALF: one operand in two
_WIDE_SUB = 38  # coin < 38: 38/256 (about 15 %) of a wide row's operands subnormal
_COIN2 = np.uint32(1 << 25)


def _words(s: FormatSpec, rng: np.random.Generator, shape) -> tuple[np.ndarray, np.ndarray]:
    """(payload, control) random words for `shape` operands: uint32 each, or a uint64
    payload where the format's storage is over 32 bits."""
    if s.storage > 32:
        raw = rng.integers(0, 1 << 64, size=shape, dtype=np.uint64)
    else:
        raw = rng.integers(0, 1 << 32, size=shape, dtype=np.uint32)
    return raw, rng.integers(0, 1 << 32, size=shape, dtype=np.uint32)


def _max_normal_field(s: FormatSpec) -> int:
    top = (1 << s.ebits) - 1
    return top - 1 if s.specials == Specials.IEEE else top


BLOCK_OPERANDS = 1 << 16
"""Operands composed at a time (whole rows): the random words are drawn for a whole operand first (the
stream does not depend on this), the arithmetic runs block by block on arrays that stay
in cache (whole-operand temporaries cost more in page faults than in arithmetic)."""


def _operand(
    fmt: Format, kind: np.ndarray, rng: np.random.Generator, k: int, compiled: bool = True
) -> np.ndarray:
    """(n, k) bit patterns of `fmt` following each row's kind (see the module docstring).

    Every operand is first a normal number in its row's exponent window (the kinds differ
    in the window: random for most, the whole range for wide, near emin for subnormal);
    then the control word's coin makes some subnormal (wide, subnormal rows) or zero
    (zeros rows), one or two operands of each special row become Inf or NaN, and the bits
    rows take the raw payload."""
    s = fmt.spec
    n = len(kind)
    raw, ctl = _words(s, rng, (n, k))
    is_kind = [kind == i for i in range(len(KINDS))]
    wide, subn = is_kind[KINDS.index(RowKind.WIDE)], is_kind[KINDS.index(RowKind.SUBNORMAL)]
    # per-row windows (centre - width + bias, 2 * width + 1)
    lo, hi = s.emin, s.emax
    centre = rng.integers(lo + (hi - lo) // 4, hi - (hi - lo) // 4 + 1, size=n)
    width = WIDTHS[rng.integers(0, len(WIDTHS), size=n)]
    centre = np.where(wide, (hi + lo) // 2, np.where(subn, lo + 2, centre))
    width = np.where(wide, (hi - lo) // 2 + 1, np.where(subn, 2, width))
    # the per-row parameters (rows_kernel.PARAMS int32 columns)
    par = np.empty((n, 8), dtype=np.int32)
    par[:, 0] = centre - width + s.bias  # base
    par[:, 1] = 2 * width + 1  # span
    # coin thresholds: subnormal (wide, subnormal rows; formats with subnormals), zero
    par[:, 2] = np.where(wide, _WIDE_SUB, np.where(subn, _HALF, 0)) if s.mbits else 0
    par[:, 3] = np.where(is_kind[KINDS.index(RowKind.ZEROS)], _HALF, 0)
    # special operands: one or two per special row (distinct positions, even odds)
    first = rng.integers(0, k, size=n)
    par[:, 4] = first
    if k > 1:
        second = (first + 1 + rng.integers(0, k - 1, size=n)) % k
        par[:, 5] = np.where(rng.integers(0, 2, size=n).astype(bool), second, -1)
    else:
        par[:, 5] = -1
    par[:, 6] = is_kind[KINDS.index(RowKind.SPECIAL)]
    par[:, 7] = is_kind[KINDS.index(RowKind.BITS)]
    if compiled:
        from .rows_kernel import compose

        out = compose(s, raw, ctl, par, (_OFF_SHIFT, _OFF_BITS, _COIN_SHIFT, int(_COIN2)))
        if out is not None:
            return out
    out = np.empty((n, k), dtype=unsigned_holding(s.storage))
    step = max(1, BLOCK_OPERANDS // k)
    for b in range(0, n, step):
        blk = slice(b, b + step)
        out[blk] = _block(s, raw[blk], ctl[blk], par[blk])
    return out


def _block(s: FormatSpec, raw: np.ndarray, ctl: np.ndarray, par: np.ndarray) -> np.ndarray:
    """The uint64 patterns of one block of rows (see `_operand`; `par`: its per-row
    parameters)."""
    base, span, sub_at, zero_at, first, second, special_row, bits_row = (
        par[:, i : i + 1] for i in range(8)
    )
    wt = raw.dtype.type  # payload: uint32, or uint64 for 64-bit formats
    k = raw.shape[1]
    # exponent fields of normal numbers, uniform in the window
    field = ((ctl >> np.uint32(_OFF_SHIFT)) & np.uint32((1 << _OFF_BITS) - 1)).view(np.int32)
    field *= span
    field >>= _OFF_BITS
    field += base
    hi_f = _max_normal_field(s)
    np.clip(field, 1, hi_f, out=field)
    ones = wt((1 << s.mbits) - 1)
    mant = raw & ones
    if s.specials == Specials.FN:  # the top binade's all-ones mantissa is NaN
        mant -= ((field == hi_f) & (mant == ones)).astype(wt)
    # subnormal and zero operands, by the coin against each row's threshold
    coin = ((ctl >> np.uint32(_COIN_SHIFT)) & np.uint32(0xFF)).view(np.int32)
    zero = coin < zero_at
    sub = coin < sub_at
    field *= ~(sub | zero)
    mant |= (sub & (mant == 0)).astype(wt)
    mant *= ~zero
    sign = (ctl & np.uint32(1)).astype(wt) if s.signed else None
    if sign is not None and s.specials == Specials.FNUZ:  # -0 is the NaN: zeros are +0
        sign *= ~zero
    cols = np.arange(k, dtype=np.int32)[None, :]
    special = ((cols == first) | (cols == second)) & (special_row != 0)
    if s.specials in (Specials.IEEE, Specials.FN):
        field[special] = (1 << s.ebits) - 1
        if s.specials == Specials.IEEE:  # Inf, or a NaN with a random non-zero payload
            nan = mant | (mant == 0).astype(wt)
            nan *= (ctl & _COIN2) == 0
            mant = np.where(special, nan, mant)
        else:  # FN: only all-ones is NaN
            mant |= special.astype(wt) * ones
    out = _compose(s, sign, field, mant)
    if s.specials not in (Specials.IEEE, Specials.FN):  # the pattern of -0 (fnuz: the NaN)
        out[special] = 1 << (s.storage - 1)
    return np.where(bits_row != 0, raw.astype(np.uint64) & np.uint64((1 << s.storage) - 1), out)


def _compose(s: FormatSpec, sign, field: np.ndarray, mant: np.ndarray) -> np.ndarray:
    """uint64 bit patterns from the sign bit (None: unsigned), biased exponent field and
    mantissa (mbits wide), in the payload's width."""
    low = s.ignored_low
    wt = mant.dtype.type
    bits = field.astype(mant.dtype)
    bits <<= wt(s.mbits)
    bits |= mant
    if sign is not None:
        sign <<= wt(s.ebits + s.mbits)
        bits |= sign
    if low:
        bits <<= wt(low)
    return bits.astype(np.uint64)


def random_rows(
    a_fmt: Format,
    b_fmt: Format,
    c_fmt: Format,
    K: int,
    n: int,
    seed: int,
    compiled: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`n` random rows: a (n, K), b (n, K), c (n,) as bit patterns in the narrowest
    unsigned dtype of each format (uint16 for fp16, ...), and each row's
    kind index into `KINDS`. The same arguments give the same rows. `compiled`: compose
    the operands with the LLVM kernel of `rows_kernel` (the same bits; numpy where it
    cannot be built), else with numpy."""
    if a_fmt.spec.is_integer:
        from .int_rows import integer_rows

        return integer_rows(a_fmt, b_fmt, c_fmt, K, n, seed)
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, len(KINDS), size=n)
    a = _operand(a_fmt, kind, rng, K, compiled)
    b = _operand(b_fmt, kind, rng, K, compiled)
    cancel = np.flatnonzero(kind == KINDS.index(RowKind.CANCEL))
    if K >= 2 and len(cancel):
        h = K // 2
        sb = b_fmt.spec
        sign_b = b.dtype.type(1 << (sb.storage - 1 - sb.ignored_high))
        noise = (rng.bit_generator.random_raw(size=(len(cancel), h)) & np.uint64(1)) << np.uint64(
            sb.ignored_low
        )
        a[cancel, h : 2 * h] = a[cancel, :h]
        b[cancel, h : 2 * h] = (b[cancel, :h] ^ sign_b) ^ noise.astype(b.dtype)
    c = _operand(c_fmt, kind, rng, 1, compiled)[:, 0]
    return a, b, c, kind


__all__ = ["KINDS", "STREAM", "RowKind", "random_rows"]
