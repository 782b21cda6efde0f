"""A schedule as pure data for one output element of a given K: which k-blocks each chain
takes, how chain results are promoted, how split partials combine, where C joins.
No arithmetic here: element.py runs a Plan with the model's operations.

Layouts (cuBLASLt split-K as observed on an H100 and an
RTX 4060): K is zero-padded to a multiple of the instruction's K (k_block) and cut into
k-blocks; split-K groups the k-blocks into k-tiles of `split_tile` elements, split s owning
the contiguous tiles [s*q, (s+1)*q), q = ceil(tiles / S), or the interleaved tiles
t = s mod S; within a split, a promoted schedule starts a fresh chain every `promote` of
the split's own elements (CUTLASS `mma_promotion_interval`, in instructions).

Stream-K (Osama, Merrill, Cecka, Garland, Owens, "Stream-K: Work-centric Parallel
Decomposition for Dense Matrix-Matrix Multiplication on the GPU", PPoPP 2023): the
kernel's iteration space, output tiles times the k-iterations of each tile, is divided
evenly among G workers as contiguous ranges; a worker sums the part of each tile its range
meets as one chain from +0 into its fp32 accumulators, and a tile whose k-iterations fall
into several ranges is completed by a fix-up that adds the later workers' partials into
the first one's, in worker order. So the plan of an output element depends on where its
tile lies in that space (`stream_k_groups`), while every tile one worker covers whole is a
plain chain.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UserError
from .schedule import (
    CJoin,
    KOrder,
    OperandRound,
    PartialRound,
    Raster,
    ReduceFormat,
    Schedule,
    SkHybrid,
    SplitMode,
    first_leaf,
    pairwise_tree,
    reduce_tree,
    serial_tree,
)

Tree = int | tuple["Tree", "Tree"]
"""A combination order: a split index, or (left, right) = left + right in fp32."""

__all__ = ["pairwise_tree", "serial_tree"]  # the combination orders, from schedule.py


@dataclass(frozen=True)
class SplitPlan:
    """One split's chains (k-block indices, in the order each chain takes them) and
    whether their results are promoted into an fp32 accumulator (from +0, in order);
    unpromoted, the split has exactly one chain whose result is its partial."""

    chains: tuple[tuple[int, ...], ...]
    promoted: bool


@dataclass(frozen=True)
class Plan:
    """Everything element.py needs to run one output element, as data."""

    k_block: int  # K of the instruction: elements per k-block
    n_blocks: int  # k-blocks of the zero-padded K
    splits: tuple[SplitPlan, ...]
    combine: Tree  # how the split partials combine (a single split: 0)
    c_in_chain: bool  # C is acc_0 of split 0's first chain, else joins in the epilogue
    c_in_partial: bool = False  # C added to the partial that starts the combination
    rounded: frozenset[int] = frozenset()  # partials rounded to the output type first
    reduce_fmt: ReduceFormat = ReduceFormat.ACC  # what each combining addition rounds to
    operand_round: OperandRound = OperandRound.TRUNCATE  # fp32 -> TF32 operands
    seeds: tuple[tuple[int, Tree], ...] = ()  # (s, t): split s's chain starts from sum t
    wide: int = 0  # the last `wide` partials summed in fp64, the combination added to them
    gap: tuple[int, int] = (0, 0)  # (at, zeros): zeros inserted before K element `at`
    # (residue_tile; k_layout), elements at and after it shifted by `zeros`; (0, 0): K
    # zero-padded at its end only
    gaps: tuple[tuple[int, int], ...] = ()  # further (at, zeros), ascending: split_range's
    # ranges each laid out on its own (range_layout)

    @property
    def fp32_acc(self) -> bool:
        """Whether the element's accumulator before the epilogue is an fp32 sum
        (promoted chains or combined splits) rather than the chain's d."""
        return len(self.splits) > 1 or self.splits[0].promoted

    def library_steps(self) -> tuple[str, ...]:
        """The steps of this plan beyond chains, promotions and fp32 combinations (the
        schedule fields operand_round, round_partials, reduce_fmt and c_join=partial),
        by field name: an analysis that models only those (certify's error bounds) must
        refuse a plan where this is not empty."""
        out = []
        if self.operand_round != OperandRound.TRUNCATE:
            out.append("operand_round")
        if self.rounded:
            out.append("round_partials")
        if self.reduce_fmt != ReduceFormat.ACC:
            out.append("reduce_fmt")
        if self.c_in_partial:
            out.append("c_join")
        if self.seeds:
            out.append("seeds")
        if self.wide:
            out.append("wide")
        return tuple(out)

    def steps(self) -> int:
        """Instruction steps per output element."""
        return sum(len(c) for s in self.splits for c in s.chains)


