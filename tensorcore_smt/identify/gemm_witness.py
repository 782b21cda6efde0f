"""Rows built from the structure of GEMM schedules: inputs whose partial sums associate
differently under two plans, for the survivors that random pool rows cannot split.

Two schedules of one instruction differ only in where partial sums start and meet: the
chains of each split (a chain restarts at every promotion interval), the split-K
partials, and where C joins. A row with three nonzero terms, +big at one k position, a
small term at another and -big at a third, tells them apart when one plan lets big and
-big cancel before the small term meets big (it survives) and the other adds the small
term to big first in an accumulator too narrow to keep it (it is lost), or keeps it in a
wider one (an fp32 partial beside a chain that truncates). The positions that matter are
read off the plans: the first and last k-block of every chain of either plan, and their
neighbours; the magnitudes span the ratios from one to the whole range of a product, so
whatever the accumulators' widths some ratio falls between them. A variant puts the small
term in every block of a range (many small terms, each lost or all kept), another puts
big in C (C in the first chain, or joined in the epilogue).

A constructed row is only a candidate: `constructed_witness` re-runs both hypotheses on
every candidate with the model's own code and returns a row only where their outputs
differ, so a row it returns is a witness by the model itself, not by this construction.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..formats import Format
from ..gemm.model import GemmModel, run_rows
from .pool import Rows, _enc

ROWS = 1024
"""Candidate rows built for one question (one vector pass of each hypothesis)."""


def event_blocks(plans: list[Any]) -> list[int]:
    """The k-blocks where some plan's chains start or end, with their neighbours (in
    range, sorted): where two plans' partial sums can associate differently."""
    out: set[int] = set()
    for plan in plans:
        n = plan.n_blocks
        out.update((0, n - 1))
        for split in plan.splits:
            for chain in split.chains:
                if chain:
                    for blk in (chain[0], chain[-1]):
                        out.update(x for x in (blk - 1, blk, blk + 1) if 0 <= x < n)
    return sorted(out)


def _top_exponent(fmt: Format) -> int:
    """The exponent of the largest normal binade of `fmt` (its powers of two are exact)."""
    return fmt.spec.emax


def association_rows(
    a_fmt: Format,
    b_fmt: Format,
    c_fmt: Format,
    K: int,
    plans: list[Any],
    n: int = ROWS,
    seed: int = 0,
) -> Rows:
    """`n` candidate rows (a, b: (n, K) bit patterns; c: (n,)) for plans of depth K (see
    the module docstring): +big, a small term and -big at k-blocks where the plans' chains
    start or end, in every order, with ratios big/small from 2 to the range of a product."""
    rng = np.random.default_rng(seed)
    k_block = plans[0].k_block
    events = np.asarray(event_blocks(plans), dtype=np.int64)
    sa, sb = a_fmt.spec, b_fmt.spec
    ea_top, eb_top = _top_exponent(a_fmt), _top_exponent(b_fmt)
    span = (ea_top - sa.emin) + (eb_top - sb.emin)  # exponents a product can span
    zeros = np.zeros((n, K), dtype=np.int64)
    sign_a, sign_b = np.zeros((n, K), dtype=np.int64), np.zeros((n, K), dtype=np.int64)
    ea, eb = zeros.copy(), zeros.copy()
    ma = np.zeros((n, K), dtype=np.uint64)
    live = np.zeros((n, K), dtype=bool)
    c_big = rng.random(n) < 0.2  # big in C instead of a product
    run = rng.random(n) < 0.25  # the small term in every block between two events
    for r in range(n):
        i, j, q = (int(x) for x in rng.choice(events, size=3))
        pos_big, pos_small, pos_neg = i * k_block, j * k_block + 1, q * k_block + 2
        if len({pos_big, pos_small, pos_neg}) < 3 or max(pos_big, pos_small, pos_neg) >= K:
            continue  # a zero row (one-element blocks, or past K)
        ratio = int(rng.integers(1, span + 1))
        small_a = max(ea_top - ratio, sa.emin)
        small_b = max(eb_top - (ratio - (ea_top - small_a)), sb.emin)
        smalls = [pos_small]
        if run[r]:
            lo, hi = sorted((j, q))
            smalls = [k for k in range(lo * k_block + 1, min(hi * k_block + 2, K), k_block)]
        for k in smalls:
            if k in (pos_big, pos_neg):
                continue
            live[r, k] = True
            ea[r, k], eb[r, k] = small_a, small_b
            ma[r, k] = rng.integers(0, 1 << sa.mbits) if sa.mbits else 0
            sign_a[r, k] = rng.integers(0, 2)
        for k, s in ((pos_big, 0), (pos_neg, 1)):
            if k == pos_big and c_big[r]:
                continue
            live[r, k] = True
            ea[r, k], eb[r, k], sign_a[r, k] = ea_top, eb_top, s
    a = np.where(live, _enc(a_fmt, sign_a, ea, ma), np.uint64(0))
    b = np.where(live, _enc(b_fmt, sign_b, eb, np.zeros((n, K), np.uint64)), np.uint64(0))
    c_exp = np.full(n, min(ea_top + eb_top, _top_exponent(c_fmt)), dtype=np.int64)
    c = np.where(c_big, _enc(c_fmt, np.zeros(n, np.int64), c_exp, np.zeros(n, np.uint64)), 0)
    return Rows(a.astype(np.uint64), b.astype(np.uint64), c.astype(np.uint64), ["association"] * n)


def pair_rows(ma: GemmModel, mb: GemmModel, n: int = ROWS, seed: int = 0) -> Rows:
    """Candidate rows for two models of one instruction (their plans' events)."""
    return association_rows(ma.p.a_fmt, ma.p.b_fmt, ma.c_fmt, ma.K, [ma.plan, mb.plan], n, seed)


def constructed_witness(
    ma: GemmModel, mb: GemmModel, n: int = ROWS, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, int] | None:
    """A row (a, b of K bit patterns, c) on which `ma` and `mb` give different outputs,
    found among constructed candidates (`pair_rows`) by running both models on them;
    None when no candidate separates them (which proves nothing)."""
    rows = pair_rows(ma, mb, n, seed)
    da = run_rows(ma, rows.a, rows.b, rows.c)
    db = run_rows(mb, rows.a, rows.b, rows.c)
    differ = np.flatnonzero(da != db)
    if not len(differ):
        return None
    i = int(differ[0])
    return rows.a[i], rows.b[i], int(rows.c[i])
