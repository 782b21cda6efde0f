"""GEMM schedules as data: how a kernel chains an instruction along K, promotes, splits K,
combines the splits and rounds in its epilogue.

A `Schedule` is the GEMM-level companion of `ModelParams`: a frozen record whose every
field is range-checked like a variant parameter. Schedules are written
`NAME` or `NAME[field=value,...]`, where NAME is `serial` or a named schedule from the
repository-root folder schedules/*.toml (each citing its source).

Facts (PTX ISA; cuBLAS, cuBLASLt and CUTLASS documentation; DeepSeek-V3 report):
- chain: acc_0 = C or +0, acc_{j+1} = MMA(A block j, B block j, acc_j), the instruction's c
  being the running accumulator (PTX ISA, "Matrix multiply-accumulate": D = A*B + C);
- promotion: a fresh chain every `promote` K elements, its result added to an fp32
  accumulator by an IEEE fp32 round-to-nearest add (cuBLASLt without
  CUBLASLT_MATMUL_DESC_FAST_ACCUM; CUTLASS `mma_promotion_interval`, counted in
  instructions; DeepSeek-V3 technical report §3.3.2: every 128 elements, N_C = 128);
- split-K: S parts (contiguous k-tiles or interleaved k-tiles of width T), combined in
  fp32 serially or pairwise (cuBLASLt reduction schemes), or in any binary tree given as
  data (`combine`): a SIMD kernel's lanes (k mod L, interleaved 1-wide tiles) added by its
  horizontal reduction, a blocked or pairwise sum (contiguous tiles);
- epilogue (cuBLASLt, torch._scaled_mm): D = alpha*acc + beta*C as one fp32 FMA, then one
  round-to-nearest conversion to the output type; FP8 outputs saturate; beta = 0 does not
  read C (BLAS, cuBLAS, torch.addmm: NaN and Inf in C do not propagate); alpha = 0 does not
  read A and B, D = beta*C (reference BLAS xGEMM; element.Epilogue.of);
- SIMD dot kernels (OpenBLAS sdot, Xianyi et al.; torch's vectorised reductions): chains
  given as data (`chains`: the k-blocks of each accumulator lane, in order, whatever the
  layout), a lane that goes on from a sum of others (`seeds`: OpenBLAS's 64-wide loop
  folds its eight accumulators into four, which the 32-wide loop then continues), and a
  scalar tail summed in a C `double` (`wide`: `dot += y[i] * x[i]` from 0.0, each product
  rounded to fp32 first, then `dot += mydot`, one rounding to fp32 on return).

What every schedule computes is D = alpha*(A*B) + beta*C (BLAS, cuBLAS, torch.addmm).
C may join as the chain's acc_0 (an instruction's D = A*B + C) only where that is the
same sum: alpha = 1 and beta = 1. `Schedule.c_in_chain` is the one rule for where C joins.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
import sys
from dataclasses import dataclass, fields
from enum import Enum
from functools import cache
from typing import Any

from ..errors import UserError
from ..formats import Format
from ..spec.datadirs import data_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class KOrder(Enum):
    """Order in which a chain takes its k-blocks."""

    ASCENDING = "ascending"
    DESCENDING = "descending"


class SplitMode(Enum):
    """Which k-tiles each split of split-K owns."""

    CONTIGUOUS = "contiguous"  # split s owns tiles [s*q, (s+1)*q), q = ceil(tiles / S)
    INTERLEAVED = "interleaved"  # tile t belongs to split t mod S


class Reduce(Enum):
    """How the split partials are combined (each addition rounded to nearest)."""

    SERIAL = "serial"  # ((p0 + p1) + p2) + ...
    PAIRWISE = "pairwise"  # cuBLASLt's pairwise scheme (plan.combine_tree)
    TREE = "tree"  # halving tree: slot_i = p_i + p_{i+h}, h = ceil(n/2), repeated
    # (a warp's butterfly shuffle reduction x += shfl_xor(x, h) as lane 0 sees it)


class OperandRound(Enum):
    """How an fp32 operand becomes the instruction's narrower operand format (TF32:
    8 exponent and 10 mantissa bits in 32-bit storage) before the unit reads it."""

    TRUNCATE = "truncate"  # not converted: the unit reads the fp32 bits, its low 13 ignored
    RNE = "rne"  # rounded to nearest, ties to even (PTX cvt.rn.tf32.f32)
    RNA = "rna"  # rounded to nearest, ties away from zero (PTX cvt.rna.tf32.f32)


class Raster(Enum):
    """How a stream-K kernel numbers its output tiles (the order of the iteration space)."""

    ALONG_N = "along-n"  # t = (batch * tiles_m + tile_row) * tiles_n + tile_col
    ALONG_M = "along-m"  # t = (batch * tiles_n + tile_col) * tiles_m + tile_row


class SkHybrid(Enum):
    """Which output tiles of a stream-K kernel share the stream-K iteration space (the
    others are data-parallel: one worker sums the whole tile, one chain)."""

    NONE = "none"  # every tile (basic stream-K)
    DP_SK = "dp-sk"  # the first floor(tiles / G) * G tiles whole (full waves), the last
    # tiles mod G stream-K (data-parallel + one-tile stream-K)
    SK_DP = "sk-dp"  # the first (tiles mod G) + G tiles stream-K (all tiles when fewer than
    # G), the rest whole (two-tile stream-K + data-parallel)


class ReduceFormat(Enum):
    """The format every addition of the split-K combination rounds to."""

    ACC = "acc"  # the accumulator format: fp32 (fp64 for an fp64 GEMM)
    OUT = "out"  # the output type, each sum rounded once (a native fp16/bf16 add)
    ACC_OUT = "acc-out"  # each sum rounded to fp32, then to the output type (an fp32
    # epilogue adding a partial to the output it reads back: in-place serial split-K)


class PartialRound(Enum):
    """Which split partials are rounded to the output type before they are combined."""

    NONE = "none"  # every partial joins in the accumulator (or chain) format
    ALL = "all"  # every partial stored in the output type (a workspace of the output type)
    FIRST = "first"  # the partial that starts the sum (the first leaf of the combination):
    # an in-place serial split-K writes it to the output first, later ones add into it


CombineTree = int | tuple["CombineTree", "CombineTree"]
"""An explicit combination of split partials: a split index, or (left, right), the fp32
sum left + right (the same shape as plan.Tree)."""

Chains = tuple[tuple[int, ...], ...]
"""Explicit chains: the k-block indices of each, in the order the chain takes them."""

Seeds = tuple[tuple[int, CombineTree], ...]
"""(split s, tree t): split s's chain starts from the sum t of other partials, not +0."""