def tree_leaves(t: Tree) -> list[int]:
    return [t] if isinstance(t, int) else tree_leaves(t[0]) + tree_leaves(t[1])


def padded_k(K: int, k_block: int) -> int:
    """K rounded up to a multiple of the instruction's K (kernels zero-fill the tail)."""
    return -(-K // k_block) * k_block


def k_layout(schedule: Schedule, K: int, k_block: int) -> tuple[int, tuple[int, int]]:
    """(K_padded, gap) of a depth-K GEMM under `schedule`: the padded length the plan
    cuts into k-blocks and the zeros inserted inside K (Plan.gap). Without residue_tile,
    K zero-padded at its end to a multiple of k_block. With residue_tile=T (CUTLASS 2.x
    mainloops: the partial k-tile first, its missing elements zero-filled by predicated
    loads, then the full k-tiles): r = K mod T elements, T - r zeros, the other K - r
    elements, K_padded = T*ceil(K/T); UserError unless T is a multiple of k_block."""
    T = schedule.residue_tile
    if T is None:
        return padded_k(K, k_block), (0, 0)
    _multiple("residue_tile", T, k_block)
    r = K % T
    return (K, (0, 0)) if r == 0 else (K - r + T, (r, T - r))


def k_positions(K: int, gap: tuple[int, int], gaps: tuple[tuple[int, int], ...] = ()) -> np.ndarray:
    """Where each of the K elements sits in the padded K (Plan.gap and Plan.gaps):
    element k shifted by the zeros of every gap at or before it."""
    pos = np.arange(K, dtype=np.int64)
    for at, zeros in (gap, *gaps):
        pos[at:] += zeros
    return pos


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def range_layout(
    schedule: Schedule, K: int, k_block: int
) -> tuple[int, tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]:
    """(K_padded, gaps, block ranges) of split_range=A with split_k=S (CUTLASS 2.x
    split-K: gemm_k_size = round_up(ceil(K/S), kAlignK)): split s owns the elements
    [s*q, min((s+1)*q, K)), q = A*ceil(ceil(K/A)/S), laid out on their own: with
    residue_tile=T the range's first L mod T elements, zero-filled to T, then its full
    k-tiles (its own predicated residue tile), else the L elements zero-padded at their end
    to a multiple of k_block. The ranges follow one another; `block ranges` are the
    [lo, hi) k-blocks each split owns. UserError when a split would own no element."""
    A, S, T = schedule.split_range, schedule.split_k, schedule.residue_tile
    assert A is not None
    if T is not None:
        _multiple("residue_tile", T, k_block)
    q = A * _cdiv(_cdiv(K, A), S)
    if _cdiv(K, q) < S:
        ok = [s for s in range(2, min(K, 1024) + 1) if _cdiv(K, A * _cdiv(_cdiv(K, A), s)) == s]
        raise UserError(
            f"split_range={A}, split_k={S}: K={K} in ranges of {q} elements leaves "
            f"{S - _cdiv(K, q)} split(s) without an element; allowed: split_k in "
            f"{', '.join(map(str, ok)) or 'none'} for this K"
        )
    gaps, ranges, dst = [], [], 0
    for lo in range(0, K, q):
        hi = min(lo + q, K)
        L = hi - lo
        if T is not None and L % T:
            gaps.append((lo + L % T, T - L % T))
            padded = L - L % T + T
        else:
            padded = _cdiv(L, k_block) * k_block
            if padded > L and hi < K:
                gaps.append((hi, padded - L))
        ranges.append((dst // k_block, (dst + padded) // k_block))
        dst += padded
    return dst, tuple(gaps), tuple(ranges)


def plan_for(schedule: Schedule, K: int, k_block: int, parts: Parts | None = None) -> Plan:
    """The plan of `schedule` for a depth-K GEMM: K laid out by k_layout, then
    make_plan (parts: a stream-K tile's ranges)."""
    if schedule.split_range is not None:
        Kp, gaps, ranges = range_layout(schedule, K, k_block)
        return make_plan(schedule, Kp, k_block, parts, (0, 0), gaps, ranges)
    Kp, gap = k_layout(schedule, K, k_block)
    return make_plan(schedule, Kp, k_block, parts, gap)


def _multiple(field: str, value: int, k_block: int) -> int:
    if value % k_block:
        raise UserError(
            f"{field}={value} is not a multiple of the instruction's K={k_block}; "
            f"allowed: multiples of {k_block}"
        )
    return value // k_block


def contiguous_splits(tiles: int) -> list[int]:
    """The split_k values for which every contiguous split of `tiles` k-tiles owns at
    least one (q = ceil(tiles / S) tiles each, the last split the rest)."""
    return [S for S in range(1, tiles + 1) if -(-tiles // S) * (S - 1) < tiles]


def _empty_split(S: int, K_padded: int, tiles: int, width: int) -> str:
    q = -(-tiles // S)
    empty = S - sum(1 for s in range(S) if s * q < tiles)
    allowed = ", ".join(map(str, contiguous_splits(tiles)))
    return (
        f"split_k={S}: K={K_padded} has {tiles} k-tile(s) of {width}; contiguous splits of "
        f"{q} tile(s) leave {empty} split(s) without a k-tile; allowed: split_k in "
        f"{allowed} for this K (or split=interleaved)"
    )


def _kblocks(schedule: Schedule, K_padded: int, k_block: int) -> list[tuple[int, int]]:
    """The [lo, hi) k-block ranges of schedule.kblocks (one range without it); UserError
    unless every size is a multiple of k_block and they sum to K_padded."""
    n_blocks = K_padded // k_block
    if schedule.kblocks is None:
        return [(0, n_blocks)]
    sizes = [_multiple("kblocks", x, k_block) for x in schedule.kblocks]
    if sum(sizes) != n_blocks:
        shown = "+".join(map(str, schedule.kblocks))
        raise UserError(
            f"kblocks={shown} sums to {sum(schedule.kblocks)}, not K={K_padded}; allowed: "
            f"sizes (multiples of {k_block}) that sum to {K_padded}"
        )
    ends = [sum(sizes[: i + 1]) for i in range(len(sizes))]
    return list(zip([0, *ends[:-1]], ends))


def _split(schedule: Schedule, blocks: list[int], k_block: int) -> list[list[int]]:
    """The k-blocks each of the split_k splits of `blocks` owns (split, split_tile)."""
    S = schedule.split_k
    if S == 1:
        return [blocks]
    K_padded = len(blocks) * k_block
    per_tile = _multiple("split_tile", schedule.split_tile, k_block)
    tiles = [blocks[t : t + per_tile] for t in range(0, len(blocks), per_tile)]
    if len(tiles) < S:
        raise UserError(
            f"split_k={S}: K={K_padded} has {len(tiles)} k-tile(s) of "
            f"{schedule.split_tile}; allowed: split_k up to {len(tiles)} for this K"
        )
    if schedule.split == SplitMode.CONTIGUOUS:
        q = -(-len(tiles) // S)
        owned = [sum(tiles[s * q : (s + 1) * q], []) for s in range(S)]
        if not owned[-1]:
            raise UserError(_empty_split(S, K_padded, len(tiles), schedule.split_tile))
        return owned
    return [sum(tiles[s::S], []) for s in range(S)]


Parts = tuple[tuple[int, int], ...]
"""A stream-K tile's k-iterations cut by the workers' ranges: [lo, hi) iteration ranges in
k order, together covering 0..iterations."""


def k_iterations(schedule: Schedule, K_padded: int, k_block: int) -> int:
    """The k-iterations of one output tile of a stream-K kernel: split_tile-wide k-tiles of
    the padded K (the last one shorter when split_tile does not divide it)."""
    per = _multiple("split_tile", schedule.split_tile, k_block)
    return -(-(K_padded // k_block) // per)


def _stream_k_owned(schedule: Schedule, K_padded: int, k_block: int, parts: Parts):
    n_blocks = K_padded // k_block
    per = _multiple("split_tile", schedule.split_tile, k_block)
    iters = k_iterations(schedule, K_padded, k_block)
    if (
        not parts
        or parts[0][0] != 0
        or parts[-1][1] != iters
        or any(lo >= hi or (i and parts[i - 1][1] != lo) for i, (lo, hi) in enumerate(parts))
    ):
        raise ValueError(f"stream-K parts {parts} do not cut 0..{iters} into ranges")
    return [list(range(lo * per, min(hi * per, n_blocks))) for lo, hi in parts]


def make_plan(
    schedule: Schedule,
    K_padded: int,
    k_block: int,
    parts: Parts | None = None,
    gap: tuple[int, int] | None = None,
    gaps: tuple[tuple[int, int], ...] = (),
    ranges: tuple[tuple[int, int], ...] | None = None,
) -> Plan:
    """The plan of `schedule` for one output element over `K_padded` elements in k-blocks
    of `k_block` (K_padded a multiple of k_block); UserError when the schedule cannot
    cut this K (promote or split_tile not a multiple of k_block, fewer k-tiles than
    splits, a contiguous split left without a k-tile). Every split of a plan owns at least
    one k-tile: a split with none would be a plan with fewer splits written another way
    (its partial an fp32 +0), so it is refused rather than run.

    A stream-K schedule has a plan per output tile: `parts`, the tile's k-iterations as
    the workers' ranges cut them (`stream_k_groups`), each part one split, combined by
    the schedule's reduce; without `parts` such a schedule is refused in one line (a
    caller that takes one plan for every output element cannot run it).

    `gap`: the zeros k_layout inserts inside K (plan_for gives it); a schedule with
    residue_tile has a layout that depends on K itself, so it is refused without one.
    `gaps`, `ranges`: split_range's layout (range_layout: its zeros and the k-blocks of
    each split), likewise given by plan_for only."""
    if K_padded < k_block or K_padded % k_block:
        raise UserError(f"K={K_padded} is not a positive multiple of the instruction's K={k_block}")
    if gap is None:
        if schedule.split_range is not None:
            raise UserError(
                f"split_range={schedule.split_range}: the split ranges depend on K itself "
                "(plan.plan_for); this question takes a padded K only; allowed here: "
                "split_range=none"
            )
        if schedule.residue_tile is not None:
            raise UserError(
                f"residue_tile={schedule.residue_tile}: K's layout depends on K itself "
                "(plan.plan_for); this question takes a padded K only; allowed here: "
                "residue_tile=none"
            )
        gap = (0, 0)
    n_blocks = K_padded // k_block
    if schedule.chains is not None:
        return _given_chains(schedule, n_blocks, k_block)
    if schedule.stream_k is not None:
        if parts is None:
            raise UserError(
                f"stream_k={schedule.stream_k}: each output tile has its own plan (its place "
                "in the stream-K iteration space); only matmul (tcsmt gemm) runs such "
                "schedules, not a question about one output element"
            )
        owned = _stream_k_owned(schedule, K_padded, k_block, parts)
    elif ranges is not None:
        owned = [list(range(lo, hi)) for lo, hi in ranges]
    else:
        owned = []
        for lo, hi in _kblocks(schedule, K_padded, k_block):
            owned += _split(schedule, list(range(lo, hi)), k_block)
    S = len(owned)
    if schedule.order == KOrder.DESCENDING:
        owned = [blocks[::-1] for blocks in owned]
    per_chain = None
    if schedule.promote is not None:
        per_chain = _multiple("promote", schedule.promote, k_block)
    splits = []
    for blocks in owned:
        if per_chain is None:
            splits.append(SplitPlan((tuple(blocks),), False))
        else:
            chains = tuple(
                tuple(blocks[i : i + per_chain]) for i in range(0, len(blocks), per_chain)
            )
            splits.append(SplitPlan(chains, True))
    tree = schedule.tree if schedule.stream_k is None else reduce_tree(S, schedule.reduce)
    rounded: frozenset[int] = frozenset()
    if schedule.round_partials == PartialRound.ALL:
        rounded = frozenset(range(S))
    elif schedule.round_partials == PartialRound.FIRST:
        rounded = frozenset((first_leaf(tree),))
    return Plan(
        k_block,
        n_blocks,
        tuple(splits),
        tree,
        schedule.c_in_chain,
        c_in_partial=schedule.c_at == CJoin.PARTIAL,
        rounded=rounded,
        reduce_fmt=schedule.reduce_fmt,
        operand_round=schedule.operand_round,
        seeds=schedule.seeds or (),
        wide=schedule.wide or 0,
        gap=gap,
        gaps=gaps,
    )


def _given_chains(schedule: Schedule, n_blocks: int, k_block: int) -> Plan:
    """The plan of a schedule whose chains are given (schedule.chains): UserError unless
    they take every k-block of this K once."""
    chains = schedule.chains or ()
    flat = sorted(b for c in chains for b in c)
    if flat != list(range(n_blocks)):
        top = max(flat) + 1
        raise UserError(
            f"chains= takes k-blocks 0..{top - 1} ({len(flat)} in all), not the {n_blocks} "
            f"k-blocks of K={n_blocks * k_block}; allowed: chains that take each k-block "
            "of this K once"
        )
    return Plan(
        k_block,
        n_blocks,
        tuple(SplitPlan((c,), False) for c in chains),
        schedule.tree,
        schedule.c_in_chain,
        c_in_partial=schedule.c_at == CJoin.PARTIAL,
        operand_round=schedule.operand_round,
        seeds=schedule.seeds or (),
        wide=schedule.wide or 0,
    )


def equivalent_plan(plan: Plan, nan_payloads: bool = False) -> Plan:
    """The simplest plan that computes the same bits as `plan` on every input, for
    comparing schedules (the plan a kernel runs is `plan` itself). Splits that are each
    one promoted chain, combined serially (or two splits in either order), are one
    split promoted over those chains in turn: each partial is +0 + d_s in fp32, and
    a + (+0 + y) = a + y for every fp32 sum a that is not -0 (+0 + y differs from y only
    for y = -0, and a NaN is the canonical NaN either way); no such sum is -0, since it
    starts from +0 + d_0. `nan_payloads`: the GEMM level propagates NaN operands in an
    order (model.nan.gemm_nan: the later addend's first), so two splits added in the
    other order (d_1 + d_0) keep d_0's NaN where the one chain keeps d_1's: only the
    serial order merges. Any other plan is its own."""
    S = len(plan.splits)
    if S == 1 or not all(s.promoted and len(s.chains) == 1 for s in plan.splits):
        return plan
    if plan.rounded or plan.reduce_fmt != ReduceFormat.ACC or plan.c_in_partial:
        return plan
    if plan.seeds or plan.wide:
        return plan
    if (S > 2 or nan_payloads) and plan.combine != serial_tree(S):
        return plan
    chains = tuple(s.chains[0] for s in plan.splits)
    return Plan(
        plan.k_block,
        plan.n_blocks,
        (SplitPlan(chains, True),),
        0,
        plan.c_in_chain,
        operand_round=plan.operand_round,
        gap=plan.gap,
        gaps=plan.gaps,
    )


@dataclass(frozen=True)
class TileGrid:
    """The output tiles of `batch` GEMMs of M x N in tile_m x tile_n tiles (edge tiles
    smaller), numbered as a stream-K kernel walks them (Schedule.raster), batch after
    batch."""

    batch: int
    M: int
    N: int
    tile_m: int
    tile_n: int
    raster: Raster = Raster.ALONG_N

    @property
    def tiles_m(self) -> int:
        return -(-self.M // self.tile_m)

    @property
    def tiles_n(self) -> int:
        return -(-self.N // self.tile_n)

    def __len__(self) -> int:
        return self.batch * self.tiles_m * self.tiles_n

    def coords(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(batch, tile row, tile column) of tile numbers `t` (int64 arrays)."""
        t = np.asarray(t, dtype=np.int64)
        per = self.tiles_m * self.tiles_n
        bi, r = np.divmod(t, per)
        if self.raster == Raster.ALONG_N:
            tm, tn = np.divmod(r, self.tiles_n)
        else:
            tn, tm = np.divmod(r, self.tiles_m)
        return bi, tm, tn


def stream_k_region(schedule: Schedule, n_tiles: int) -> tuple[int, int]:
    """The tiles [lo, hi) that share the stream-K iteration space (Schedule.sk_hybrid);
    the others are each summed whole by one worker."""
    G = schedule.stream_k
    assert G is not None
    full, rem = divmod(n_tiles, G)
    if schedule.sk_hybrid == SkHybrid.DP_SK:
        return full * G, n_tiles
    if schedule.sk_hybrid == SkHybrid.SK_DP:
        return 0, (rem + G if full else n_tiles)
    return 0, n_tiles


def worker_starts(total: int, G: int) -> list[int]:
    """Where each of G workers' contiguous ranges of `total` iterations starts: ranges
    as equal as integers allow, the first total mod G one iteration longer."""
    q, r = divmod(total, G)
    return [w * q + min(w, r) for w in range(G)]


def tile_parts(schedule: Schedule, n_tiles: int, iters: int) -> dict[Parts, list[int]]:
    """The tiles cut by the workers' ranges, by their cut: {parts: [tile numbers]}
    (`Parts` for each tile of the stream-K region whose k-iterations two or more
    workers share); every other tile is whole, ((0, iters),)."""
    lo, hi = stream_k_region(schedule, n_tiles)
    cuts: dict[int, set[int]] = {}
    for b in worker_starts((hi - lo) * iters, schedule.stream_k)[1:]:
        t, off = divmod(b, iters)
        if off:
            cuts.setdefault(lo + t, set()).add(off)
    out: dict[Parts, list[int]] = {}
    for t, offs in sorted(cuts.items()):
        ends = [0, *sorted(offs), iters]
        out.setdefault(tuple(zip(ends[:-1], ends[1:])), []).append(t)
    return out


def stream_k_groups(
    schedule: Schedule, K_padded: int, k_block: int, grid: TileGrid
) -> list[tuple[Plan, np.ndarray]]:
    """The plans of a stream-K schedule over the tiles of `grid`, each with the tile
    numbers that run it (int64, ascending): the whole-tile plan first (one chain, or
    promoted chains, over all of K) for every tile no worker boundary cuts, then one plan
    per distinct cut. Tiles with the same cut share a plan, so there are at most
    stream_k + 1 plans whatever the number of tiles."""
    iters = k_iterations(schedule, K_padded, k_block)
    n = len(grid)
    cut = tile_parts(schedule, n, iters)
    whole = np.ones(n, dtype=bool)
    groups = []
    for parts, tiles in cut.items():
        t = np.asarray(tiles, dtype=np.int64)
        whole[t] = False
        groups.append((make_plan(schedule, K_padded, k_block, parts), t))
    out = []
    if whole.any():
        plan = make_plan(schedule, K_padded, k_block, ((0, iters),))
        out.append((plan, np.flatnonzero(whole).astype(np.int64)))
    return out + groups
