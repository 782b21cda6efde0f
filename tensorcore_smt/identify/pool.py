"""Candidate rows for identification: a pool of inputs that no oracle has answered yet.

Evaluating a hypothesis on a row is nearly free once the model is running (the vector
interpreter's cost is per call, not per row), so every hypothesis is run on the whole
pool at once, and the rows sent to an oracle are picked from it: the first few to cover
the kinds below, then the ones that split the surviving hypotheses.

The pool mixes the general validation rows of `tensorcore_smt.validation.rows` (the mix:
normal, cancelling, wide, subnormal, zeros, specials, raw bits) with rows aimed at single
parameters (`TARGETED`: one-big, equal, c-round, tiny, mixed-signs, spread); what each kind
exercises is documented once, in the shared vocabulary `tensorcore_smt.validation.kinds`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..formats import Format, Specials
from ..model.params import ModelParams
from ..validation.kinds import MIX, TARGETED, RowKind
from ..validation.rows import random_rows


def _enc(fmt: Format, sign: np.ndarray, e: np.ndarray, mant: np.ndarray) -> np.ndarray:
    """Bit patterns of (-1)^sign * 1.mant * 2^e, subnormal (truncated) below the normal
    range and clipped to the largest normal binade above it."""
    s = fmt.spec
    top = (1 << s.ebits) - 1
    max_field = top - 1 if s.specials == Specials.IEEE else top
    f = np.asarray(e, dtype=np.int64) + s.bias
    mant = np.asarray(mant, dtype=np.uint64) & np.uint64((1 << s.mbits) - 1)
    sub_shift = np.clip(1 - f, 0, 63).astype(np.uint64)
    sub_mant = ((np.uint64(1) << np.uint64(s.mbits)) | mant) >> sub_shift
    mant = np.where(f < 1, sub_mant, mant)
    f = np.clip(f, 0, max_field)
    if s.specials == Specials.FN:
        ones = np.uint64((1 << s.mbits) - 1)
        mant = np.where((f == max_field) & (mant == ones), mant - np.uint64(1), mant)
    sign = np.asarray(sign, dtype=np.uint64) if s.signed else np.zeros_like(mant)
    low = np.uint64(s.ignored_low)
    bits = (
        (sign << np.uint64(s.ebits + s.mbits) << low)
        | (f.astype(np.uint64) << np.uint64(s.mbits) << low)
        | (mant << low)
    )
    if s.specials == Specials.FNUZ:  # no -0: its pattern is the NaN
        neg_zero = np.uint64(1) << np.uint64(s.storage - 1)
        bits = np.where(bits == neg_zero, np.uint64(0), bits)
    return bits


def _mant(fmt: Format, rng: np.random.Generator, shape, high: bool = False) -> np.ndarray:
    m = fmt.spec.mbits
    if high:  # the top quarter of the binade
        lo = (3 << m) // 4
        return rng.integers(lo, 1 << m, size=shape, dtype=np.uint64)
    return rng.integers(0, 1 << m, size=shape, dtype=np.uint64)


def targeted_rows(p: ModelParams, kind: RowKind | str, n: int, rng: np.random.Generator):
    """`n` rows of one targeted kind (`TARGETED`) for the operand formats of `p`."""
    if kind not in TARGETED:
        raise ValueError(f"unknown row kind {kind!r}; known: {', '.join(TARGETED)}")
    K, fa, fb, fc = p.K, p.a_fmt, p.b_fmt, p.c_fmt
    sa = rng.integers(0, 2, size=(n, K))
    sb = rng.integers(0, 2, size=(n, K))
    sc = rng.integers(0, 2, size=n)
    ea = np.zeros((n, K), dtype=np.int64)
    eb = np.zeros((n, K), dtype=np.int64)
    ec = np.zeros(n, dtype=np.int64)
    ma, mb, mc = _mant(fa, rng, (n, K)), _mant(fb, rng, (n, K)), _mant(fc, rng, n)
    zero_ab = np.zeros((n, K), dtype=bool)
    zero_c = np.zeros(n, dtype=bool)
    kind = RowKind(kind)
    if kind in (RowKind.ONE_BIG, RowKind.MIXED_SIGNS):
        drop = rng.integers(1, 41, size=(n, K))
        drop[:, 0] = 0
        ea, eb = -(drop // 2), -(drop - drop // 2)
        zero_c = rng.random(n) < 0.4
        ec = rng.integers(-2, 3, size=n)
        if kind == RowKind.MIXED_SIGNS:
            zero_c[:] = False
            sc = 1 - ((sa[:, 0] + sb[:, 0]) % 2)
            ec = rng.integers(-1, 2, size=n)
    elif kind == RowKind.EQUAL:
        s = rng.integers(0, 2, size=n)
        sa[:] = s[:, None]
        sb[:] = 0
        sc = s
        ma, mb = _mant(fa, rng, (n, K), high=True), _mant(fb, rng, (n, K), high=True)
        same = rng.random(n) < 0.5
        ma = np.where(same[:, None], ma[:, :1], ma)
        mb = np.where(same[:, None], mb[:, :1], mb)
        mc = _mant(fc, rng, n, high=True)
        ec = rng.integers(0, 3, size=n)
        zero_c = rng.random(n) < 0.3
    elif kind == RowKind.SPREAD:
        s = rng.integers(0, 2, size=n)
        sa[:] = s[:, None]
        sb[:] = 0
        sc = s
        top = rng.random((n, K)) < 0.5
        drop = np.where(top, 0, rng.integers(1, 30, size=(n, K)))
        ea, eb = -(drop // 2), -(drop - drop // 2)
        ma = np.where(top, _mant(fa, rng, (n, K), high=True), ma)
        mb = np.where(top, _mant(fb, rng, (n, K), high=True), mb)
        ec = rng.integers(-3, 3, size=n)
    elif kind == RowKind.C_ROUND:
        prec = p.out_fmt.spec.mbits
        ec = np.zeros(n, dtype=np.int64)
        live = rng.integers(1, 3, size=n)
        zero_ab = np.arange(K)[None, :] >= live[:, None]
        d = prec + rng.integers(-2, 4, size=(n, K))
        ea, eb = -(d // 2), -(d - d // 2)
    else:  # RowKind.TINY
        ea = fa.spec.emin + rng.integers(-3, 4, size=(n, K))
        eb = fb.spec.emin + rng.integers(-3, 4, size=(n, K))
        zero_ab = rng.random((n, K)) < 0.3
        zero_c = rng.random(n) < 0.6
        ec = fc.spec.emin + rng.integers(-3, 6, size=n)
    a = _enc(fa, sa, ea, ma)
    b = _enc(fb, sb, eb, mb)
    c = _enc(fc, sc, ec, mc)
    a = np.where(zero_ab, np.uint64(0), a)
    c = np.where(zero_c, np.uint64(0), c)
    return a.astype(np.uint64), b.astype(np.uint64), c.astype(np.uint64)


@dataclass
class Rows:
    """A growing table of rows (a, b, c bit patterns) with the kind each came from."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    kinds: list[str] = field(default_factory=list)  # RowKind, or 'recorded'

    def __len__(self) -> int:
        return len(self.c)

    def add(self, a, b, c, kind: str) -> list[int]:
        """Append rows (2-D a, b; 1-D c); returns their indices. A row already present
        is not added twice: its existing index is returned."""
        a = np.asarray(a, dtype=np.uint64).reshape(-1, self.a.shape[1])
        b = np.asarray(b, dtype=np.uint64).reshape(-1, self.b.shape[1])
        c = np.asarray(c, dtype=np.uint64).reshape(-1)
        out = []
        index = {k: i for i, k in enumerate(self.keys())}
        for i in range(len(c)):
            k = _row_key(a[i], b[i], c[i])
            if k in index:
                out.append(index[k])
                continue
            self.a = np.vstack([self.a, a[i : i + 1]])
            self.b = np.vstack([self.b, b[i : i + 1]])
            self.c = np.concatenate([self.c, c[i : i + 1]])
            self.kinds.append(kind)
            index[k] = len(self.c) - 1
            out.append(len(self.c) - 1)
        return out

    def key(self, i: int) -> bytes:
        """Row i's identity: two rows have one key exactly when a, b and c are equal."""
        return _row_key(self.a[i], self.b[i], self.c[i])

    def keys(self) -> list[bytes]:
        """Every row's `key`, in order (one pass over the table)."""
        if not len(self):
            return []
        whole = np.concatenate(
            [self.a.astype(np.uint64), self.b.astype(np.uint64), self.c.astype(np.uint64)[:, None]],
            axis=1,
        )
        return [row.tobytes() for row in np.ascontiguousarray(whole)]


