"""The k order of cuBLAS's sm80-style fp16/bf16 kernels (N or K not a multiple of 8:
cuBLASLt algo 23 and 24), as schedule data from the cuBLASLt heuristic's fields.

These kernels are CUTLASS 2.x-style mainloops: the CTA walks K in k-tiles of the
stage's depth (cuBLASLt's STAGES_ID: 16xN, 32xN, 64xN, 128xN, cublasLtMatmulStages_t)
and loads the partial k-tile first (K mod tile elements, the rest zero-filled by
predicated loads), then the full tiles; inside a k-tile the warps run mma.sync steps
of 16 (m16n8k16) or, for algo 24 without a stages configuration (STAGES_ID 0), of 8
(m16n8k8) with a 32-deep k-tile. So the instruction's k-groups start at K mod tile,
not at 0 (schedule field residue_tile), and algo 24 without stages fuses 8 products per
step, not 16. On `cancel` inputs (one element in eight at 2^BIG) the groups decide which
small products are lost (results/cublas/half.md).

`KernelOrder.of(fields)` names a heuristic answer's order; `majority` the order most
shapes of a set have; `box_orders` a tree of orders inside one box of half_tree's split-count tree (what a
decision-table rule, which reads only the shape, carries); `KernelOrder.apply(recipe)`
writes an order into a recipe.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

import numpy as np

from ..gemm.library_rules import with_fields
from .cublaslt_sweep import FIELD_ORDER
from .library_fit import fit_calls, recording_dir
from .library_tree import KERNEL_FEATURES, _features, grow
from .sweep_store import sweep_records

STAGE_DEPTHS: dict[int, int] = {i: 16 << ((i - 1) // 6) for i in range(1, 25)}
"""k-tile depth of cuBLASLt's STAGES_ID 1..24 (16x1..16x6, 32x1.., 64x1.., 128x1..128x6)."""

CTA_ALGOS = (23, 24)
"""cuBLASLt algo ids of the sm80-style tensor-core kernels these orders describe."""

MMA_K8 = "m16n8k8"
"""Instruction of algo 24 without a stages configuration (8 products per fused step)."""
MMA_K8_TILE = 32
"""Its k-tile depth (the residue tile that fits the recorded calls)."""

K8_VARIANT = "hopper[K=8,L=8,carry_bits=4]"
"""Hopper's unit with m16n8k8's group (the parameters in which m16n8k8.f32.f16.f16.f32
and m16n8k8.f32.bf16.bf16.f32 differ from the wgmma.m64n8k16 default; a test checks it)."""


@dataclass(frozen=True, order=True)
class KernelOrder:
    """How a kernel takes K: the instruction's products per fused step (8 or 16) and the
    k-tile depth whose residue comes first."""

    group: int
    tile: int

    @staticmethod
    def of(fields: dict) -> KernelOrder | None:
        """The order of a cuBLASLt heuristic answer (algo_id, stages_id); None where it is
        not one of the sm80-style kernels (algo 11, the aligned wgmma kernels, ...)."""
        algo, stages = int(fields["algo_id"]), int(fields["stages_id"])
        if algo not in CTA_ALGOS:
            return None
        if algo == 24 and stages == 0:
            return KernelOrder(8, MMA_K8_TILE)
        if stages in STAGE_DEPTHS:
            return KernelOrder(16, STAGE_DEPTHS[stages])
        return None

    def apply(self, recipe: str) -> str:
        """`recipe` (a `hopper/serial[...]` GEMM hypothesis) run in this order."""
        out = with_fields(recipe, f"residue_tile={self.tile}")
        if self.group == 8:
            arch, rest = out.split("/", 1)
            assert arch == "hopper", recipe
            out = f"{K8_VARIANT}/{rest}"
        return out

    def text(self) -> str:
        return f"k{self.group} tile {self.tile}"