def parse_chains(text: str) -> Chains:
    """`0..6/2&7|1..5/2` -> ((0, 2, 4, 6, 7), (1, 3, 5)): chains separated by `|`, each
    pieces joined by `&`, a piece `i`, `i..j` or `i..j/step` (j included). UserError
    naming what is wrong."""
    out = []
    for chain in text.split("|"):
        blocks: list[int] = []
        for piece in chain.split("&"):
            m = re.fullmatch(r"\s*(\d+)(?:\.\.(\d+)(?:/(\d+))?)?\s*", piece)
            if not m:
                raise UserError(f"chains={text!r}: {piece.strip()!r} is not i, i..j or i..j/step")
            lo = int(m.group(1))
            hi = int(m.group(2)) if m.group(2) else lo
            step = int(m.group(3)) if m.group(3) else 1
            if hi < lo or step < 1 or (hi - lo) % step:
                raise UserError(
                    f"chains={text!r}: {piece.strip()!r} is not a run lo..hi/step with hi "
                    "reached from lo"
                )
            blocks += range(lo, hi + 1, step)
        out.append(tuple(blocks))
    return tuple(out)


def chains_text(chains: Chains) -> str:
    """The chains written as parse_chains reads them (runs of one step compressed)."""
    parts = []
    for c in chains:
        pieces, i = [], 0
        while i < len(c):
            j = i + 1
            step = c[j] - c[i] if j < len(c) else 1
            while step > 0 and j < len(c) and c[j] - c[j - 1] == step:
                j += 1
            if j - i >= 3:
                pieces.append(f"{c[i]}..{c[j - 1]}" + (f"/{step}" if step != 1 else ""))
                i = j
            else:
                pieces.append(str(c[i]))
                i += 1
        parts.append("&".join(pieces))
    return "|".join(parts)


def parse_seeds(text: str) -> Seeds:
    """`2<0+1|3<2` -> ((2, (0, 1)), (3, 2)): split s's chain starts from the sum t."""
    out = []
    for item in text.split("|"):
        if "<" not in item:
            raise UserError(f"seeds={text!r}: {item.strip()!r} is not SPLIT<COMBINATION")
        s, t = item.split("<", 1)
        if not s.strip().isdigit():
            raise UserError(f"seeds={text!r}: {s.strip()!r} is not a split index")
        out.append((int(s), parse_combine(t)))
    return tuple(out)


def seeds_text(seeds: Seeds) -> str:
    return "|".join(f"{s}<{combine_text(t)}" for s, t in seeds)


def parse_combine(text: str) -> CombineTree:
    """`0+4+(1+5)` -> ((0, 4), (1, 5)): split indices added with `+`, left to right,
    parentheses grouping. UserError naming what is wrong."""
    toks = re.findall(r"\d+|[()+]|\S", text)
    pos = 0

    def atom() -> CombineTree:
        nonlocal pos
        if pos >= len(toks):
            raise UserError(f"combine={text!r}: ends early; expected a split index or (")
        t = toks[pos]
        pos += 1
        if t == "(":
            inner = expr()
            if pos >= len(toks) or toks[pos] != ")":
                raise UserError(f"combine={text!r}: a ( is not closed")
            pos += 1
            return inner
        if t.isdigit():
            return int(t)
        raise UserError(f"combine={text!r}: {t!r} is not a split index, +, ( or )")

    def expr() -> CombineTree:
        nonlocal pos
        left = atom()
        while pos < len(toks) and toks[pos] == "+":
            pos += 1
            left = (left, atom())
        return left

    tree = expr()
    if pos != len(toks):
        raise UserError(f"combine={text!r}: unexpected {toks[pos]!r}")
    return tree


def serial_of(items: list[CombineTree]) -> CombineTree:
    """((x0 + x1) + x2) + ... of the given subtrees."""
    t = items[0]
    for x in items[1:]:
        t = (t, x)
    return t


