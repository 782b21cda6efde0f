"""What `reveal` learnt, measured on inputs it never saw: fresh wide-range, cancelling
and subnormal inputs drawn by a generator of their own (not arithmetic.discriminating,
which reveal learns and checks on), run through the library and through the revealed
model, compared bit for bit.

Two models of each class are measured: the tree under its learnt arithmetic
(evaluate.py) and the GEMM hypothesis run through tc.matmul (where a schedule expresses
the tree). A class's figure is the number of outputs each gives the library's bits at.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..formats import Format
from .arithmetic import SUBNORMAL_EXP, WIDE_EXP, matches

Library = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""library(A, B) -> D: the library's M x N outputs on float64 inputs exact in its format."""

HELDOUT_SALT = 0x4E1D
"""Mixed into every seed here, so no draw repeats one of reveal's own."""
MAX_CALLS = 1 << 17
"""Library calls of one measurement, at most (a class of one output a call needs as
many calls as outputs)."""
BATCH = 1 << 16
"""Outputs of the calls whose outputs are compared at once (tc.matmul batched)."""
MAX_INPUT = 1 << 24
"""Elements of the stacked A of one batch, at most."""


def heldout_inputs(fmt: Format, m: int, k: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A (M x K) and B (K x N) in float64, exact in `fmt`, row by row one of four kinds
    (row r: kind r mod 4): wide exponent range (signs, mantissas and exponents uniform);
    a cancelling row (its products sum to nearly zero: the second half of the row is the
    first half's products negated at shuffled positions, each off by a few ulps, so the
    result is the rounding errors of the order); a row with one entry in six subnormal
    (kept or flushed by the library); a row of tiny and huge products mixed (exponents at
    both ends of the range, so fp32 and wider partial sums differ). B is wide-range, with
    its rows paired as the cancelling rows need."""
    from .oracles import np_dtype

    e = WIDE_EXP.get(fmt.spec.name, 6)
    rng = np.random.default_rng([HELDOUT_SALT, seed, m, k, n])

    def wide(shape, lo: int, hi: int) -> np.ndarray:
        sign = rng.choice([-1.0, 1.0], shape)
        return sign * rng.uniform(1.0, 2.0, shape) * np.exp2(rng.integers(lo, hi + 1, shape))

    a = wide((m, k), -e, e)
    b = wide((k, n), -e // 2, e // 2)
    perm = rng.permutation(k)
    half = k // 2
    src, dst = perm[:half], perm[half : 2 * half]
    b[dst] = b[src]
    kind = np.arange(m) % 4
    cancel = np.flatnonzero(kind == 1)
    off = 1 + rng.integers(-3, 4, (len(cancel), half)) * 2.0**-21
    a[np.ix_(cancel, dst)] = -a[np.ix_(cancel, src)] * off
    subs = np.flatnonzero(kind == 2)
    lo, hi = SUBNORMAL_EXP.get(fmt.spec.name, (-24, -15))
    mask = rng.random((len(subs), k)) < 1 / 6
    vals = a[subs]
    vals[mask] = np.sign(vals[mask]) * np.exp2(rng.integers(lo, hi + 1, int(mask.sum())))
    a[subs] = vals
    ends = np.flatnonzero(kind == 3)
    far = rng.integers(0, 2, (len(ends), k)) * 2 - 1
    a[ends] = np.sign(a[ends]) * rng.uniform(1, 2, (len(ends), k)) * np.exp2(far * e)
    dt = np_dtype(fmt)
    with np.errstate(over="ignore", under="ignore"):
        return a.astype(dt).astype(np.float64), b.astype(dt).astype(np.float64)


@dataclass
class ClassFigure:
    """One class's held-out figure: outputs compared, those the tree under its learnt
    arithmetic gave (None: no arithmetic learnt), those the hypothesis gave (None: no
    hypothesis), and the first output either missed (row, column, library bits)."""

    outputs: int = 0
    tree_agreed: int | None = None
    hypothesis_agreed: int | None = None
    first_miss: tuple[int, int, int] | None = None


@dataclass
class HeldOut:
    """The held-out measurement of one reveal: per class, the calls made, the call shape
    and the seconds it took."""

    classes: list[ClassFigure] = field(default_factory=list)
    calls: int = 0
    shape: tuple[int, int, int] = (0, 0, 0)
    seconds: float = 0.0

    @property
    def outputs(self) -> int:
        return sum(c.outputs for c in self.classes)

    @property
    def reproduced(self) -> bool:
        """Whether every class was reproduced at every output compared, by its
        hypothesis where it has one and by its tree's arithmetic where it has none."""
        for c in self.classes:
            best = c.hypothesis_agreed if c.hypothesis_agreed is not None else c.tree_agreed
            if best is None or best != c.outputs:
                return False
        return self.outputs > 0

    def text(self) -> str:
        parts = []
        for i, c in enumerate(self.classes):
            got = []
            if c.hypothesis_agreed is not None:
                got.append(f"hypothesis {c.hypothesis_agreed:,}")
            if c.tree_agreed is not None:
                got.append(f"tree {c.tree_agreed:,}")
            who = f"class {i}: " if len(self.classes) > 1 else ""
            parts.append(f"{who}{' / '.join(got) or 'nothing'} of {c.outputs:,}")
        return "; ".join(parts)


def measure(
    result,
    outputs: int,
    seed: int = 0,
    library: Library | None = None,
    shape: tuple[int, int] | None = None,
) -> HeldOut:
    """Compare `result` (a RevealResult) with the library on about `outputs` held-out
    outputs (about as many of each class). `library`: the call to compare with (default:
    the oracle reveal asked, called afresh); `shape`: M x N of each call (default: the
    oracle's check shape; a class layout is read only where it is the probe's shape,
    else every output is taken as one class)."""
    from ..gemm.emulate import matmul
    from .oracles import make_oracle, np_dtype

    t0 = time.monotonic()
    orc = make_oracle(result.oracle, result.dtype, result.shape)
    k = result.k
    m, n = shape or orc.check_shape(k)
    call = library or orc.outputs
    labels = np.zeros((m, n), np.int64)
    if result.probe_shape == (m, n):
        for c, cls in enumerate(result.classes):
            for m0, m1, n0, n1 in cls.blocks:
                labels[m0:m1, n0:n1] = c
    out_dt = np_dtype(orc.out)
    in_dt = np_dtype(orc.fmt)
    u = {2: np.uint16, 4: np.uint32}[np.dtype(out_dt).itemsize]
    got = HeldOut(shape=(m, n, k))
    got.classes = [
        ClassFigure(
            tree_agreed=0 if cls.arithmetic is not None else None,
            hypothesis_agreed=0 if cls.hypothesis is not None else None,
        )
        for cls in result.classes
    ]
    share = -(-outputs // len(result.classes))
    sizes = [int((labels == c).sum()) for c in range(len(result.classes))]
    while got.calls < MAX_CALLS and any(
        f.outputs < share and s for f, s in zip(got.classes, sizes)
    ):
        # calls batched until the class that needs most has its share (or BATCH outputs)
        left = max(-(-(share - f.outputs) // s) for f, s in zip(got.classes, sizes) if s)
        cap = min(BATCH // (m * n), MAX_INPUT // (m * k))
        batch = max(1, min(left, cap, MAX_CALLS - got.calls))
        # one draw for the batch: its row blocks are the calls' A (the row kinds cycle
        # through every position), its B theirs
        big, b1 = heldout_inputs(orc.fmt, batch * m, k, n, seed + got.calls)
        a = big.reshape(batch, m, k)
        d = np.stack([np.asarray(call(x, b1)).astype(out_dt) for x in a])
        got.calls += batch
        for c, cls in enumerate(result.classes):
            fig = got.classes[c]
            rr, cc = np.nonzero(labels == c)
            room = share - fig.outputs
            if not len(rr) or room <= 0:
                continue
            want = d[:, rr, cc].reshape(-1)[:room]
            fig.outputs += len(want)
            miss = np.zeros(len(want), bool)
            if cls.arithmetic is not None:  # in chunks of outputs: each needs K of A
                calls = np.repeat(np.arange(batch), len(rr))[: len(want)]
                at = np.tile(np.arange(len(rr)), batch)[: len(want)]
                ok = np.empty(len(want), bool)
                step = max(1, MAX_INPUT // k)
                for lo in range(0, len(want), step):
                    ci, pi = calls[lo : lo + step], at[lo : lo + step]
                    ra, rb = a[ci, rr[pi]], b1[:, cc[pi]].T
                    part = want[lo : lo + step]
                    ok[lo : lo + step] = matches(cls.tree, cls.arithmetic, ra, rb, part, out_dt)
                fig.tree_agreed += int(ok.sum())
                miss |= ~ok
            if cls.hypothesis is not None:
                typed = np.float32 if cls.widen or orc.fmt == Format.FP32 else in_dt
                ur, ri = np.unique(rr, return_inverse=True)
                uc, ci = np.unique(cc, return_inverse=True)
                h = matmul(
                    cls.hypothesis,
                    a[:, ur].astype(typed),
                    b1[:, uc].astype(typed),
                    instr=cls.instr,
                    engine="compiled",
                )
                h = np.asarray(h).astype(out_dt)[:, ri, ci].reshape(-1)[:room]
                ok = h.view(u) == want.view(u)
                fig.hypothesis_agreed += int(ok.sum())
                miss |= ~ok
            if fig.first_miss is None and miss.any():
                i = int(np.flatnonzero(miss)[0])
                call_i, at = divmod(i, len(rr))
                fig.first_miss = (int(rr[at]), int(cc[at]), int(want[i : i + 1].view(u)[0]))
    got.seconds = time.monotonic() - t0
    return got