@cache
def sweep_orders(gpu: str, cls: str) -> dict[tuple[int, int, int], KernelOrder | None]:
    """{shape: order} of every sweep answer with M, N >= 2 of `gpu` for `cls`."""
    out: dict[tuple[int, int, int], KernelOrder | None] = {}
    for r in sweep_records(recording_dir(gpu, 0).parent, [cls]):
        if "f" in r and min(r["m"], r["n"]) >= 2:
            out[(r["m"], r["n"], r["k"])] = KernelOrder.of(dict(zip(FIELD_ORDER, r["f"])))
    return out


def majority(orders: Iterable[KernelOrder | None]) -> tuple[KernelOrder | None, int, int]:
    """(the most common order, its count, the count of all): None where most are not
    sm80-style kernels; ties go to the smaller order (the same answer every run)."""
    c = Counter(orders)
    if not c:
        return None, 0, 0
    best = min(c, key=lambda o: (-c[o], (0, 0) if o is None else (o.group, o.tile)))
    return best, c[best], sum(c.values())


def shape_orders(gpu: str, cls: str) -> dict[tuple[int, int, int], KernelOrder | None]:
    """{shape: order} of `cls` on `gpu`: the sweep's answers, then the fit calls' own
    heuristic fields (theirs win where both have the shape)."""
    out = dict(sweep_orders(gpu, cls))
    for c in fit_calls(gpu):
        if c.cls.name == cls and c.cublaslt is not None and min(c.m, c.n) >= 2:
            out[(c.m, c.n, c.k)] = KernelOrder.of(c.cublaslt)
    return out


ORDER_DEPTH = 0
"""Depth of the order tree grown inside one box of the split-count tree: 0, the box's
majority. On the first sweep 6 levels doubled the rules and gained no held-out H200
call; on the dense sweeps they give the matmul.bf16.rr1 table 6,204 rules (4,951) and
808 of the 867 held-out seed-3/4 random calls it decides (795): the next table build's
setting, once the profiles' held-out check confirms it."""


def box_orders(
    orders: dict[tuple[int, int, int], KernelOrder | None],
    shapes: list[tuple[int, int, int]],
    box: list,
    depth: int = ORDER_DEPTH,
    names: tuple[str, ...] = KERNEL_FEATURES,
    X: np.ndarray | None = None,
) -> list[tuple[list, KernelOrder | None, int, int]]:
    """[(sub-box, order, shapes of that order, shapes)]: the orders of `shapes` inside
    `box` ((lo, hi) of each feature of `names`, inclusive: a leaf of half_tree's tree) learnt as a
    classification tree of at most `depth` levels (library_tree.grow), its leaves cut to
    `box`; the sub-boxes tile `box`. One sub-box, majority(), without shapes inside.
    `X`: the features of `shapes` when the caller has them (one table asks for every
    leaf of a tree)."""
    if X is None:
        X = _features(np.array(shapes, dtype=np.int64), names[: len(box)])
    inside = np.ones(len(X), dtype=bool)
    for j, (lo, hi) in enumerate(box):
        inside &= (X[:, j] >= lo) & (X[:, j] <= hi)
    idx = np.flatnonzero(inside)
    got = [orders.get(shapes[i]) for i in idx]
    labels = sorted(set(got), key=lambda o: (0, 0) if o is None else (o.group, o.tile))
    if len(labels) <= 1:
        best, hit, n = majority(got)
        return [([list(b) for b in box], best, hit, n)]
    y = np.array([labels.index(o) for o in got])
    out = []
    for sub, i, n, hit in grow(X[idx], y, len(labels), max_depth=depth, min_leaf=2):
        cut = [[max(a, c), min(b, d)] for (a, b), (c, d) in zip(box, sub)]
        out.append((cut, labels[i], hit, n))
    return out


__all__ = [
    "K8_VARIANT",
    "KernelOrder",
    "STAGE_DEPTHS",
    "box_orders",
    "majority",
    "shape_orders",
    "sweep_orders",
]