def pairwise_of(items: list[CombineTree]) -> CombineTree:
    """cuBLASLt's pairwise combination of the given subtrees x_0..x_{n-1} (pairwise_tree)."""
    n = len(items)
    if n == 1:
        return items[0]
    h = -(-n // 2)
    slots = [(items[i], items[i + h]) if i + h < n - 1 else items[i] for i in range(h)]
    return serial_of([items[n - 1], *slots])


def halving_of(items: list[CombineTree], width: int | None = None) -> CombineTree:
    """The halving tree of the given subtrees: h = ceil(n/2), slot_i = x_i + x_{i+h}
    (x_i alone when i + h >= n), repeated on the slots until one is left. For n a power
    of two it is what lane 0 holds after a warp's butterfly reduction, x += shfl_xor(x,
    h) for h = n/2, ..., 1 (or shfl_down, lane 0 alike; CUDA C++ Programming Guide, warp
    shuffle functions).

    With `width` W (>= n), the tree of a warp of W lanes of which only lanes 0..n-1 hold
    a subtree: the halving steps are those of W slots, and a lane that holds nothing
    adds nothing (x + 0 = x), so slot_i = x_i + x_{i+h} only where both hold a value
    (a GEMV kernel whose K leaves some lanes of its warp without a k)."""
    slots: list[CombineTree | None] = list(items)
    if width is not None and width > len(slots):
        slots += [None] * (width - len(slots))
    while len(slots) > 1:
        n = len(slots)
        h = -(-n // 2)
        nxt: list[CombineTree | None] = []
        for i in range(h):
            x, y = slots[i], slots[i + h] if i + h < n else None
            nxt.append(x if y is None else y if x is None else (x, y))
        slots = nxt
    assert slots[0] is not None
    return slots[0]


def serial_tree(n: int) -> CombineTree:
    """((p0 + p1) + p2) + ... + p_{n-1}."""
    return serial_of(list(range(n)))


def pairwise_tree(n: int) -> CombineTree:
    """cuBLASLt's pairwise combination of n partials: h = ceil(n/2), slot_i = p_i +
    p_{i+h} if i + h < n - 1 else p_i, result (((p_{n-1} + slot_0) + slot_1) + ...) +
    slot_{h-1}; n = 3: (p2 + p0) + p1. One partial is itself."""
    return pairwise_of(list(range(n)))


def halving_tree(n: int) -> CombineTree:
    """The halving (butterfly) tree of n partials (halving_of)."""
    return halving_of(list(range(n)))


def reduce_tree(n: int, reduce: Reduce, warp: int | None = None) -> CombineTree:
    """The combination of n partials by `reduce`; with `warp` = W, first each group of W
    consecutive partials by the halving tree of W lanes (a warp's shuffle reduction; a
    last group of fewer partials leaves its other lanes empty, halving_of), then the
    ceil(n / W) group results by `reduce` (a block reduction across warps)."""
    of = {Reduce.SERIAL: serial_of, Reduce.PAIRWISE: pairwise_of, Reduce.TREE: halving_of}
    items: list[CombineTree] = list(range(n))
    if warp is not None:
        items = [halving_of(items[g : g + warp], warp) for g in range(0, n, warp)]
    return of[reduce](items)


def first_leaf(tree: CombineTree) -> int:
    """The partial that starts the combination: the leftmost leaf."""
    while not isinstance(tree, int):
        tree = tree[0]
    return tree


def combine_text(tree: CombineTree) -> str:
    """The tree written as parse_combine reads it (left operands of + unparenthesised)."""
    if isinstance(tree, int):
        return str(tree)
    right = combine_text(tree[1])
    if not isinstance(tree[1], int):
        right = f"({right})"
    return f"{combine_text(tree[0])}+{right}"


def combine_leaves(tree: CombineTree) -> list[int]:
    if isinstance(tree, int):
        return [tree]
    return combine_leaves(tree[0]) + combine_leaves(tree[1])


class EpilogueOp(Enum):
    """How alpha*acc + beta*C is formed in fp32."""

    FMA = "fma"  # one fused multiply-add: fma(alpha, acc, beta*C) (cuBLASLt)
    MUL_ADD = "mul-add"  # RN(RN(alpha*acc) + RN(beta*C))
    FMA_C = "fma-c"  # the accumulator scaled first, C fused: fma(beta, C, RN(alpha*acc))
    # (cuBLAS fp32 GEMMs whose split-K partials are combined by a separate reduction)


class AlphaOn(Enum):
    """Where alpha multiplies: the accumulator in the epilogue, or one operand before the
    products (each element RN(alpha*x) in the epilogue format, the epilogue then with
    alpha = 1: cuBLAS's fp32 GEMV and small-M kernels under torch.addmm)."""

    EPILOGUE = "epilogue"  # alpha*acc in the epilogue (cuBLASLt)
    A = "a"  # A's elements scaled first: sum_k RN(alpha*a_k)*b_k
    B = "b"  # B's elements scaled first: sum_k a_k*RN(alpha*b_k)


class CJoin(Enum):
    """Where C (a bias, broadcast over rows or columns) enters the computation."""

    CHAIN = "chain"  # as the first chain's acc_0, in the instruction's c format
    # (only with alpha = 1 and beta = 1: then alpha*(A*B) + beta*C = A*B + C)
    EPILOGUE = "epilogue"  # as beta*C in the fp32 epilogue, before the one rounding
    OUTPUT = "output"  # after it: D = RN_out(RN_out(alpha*acc) + RN(beta*C)), the sum in
    # fp32 (a separate elementwise add of a result already in the output type)
    PARTIAL = "partial"  # added in the accumulator format to the partial that starts the
    # split-K combination (alpha = 1), before the partials combine


OUT_FORMATS = frozenset(
    (Format.FP64, Format.FP32, Format.FP16, Format.BF16, Format.E4M3, Format.E5M2)
)
"""Formats a GEMM can write D in (cuBLASLt's D types for these inputs)."""


@dataclass(frozen=True)
class FieldRange:
    lo: int
    hi: int
    why: str


SCHEDULE_RANGES: dict[str, FieldRange] = {
    "promote": FieldRange(1, 1 << 20, "K elements per chain; DeepSeek-V3 and cuBLAS: 128"),
    "split_k": FieldRange(
        1,
        1024,
        "splits of K: cuBLASLt picks up to a few dozen; a block of threads "
        "reducing one output (GEMV, dot + block reduce) up to 1024, CUDA's block size",
    ),
    "split_tile": FieldRange(1, 4096, "k-tile width of split-K; cuBLASLt: 64 or 128"),
    "warp": FieldRange(
        2, 1024, "partials per halving-tree group (a warp: 32 lanes; the last may be short)"
    ),
    "wide": FieldRange(1, 1023, "partials summed in fp64 (sdot's scalar tail: K mod 32)"),
    "stream_k": FieldRange(
        1, 4096, "stream-K workers (CTAs), one per SM in a persistent kernel: 132 on an H100"
    ),
    "tile_m": FieldRange(1, 4096, "output tile rows of a stream-K kernel; CUTLASS: 64..256"),
    "tile_n": FieldRange(1, 4096, "output tile columns of a stream-K kernel; CUTLASS: 64..256"),
    "residue_tile": FieldRange(
        1, 4096, "k-tile width whose residue comes first (CUTLASS 2.x mainloops: 32..128)"
    ),
    "split_range": FieldRange(
        1, 4096, "split-K ranges a multiple of this many elements (CUTLASS 2.x kAlignK: 4 for fp32)"
    ),
}
"""Allowed range of every integer schedule field."""

SCALAR_LIMIT = 3.4028234663852886e38
"""alpha and beta are fp32 scalars in the epilogue: finite and at most FLT_MAX."""


@dataclass(frozen=True)
class Schedule:
    """How a kernel computes every output element of D = alpha*A*B + beta*C.

    order: k-block order of each chain; promote: K elements per chain before its result is
    added into an fp32 accumulator (None: one chain per split); split_k (S), split and
    split_tile (T): the split-K layout; reduce: how the S partials combine, or combine: the
    tree they combine in, as data (each split index once; written `0+2+(1+3)`); kblocks: K
    cut into consecutive k-blocks of these sizes first (written `320+320+192+192`: OpenBLAS
    sgemm's GEMM_Q blocking), each cut by the split layout into split_k partials, partial
    i*S + s of block i, all combined by reduce or combine; chains: the chains given as data instead (each a
    partial; a hypothesis for one K); seeds: chains that start from a sum of other
    partials instead of +0 (those partials then in no other sum); wide: the last `wide`
    partials summed in fp64 from +0, in order, the combination of the others added to that
    sum in fp64 and the result rounded once to the accumulator format (a scalar tail in a C
    double); warp: the partials first
    combined in groups of this many by the halving tree (a warp shuffle reduction), the
    group results then by reduce; reduce_fmt: the format each combining addition rounds
    to (fp32, or the output type); round_partials: which partials are rounded to the
    output type before they combine; operand_round: how fp32 operands become the
    instruction's TF32 operands; stream_k (G), tile_m, tile_n, raster, sk_hybrid: a
    stream-K kernel (plan.stream_k_groups): the output tiles (tile_m x tile_n, numbered
    by raster) times their k-iterations (split_tile wide) cut into G near-equal
    contiguous ranges, one per worker, each tile summed as one chain per range that
    meets it, the parts combined by reduce (the fix-up; serial: in worker order), so the
    plan of an output element depends on its tile; c_join: where C enters (see `c_in_chain` and `c_at`);
    alpha, beta, epilogue, out, saturate: the epilogue (beta None: 1; out None: the
    instruction's d format; saturate None: FP8 outputs saturate, others do not);
    alpha_on: alpha applied to an operand before the products instead (AlphaOn);
    residue_tile (T): how K is laid out before it is cut into k-blocks (None: zero-padded
    at its end; T: a CUTLASS 2.x mainloop's residue first, plan.k_layout: the first
    k-tile holds the K mod T leading elements, zero-filled to T, the full T-wide k-tiles
    follow, so the instruction's k-groups start at K mod T); split_range (A): split-K
    over element ranges of the unpadded K instead of k-tiles (CUTLASS 2.x split-K,
    plan.k_layout): split s owns elements [s*q, min((s+1)*q, K)), q = A*ceil(ceil(K/A)/S)
    (CUTLASS's gemm_k_size, A its kAlignK), each range laid out on its own (with
    residue_tile its own partial k-tile first, else zero-padded at its end).

    Every schedule computes D = alpha*(A*B) + beta*C as BLAS, cuBLAS and torch.addmm
    define it. C in the chain (an instruction's D = A*B + C, then alpha times that) is
    that sum only when alpha = 1 and beta = 1, so c_join=chain with another alpha or beta
    is refused, and the default puts C in the epilogue whenever alpha or beta is not 1."""

    order: KOrder = KOrder.ASCENDING
    promote: int | None = None
    split_k: int = 1
    split: SplitMode = SplitMode.CONTIGUOUS
    split_tile: int = 128
    reduce: Reduce = Reduce.SERIAL
    combine: CombineTree | None = None
    kblocks: tuple[int, ...] | None = None
    chains: Chains | None = None
    seeds: Seeds | None = None
    wide: int | None = None
    warp: int | None = None
    reduce_fmt: ReduceFormat = ReduceFormat.ACC
    round_partials: PartialRound = PartialRound.NONE
    operand_round: OperandRound = OperandRound.TRUNCATE
    stream_k: int | None = None
    tile_m: int = 128
    tile_n: int = 128
    raster: Raster = Raster.ALONG_N
    sk_hybrid: SkHybrid = SkHybrid.NONE
    c_join: CJoin | None = None
    alpha: float = 1.0
    beta: float | None = None
    epilogue: EpilogueOp = EpilogueOp.FMA
    alpha_on: AlphaOn = AlphaOn.EPILOGUE
    out: Format | None = None
    saturate: bool | None = None
    residue_tile: int | None = None
    split_range: int | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            check_field(f.name, getattr(self, f.name))
        if self.residue_tile is not None and (self.chains is not None or self.stream_k):
            raise UserError(
                "residue_tile lays out K before the chains are cut; chains= and stream_k "
                "give their own k-blocks; allowed: residue_tile=none with them"
            )
        if self.split_range is not None:
            self._check_split_range()
        if self.stream_k is None:
            base = Schedule.__dataclass_fields__
            for name in STREAM_K_FIELDS[1:]:
                if getattr(self, name) != base[name].default:
                    raise UserError(
                        f"{name}={_show(getattr(self, name))} describes a stream-K kernel; "
                        "allowed without stream_k: the default "
                        f"{_show(base[name].default)} (or give stream_k=WORKERS)"
                    )
        else:
            bad = [
                f"{name}={_show(getattr(self, name))}"
                for name, ok in (
                    ("split_k", self.split_k == 1),
                    ("kblocks", self.kblocks is None),
                    ("combine", self.combine is None),
                    ("warp", self.warp is None),
                    ("reduce_fmt", self.reduce_fmt == ReduceFormat.ACC),
                    ("round_partials", self.round_partials == PartialRound.NONE),
                    ("c_join", self.c_join != CJoin.CHAIN),
                )
                if not ok
            ]
            if bad:
                raise UserError(
                    f"stream_k={self.stream_k} cuts K per output tile itself; {', '.join(bad)} "
                    "cannot be combined with it; allowed: split_k=1, kblocks, combine and "
                    "warp none, reduce_fmt=acc, round_partials=none, c_join not chain"
                )
        n = self.partials
        self._check_lanes(n)
        if self.seeds is not None or self.wide is not None:
            pass
        elif self.combine is not None:
            got = sorted(combine_leaves(self.combine))
            if got != list(range(n)):
                raise UserError(
                    f"combine={combine_text(self.combine)}: it must add each split index "
                    f"0..{n - 1} once (split_k={self.split_k}"
                    + (f" in each of {len(self.kblocks)} kblocks)" if self.kblocks else ")")
                )
            if self.reduce != Reduce.SERIAL:
                raise UserError("combine= and reduce= both say how the splits combine; give one")
            if self.combine == serial_tree(n):  # one schedule, one text
                object.__setattr__(self, "combine", None)
            elif self.combine == pairwise_tree(n):
                object.__setattr__(self, "combine", None)
                object.__setattr__(self, "reduce", Reduce.PAIRWISE)
            elif self.combine == halving_tree(n):
                object.__setattr__(self, "combine", None)
                object.__setattr__(self, "reduce", Reduce.TREE)
        if (
            self.warp is not None
            and self.warp >= self.top
            and self.combine is None
            and reduce_tree(self.top, self.reduce, self.warp) == halving_tree(self.top)
        ):
            object.__setattr__(self, "warp", None)  # one group: the halving tree itself
            object.__setattr__(self, "reduce", Reduce.TREE)
        if self.warp is not None:
            if self.combine is not None:
                raise UserError("combine= and warp= both say how the splits combine; give one")
            if (n % self.warp or self.warp > n) and self.warp & (self.warp - 1):
                raise UserError(
                    f"warp={self.warp} does not divide the {n} partials into groups; allowed: "
                    f"a divisor of {n} (split_k"
                    + (f" times {len(self.kblocks)} kblocks)" if self.kblocks else ")")
                    + ", or a power of two (a warp whose last lanes hold no partial)"
                )
        if n == 1 and self.reduce_fmt != ReduceFormat.ACC:
            raise UserError(
                f"reduce_fmt={self.reduce_fmt.value} needs partials to combine (split_k > 1 "
                "or kblocks); allowed with one partial: reduce_fmt=acc"
            )
        if n == 1 and self.round_partials != PartialRound.NONE:
            raise UserError(
                f"round_partials={self.round_partials.value} needs partials to combine "
                "(split_k > 1 or kblocks); allowed with one partial: round_partials=none"
            )
        if self.c_join == CJoin.PARTIAL and self.alpha != 1.0:
            raise UserError(
                f"c_join=partial adds beta*C before alpha scales the sum; alpha="
                f"{_show(float(self.alpha))} would scale C too; allowed: alpha=1, else "
                "c_join=epilogue or output"
            )
        if self.c_join == CJoin.CHAIN and (n > 1 or self.promote is not None):
            raise UserError(
                "c_join=chain needs one chain (split_k=1, promote=none); allowed: epilogue"
            )
        if self.c_join == CJoin.CHAIN and not self.unit_scalars:
            raise UserError(
                f"c_join=chain computes A*B + C, not alpha*(A*B) + beta*C with "
                f"alpha={_show(float(self.alpha))}, beta={_show(self.c_beta)}; allowed: "
                "c_join=chain with alpha=1 and beta=1, else c_join=epilogue"
            )

    def _check_split_range(self) -> None:
        """UserError unless the schedule is one whose split-K ranges split_range cuts:
        split_k >= 2, one chain per range, no other split layout."""
        base = Schedule.__dataclass_fields__
        clash = [
            f"{name}={_show_field(name, getattr(self, name))}"
            for name, ok in (
                ("split_k", self.split_k >= 2),
                ("split", self.split == base["split"].default),
                ("split_tile", self.split_tile == base["split_tile"].default),
                ("kblocks", self.kblocks is None),
                ("chains", self.chains is None),
                ("promote", self.promote is None),
                ("order", self.order == KOrder.ASCENDING),
                ("stream_k", self.stream_k is None),
            )
            if not ok
        ]
        if clash:
            raise UserError(
                f"split_range={self.split_range} cuts K into split ranges itself; "
                f"{', '.join(clash)} cannot be combined with it; allowed: split_k >= 2, "
                "split, split_tile, order at their defaults, kblocks, chains, promote and "
                "stream_k none"
            )

    def _check_lanes(self, n: int) -> None:
        """UserError unless chains, seeds and wide fit the rest of the schedule and
        every partial is summed exactly once."""
        if self.chains is not None:
            clash = [
                f"{name}={_show(getattr(self, name))}"
                for name, ok in (
                    ("split_k", self.split_k == 1),
                    ("kblocks", self.kblocks is None),
                    ("promote", self.promote is None),
                    ("order", self.order == KOrder.ASCENDING),
                    ("stream_k", self.stream_k is None),
                )
                if not ok
            ]
            if clash:
                raise UserError(
                    f"chains= gives every chain itself; {', '.join(clash)} cannot be "
                    "combined with it; allowed: split_k=1, kblocks, promote and stream_k "
                    "none, order=ascending"
                )
            if n > SCHEDULE_RANGES["split_k"].hi:
                raise UserError(
                    f"chains= gives {n} chains; allowed: at most {SCHEDULE_RANGES['split_k'].hi}"
                )
            flat = [b for c in self.chains for b in c]
            if not all(self.chains) or len(set(flat)) != len(flat):
                raise UserError(
                    "chains=: every chain takes at least one k-block and no k-block is taken twice"
                )
        if self.seeds is None and self.wide is None:
            return
        other = [
            f"{name}={_show(getattr(self, name))}"
            for name, ok in (
                ("warp", self.warp is None),
                ("reduce_fmt", self.reduce_fmt == ReduceFormat.ACC),
                ("round_partials", self.round_partials == PartialRound.NONE),
                ("c_join", self.c_join not in (CJoin.CHAIN, CJoin.PARTIAL)),
                ("stream_k", self.stream_k is None),
            )
            if not ok
        ]
        if other:
            raise UserError(
                f"seeds= and wide= say where partials go; {', '.join(other)} cannot be "
                "combined with them; allowed: warp none, reduce_fmt=acc, round_partials="
                "none, c_join epilogue or output, stream_k none"
            )
        w = self.wide or 0
        if w >= n:
            raise UserError(
                f"wide={w}: the last {w} partials in fp64 leave none of the {n} to combine; "
                f"allowed: wide below {n}"
            )
        if self.seeds is not None and self.combine is None:
            raise UserError("seeds= needs combine= (which partials the top sum adds)")
        top = combine_leaves(self.combine) if self.combine is not None else list(range(n - w))
        seeded = [s for s, _ in self.seeds or ()]
        used = top + [x for _, t in self.seeds or () for x in combine_leaves(t)]
        if sorted(used) != list(range(n - w)) or len(set(seeded)) != len(seeded):
            raise UserError(
                f"combine= and seeds= must add each partial 0..{n - w - 1} once and seed "
                f"each split at most once (the last {w} partials are wide=)"
            )
        if any(s >= n - w for s in seeded):
            raise UserError(f"seeds=: a wide partial (from {n - w} on) is not seeded")
        below = dict(self.seeds or ())

        def reaches(s: int, seen: frozenset[int]) -> None:
            if s in seen:
                raise UserError(f"seeds=: split {s} starts from a sum that holds itself")
            for x in combine_leaves(below[s]) if s in below else ():
                reaches(x, seen | {s})

        for s in seeded:
            reaches(s, frozenset())

    @property
    def top(self) -> int:
        """The partials the combination adds: all but the `wide` last ones."""
        return self.partials - (self.wide or 0)

    def with_(self, **changes: Any) -> Schedule:
        """A copy with `changes` (range-checked); numpy scalars are taken as the Python
        numbers they hold (np.float32(0.5) as alpha)."""
        return dataclasses.replace(self, **{k: _plain(v) for k, v in changes.items()})

    @property
    def partials(self) -> int:
        """How many partials the reduce or combine tree adds: split_k in each k-block
        of `kblocks` (one k-block without it), or the chains given."""
        if self.chains is not None:
            return len(self.chains)
        return self.split_k * (len(self.kblocks) if self.kblocks else 1)

    @property
    def c_beta(self) -> float:
        """The factor of C: beta, 1 when unset (BLAS, cuBLAS and torch default)."""
        return 1.0 if self.beta is None else float(self.beta)

    @property
    def unit_scalars(self) -> bool:
        """Whether alpha = 1 and beta = 1 (the only case where C may join the chain)."""
        return self.alpha == 1.0 and self.c_beta == 1.0

    @property
    def c_in_chain(self) -> bool:
        """Where C joins, the one rule every interpreter follows: True for the first
        chain's acc_0 (in the instruction's c format), False for beta*C in the epilogue.
        c_join=chain or epilogue says so; unset, C joins the chain when there is one
        chain (no split, no promotion) and alpha = beta = 1, else the epilogue (the
        chain would compute alpha*(A*B + C)); a stream-K kernel, whose tiles are one
        chain or several, the epilogue."""
        if self.c_join is not None:
            return self.c_join == CJoin.CHAIN
        return (
            self.partials == 1
            and self.promote is None
            and self.stream_k is None
            and self.unit_scalars
        )

    @property
    def c_at(self) -> CJoin:
        """Where C joins, resolved: CHAIN when `c_in_chain`, else c_join (EPILOGUE when
        unset)."""
        if self.c_in_chain:
            return CJoin.CHAIN
        return self.c_join or CJoin.EPILOGUE

    @property
    def tree(self) -> CombineTree:
        """How the partials combine: combine when given, else reduce (and warp)."""
        if self.combine is not None:
            return self.combine
        return reduce_tree(self.top, self.reduce, self.warp)

    def saturates(self, out: Format) -> bool:
        """Whether the final conversion to `out` saturates (FP8 by default)."""
        if self.saturate is not None:
            return self.saturate
        return out.spec.storage == 8

    def text(self) -> str:
        """The schedule written as `serial[field=value,...]` (fields that differ from
        the defaults), parseable by `parse_schedule`."""
        base = Schedule()
        items = [
            f"{f.name}={_show_field(f.name, getattr(self, f.name))}"
            for f in fields(self)
            if getattr(self, f.name) != getattr(base, f.name)
        ]
        return "serial" + (f"[{','.join(items)}]" if items else "")


def _show_field(name: str, v: Any) -> str:
    """Field `name`'s value as parse_field reads it."""
    if v is not None and name == "chains":
        return chains_text(v)
    if v is not None and name == "seeds":
        return seeds_text(v)
    return _show(v)


def _show(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, tuple) and all(isinstance(x, int) for x in v) and len(v) != 2:
        return "+".join(map(str, v))  # kblocks (a combine tree is a pair)
    if isinstance(v, tuple):
        return combine_text(v)
    if isinstance(v, Enum):
        return v.spec.name if isinstance(v, Format) else v.value
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


_ENUMS: dict[str, type[Enum]] = {
    "order": KOrder,
    "split": SplitMode,
    "reduce": Reduce,
    "epilogue": EpilogueOp,
    "alpha_on": AlphaOn,
    "c_join": CJoin,
    "reduce_fmt": ReduceFormat,
    "round_partials": PartialRound,
    "operand_round": OperandRound,
    "raster": Raster,
    "sk_hybrid": SkHybrid,
}
_OPTIONAL = {
    "promote",
    "combine",
    "kblocks",
    "chains",
    "seeds",
    "wide",
    "warp",
    "stream_k",
    "c_join",
    "beta",
    "out",
    "saturate",
    "residue_tile",
    "split_range",
}
STREAM_K_FIELDS = ("stream_k", "tile_m", "tile_n", "raster", "sk_hybrid")
"""The fields of a stream-K kernel: stream_k, and those that mean something only with it."""
_FLOATS = {"alpha", "beta"}
_BOOLS = {"saturate"}


def field_names() -> list[str]:
    return [f.name for f in fields(Schedule)]


def describe_field(name: str) -> str:
    """The allowed values of schedule field `name`, in words."""
    opt = " or none" if name in _OPTIONAL else ""
    if name in SCHEDULE_RANGES:
        r = SCHEDULE_RANGES[name]
        return f"{r.lo}..{r.hi}{opt}"
    if name in _ENUMS:
        return "one of " + ", ".join(m.value for m in _ENUMS[name]) + (", none" if opt else "")
    if name in _FLOATS:
        return f"a finite number of magnitude at most {SCALAR_LIMIT:.7g}{opt}"
    if name in _BOOLS:
        return "true or false" + opt
    if name == "out":
        return "one of " + ", ".join(sorted(f.spec.name for f in OUT_FORMATS)) + ", none"
    if name == "combine":
        return "split indices added with + and grouped by ( ), each once (e.g. 0+2+(1+3)), or none"
    if name == "kblocks":
        return "k-block sizes joined by + (e.g. 320+320+192+192), at least 2, or none"
    if name == "chains":
        return "chains of k-blocks joined by |, each runs i..j/step joined by & (e.g. 0..6/2|1..7/2), or none"
    if name == "seeds":
        return "SPLIT<COMBINATION joined by | (e.g. 2<0+1), or none"
    return name


def _plain(value: Any) -> Any:
    """A numpy integer or float scalar as the Python int or float it holds; any other
    value unchanged (bools and enums included)."""
    if isinstance(value, (bool, int, float)) or not isinstance(value, numbers.Real):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    return float(value)


def check_field(name: str, value: Any) -> None:
    """UserError naming `name` and its allowed values when `value` is outside them."""
    if value is None:
        if name not in _OPTIONAL:
            raise UserError(f"{name}: none is not allowed; allowed: {describe_field(name)}")
        return
    bad = False
    if name in SCHEDULE_RANGES:
        r = SCHEDULE_RANGES[name]
        bad = isinstance(value, bool) or not isinstance(value, int) or not r.lo <= value <= r.hi
    elif name in _ENUMS:
        bad = not isinstance(value, _ENUMS[name])
    elif name in _FLOATS:
        bad = (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or abs(value) > SCALAR_LIMIT
        )
    elif name in _BOOLS:
        bad = not isinstance(value, bool)
    elif name == "out":
        bad = value not in OUT_FORMATS
    elif name == "combine":
        bad = not _is_combine(value)
    elif name == "kblocks":
        bad = not (
            isinstance(value, tuple)
            and len(value) >= 2
            and all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in value)
        )
    elif name == "chains":
        bad = not (
            isinstance(value, tuple)
            and len(value) >= 1
            and all(
                isinstance(c, tuple)
                and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in c)
                for c in value
            )
        )
    elif name == "seeds":
        bad = not (
            isinstance(value, tuple)
            and len(value) >= 1
            and all(
                isinstance(x, tuple)
                and len(x) == 2
                and _is_combine(x[0])
                and isinstance(x[0], int)
                and _is_combine(x[1])
                for x in value
            )
        )
    if bad:
        shown = _show_field(name, value) if not isinstance(value, str) else repr(value)
        raise UserError(f"{name}={shown} is out of range; allowed: {describe_field(name)}")


