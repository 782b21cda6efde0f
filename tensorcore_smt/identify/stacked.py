"""GEMM hypotheses run on the numpy interpreter with their chains stacked as lanes.

The numpy interpreter's cost is nearly fixed per instruction step, whatever the number
of rows (each step is a few thousand array operations): a K = 512 FP8 GEMM element is 16
chained wgmma steps, about 0.1 s on 29 rows as on 1536. The chains that start from +0
(every promoted chain, and every split's chain C does not join) are independent of each
other, so the rows of every chain of one length run as the lanes of one chain: a
schedule promoting every 128 elements runs 4 steps on 4N lanes instead of 16 on N. The
chains' d then enter `gemm.element.element` (its `chains` argument), which adds them,
combines the splits and runs the epilogue as it always does: the same code on the same
values, so the bits are element.py's (tests/test_identify_stacked.py checks them against
`run_rows` bit for bit).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..bv.chunks import host_bits
from ..bv.core import BV
from ..bv.vector import VECTOR
from ..formats import decode_memo
from ..gemm.model import GemmModel

Layout = tuple[tuple[int, ...], ...]
"""The chains run together as lanes (their k-blocks, in order), all of one length."""


def zero_chains(m: GemmModel) -> list[tuple[int, ...]] | None:
    """The chains of `m`'s plan that start from +0 (what `element.accumulate` asks its
    `chains` argument for), or None where stacking does not apply: operands the unit
    reads other than as given (scaled or rounded first), seeded or wide partials,
    zero-padding inside K, or a plan of one chain (nothing to stack)."""
    from ..gemm.element import c_joins, rounds_operands
    from ..gemm.schedule import AlphaOn, OperandRound

    plan, p = m.plan, m.p
    if plan.seeds or plan.wide or m.K_padded != m.K:
        return None
    if m.schedule.alpha_on != AlphaOn.EPILOGUE:
        return None
    if plan.operand_round != OperandRound.TRUNCATE and any(
        rounds_operands(f) for f in (p.a_fmt, p.b_fmt)
    ):
        return None
    out: list[tuple[int, ...]] = []
    for s, sp in enumerate(plan.splits):
        if sp.promoted:
            out += [tuple(ch) for ch in sp.chains if ch]
        elif not c_joins(plan, s, True) and sp.chains and sp.chains[0]:
            out.append(tuple(sp.chains[0]))
    return out if len(out) > 1 else None


def layouts(chains: list[tuple[int, ...]]) -> list[Layout]:
    """The chains grouped by length (each group runs as one stack of lanes)."""
    by_len: dict[int, list[tuple[int, ...]]] = {}
    for ch in dict.fromkeys(chains):
        by_len.setdefault(len(ch), []).append(ch)
    return [tuple(v) for v in by_len.values()]


def stacked_columns(
    layout: Layout, a: np.ndarray, b: np.ndarray, k_block: int, wa: int, wb: int
) -> tuple[list[BV], list[BV]]:
    """The operands of the chains of `layout` as the columns of one chain (len(layout)
    * N lanes: the rows of the first chain, then the second's, ...)."""
    cols = [
        np.concatenate([np.arange(j * k_block, (j + 1) * k_block) for j in ch]) for ch in layout
    ]
    sa = np.concatenate([a[:, c] for c in cols], axis=0)
    sb = np.concatenate([b[:, c] for c in cols], axis=0)
    return (
        [BV(VECTOR, x, wa) for x in VECTOR.columns(sa, wa)],
        [BV(VECTOR, x, wb) for x in VECTOR.columns(sb, wb)],
    )


def run_stacked(
    m: GemmModel,
    a_cols: Sequence[BV],
    b_cols: Sequence[BV],
    c: BV,
    n: int,
    stacks: dict[Layout, tuple[list[BV], list[BV], dict]],
) -> BV:
    """The output element of `m` on n rows: `a_cols`, `b_cols` (K columns of n lanes) and
    c as `m.run` takes them; `stacks` holds each layout's stacked columns and their
    decode memo (`stacked_columns`; made by the caller, kept across hypotheses)."""
    from ..gemm.element import element, run_chain

    p = m.p
    wd = p.d_fmt.spec.storage
    done: dict[tuple[int, ...], BV] = {}
    for layout in layouts(zero_chains(m) or []):
        sa, sb, memo = stacks[layout]
        with decode_memo(memo):
            d = run_chain(p, sa, sb, range(len(layout[0])), BV.const(VECTOR, 0, wd))
        bits = host_bits(VECTOR, d, n * len(layout))
        for i, ch in enumerate(layout):
            done[ch] = BV(VECTOR, VECTOR.lanes(bits[i * n : (i + 1) * n], wd), wd)

    def chains(blocks: Sequence[int]) -> BV:
        return done[tuple(blocks)]

    return element(a_cols, b_cols, c, p, m.plan, m.schedule, chains=chains)