def _row_key(a: np.ndarray, b: np.ndarray, c) -> bytes:
    """The key of one row (a, b: its K patterns; c): its uint64 patterns as bytes."""
    u = np.uint64
    return np.concatenate([np.asarray(a, u), np.asarray(b, u), np.asarray([c], u)]).tobytes()


def make_pool(p: ModelParams, n: int = 1536, seed: int = 0) -> Rows:
    """`n` candidate rows for the instruction of `p`: half general validation rows, half
    targeted ones (see the module docstring). The same arguments give the same rows."""
    rng = np.random.default_rng(seed)
    n_gen = n // 2
    a, b, c, kind = random_rows(p.a_fmt, p.b_fmt, p.c_fmt, p.K, n_gen, seed)
    rows = Rows(a, b, c, [MIX[int(k)] for k in kind])
    per = (n - n_gen) // len(TARGETED)
    for kd in TARGETED:
        ta, tb, tc = targeted_rows(p, kd, per, rng)
        rows.a = np.vstack([rows.a, ta])
        rows.b = np.vstack([rows.b, tb])
        rows.c = np.concatenate([rows.c, tc])
        rows.kinds += [kd] * per
    return rows


def first_rows(rows: Rows, n: int, seed: int = 0) -> list[int]:
    """`n` pool rows covering the kinds in turn (the opening round of `identify`)."""
    rng = np.random.default_rng(seed + 1)
    by_kind: dict[str, list[int]] = {}
    for i, k in enumerate(rows.kinds):
        by_kind.setdefault(k, []).append(i)
    order = [k for k in TARGETED + MIX[:5] if k in by_kind]
    order += [k for k in by_kind if k not in order]
    for k in order:
        rng.shuffle(by_kind[k])
    out: list[int] = []
    while len(out) < n and any(by_kind[k] for k in order):
        for k in order:
            if by_kind[k] and len(out) < n:
                out.append(by_kind[k].pop())
    return out