def _is_combine(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0 <= value < SCHEDULE_RANGES["split_k"].hi
    return isinstance(value, tuple) and len(value) == 2 and all(_is_combine(v) for v in value)


def parse_field(name: str, text: str) -> Any:
    """Parse `name=text` into the field's type and range-check it (UserError if bad)."""
    if name not in field_names():
        raise UserError(f"unknown schedule field {name!r}; known: {', '.join(field_names())}")
    t = text.strip()
    low = t.lower()
    value: Any
    if name in _OPTIONAL and low == "none":
        value = None
    elif name in SCHEDULE_RANGES:
        try:
            value = int(t, 0)
        except ValueError:
            raise UserError(
                f"{name}: {text!r} is not an integer; allowed: {describe_field(name)}"
            ) from None
    elif name in _ENUMS:
        value = next((m for m in _ENUMS[name] if m.value == low), None)
        if value is None:
            raise UserError(f"{name}: {text!r} is not {describe_field(name)}")
    elif name in _FLOATS:
        try:
            value = float(t)
        except ValueError:
            raise UserError(
                f"{name}: {text!r} is not a number; allowed: {describe_field(name)}"
            ) from None
    elif name in _BOOLS:
        if low not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
            raise UserError(f"{name}: {text!r} is not true/false")
        value = low in ("true", "1", "yes", "on")
    elif name == "combine":
        value = parse_combine(t)
    elif name == "kblocks":
        try:
            value = tuple(int(x, 0) for x in t.split("+"))
        except ValueError:
            raise UserError(f"kblocks: {text!r} is not {describe_field('kblocks')}") from None
    elif name == "chains":
        value = parse_chains(t)
    elif name == "seeds":
        value = parse_seeds(t)
    else:  # out
        try:
            value = Format.parse(t)
        except ValueError:
            raise UserError(f"out: {text!r} is not {describe_field('out')}") from None
    check_field(name, value)
    return value


# --- named schedules --------------------------------------------------------------------


@dataclass(frozen=True)
class NamedSchedule:
    """A schedule from schedules/NAME.toml and the source it cites."""

    name: str
    schedule: Schedule
    source: str
    description: str = ""


def _from_table(name: str, table: dict) -> Schedule:
    values: dict[str, Any] = {}
    for k, v in table.items():
        text = "none" if v == "none" else str(v).lower() if isinstance(v, bool) else str(v)
        values[k] = parse_field(k, text)
    try:
        return Schedule(**values)
    except UserError as e:
        raise UserError(f"schedule {name!r}: {e}") from None


@cache
def named_schedules() -> dict[str, NamedSchedule]:
    """Every named schedule of schedules/*.toml (files with a [schedule] table), plus the
    built-in `serial`: one chain over all of K, k-blocks ascending, no split."""
    out = {
        "serial": NamedSchedule(
            "serial",
            Schedule(),
            "PTX ISA 'Matrix multiply-accumulate operation': D = A*B + C, a chain feeds D "
            "back as C",
            "one chain over all of K, k-blocks ascending, no split",
        )
    }
    folder = data_dir("schedules")
    for path in sorted(folder.glob("*.toml")):
        data = tomllib.loads(path.read_text())
        if "schedule" not in data:
            continue
        name = data.get("name", path.stem)
        out[name] = NamedSchedule(
            name,
            _from_table(name, data["schedule"]),
            data.get("source", ""),
            data.get("description", ""),
        )
    return out


_SCHED_RE = re.compile(r"^\s*([A-Za-z0-9_\-]+)\s*(?:\[(.*)\])?\s*$")


def parse_schedule(text: str) -> Schedule:
    """`NAME` or `NAME[field=value,...]` -> Schedule (UserError naming the problem)."""
    m = _SCHED_RE.match(text or "")
    if not m:
        raise UserError(f"malformed schedule {text!r}; expected NAME or NAME[field=value,...]")
    name, body = m.group(1), m.group(2)
    known = named_schedules()
    if name not in known:
        raise UserError(f"unknown schedule {name!r}; known: {', '.join(known)}")
    sched = known[name].schedule
    if body is None:
        return sched
    if not body.strip():
        raise UserError(f"malformed schedule {text!r}: empty field list")
    changes: dict[str, Any] = {}
    for item in body.split(","):
        if "=" not in item:
            raise UserError(f"malformed schedule {text!r}: {item.strip()!r} is not field=value")
        k, v = (s.strip() for s in item.split("=", 1))
        if k in changes:
            raise UserError(f"schedule {text!r}: {k} is given twice; give each field once")
        changes[k] = parse_field(k, v)
    try:
        return sched.with_(**changes)
    except UserError as e:
        raise UserError(f"schedule {text!r}: {e}") from None
