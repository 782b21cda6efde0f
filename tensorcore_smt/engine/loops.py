"""How a kernel's loop over rows (or GEMM outputs) is vectorised, chosen from its DAG.

LLVM's loop vectoriser picks the number of SIMD lanes from the widest type in the loop
body: a DAG with a single 64-bit node gets 4 lanes (one 256-bit AVX2 register of i64),
although most of its nodes are booleans and 8- or 16-bit fields that fill 16 or 32
lanes. Forcing the lane count (loop metadata `llvm.loop.vectorize.width`, LLVM Language
Reference, "'llvm.loop.vectorize' and 'llvm.loop.interleave'") lets the narrow majority
fill the registers; the few wide nodes then take several registers each. Integers over
64 bits are the opposite case: vectors of them are split into scalar pieces and cost
more than the scalar loop, the more so the wider they are.

The rules below are measured (bench/bench_engine.py and the table in docs/engine.md,
one core of an AMD EPYC znver3 with AVX2): hopper m16n8k16 f16 15.1 M/s with LLVM's
choice of 4 lanes, 21.9 M/s with 16; volta m8n8k4 61 -> 100 M/s; FP8 wgmma k32 14.4 M/s
as a scalar loop, 18.0 M/s with 16 lanes; cdna3 fp8 k16 (3 % of nodes over 64 bits)
best with 8 lanes; cdna1 fp32 4x4x1 (17 % over 64 bits, none over 128) best with
LLVM's choice. DAGs with integers over 128 bits run best as a scalar loop: ampere's fp64
DMMA (up to 256 bits) 3.6 M/s scalar, 3.2 M/s vectorised; cdna1 f16 16x16x16 (exact
sums of 590-1024 bits) 1.2 M/s scalar in 1.1 s of compiling, 0.6 M/s vectorised in
8.3 s. DAGs over `MAX_VECTOR_NODES` stay scalar: vectorising them takes the compile past
2 s (hopper FP8 mma.sync, 8,759 nodes: 3.0 s) for at most 1.6x. DAGs with one-bit
inputs (the .b1 operands of single-bit mma, 128 or 256 of each) stay scalar: LLVM's
vectoriser gives up on every one of them ("loop not vectorized"), and says so on stderr.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..bv.dag import post_order
from ..bv.symbolic import Term

MAX_VECTOR_NODES = 4000
"""Largest DAG (nodes) whose loop is vectorised (compile time stays under 2 s)."""

MAX_VECTOR_WIDTH = 128
"""Widest integer (bits) a vectorised loop may hold."""


@dataclass(frozen=True)
class LoopPlan:
    """`tiled`: the tiled loop for the loop vectoriser (else the plain scalar loop);
    `lanes`: SIMD lanes forced on the vectorised loop (None: LLVM's own choice)."""

    tiled: bool
    lanes: int | None = None


SCALAR = LoopPlan(tiled=False)

WIDE_SHARE_RULES: tuple[tuple[float, LoopPlan], ...] = (
    (0.0, LoopPlan(tiled=True, lanes=16)),
    (0.10, LoopPlan(tiled=True, lanes=8)),
    (0.25, LoopPlan(tiled=True, lanes=None)),
    (1.0, SCALAR),
)
"""(largest share of DAG nodes wider than 64 bits, plan), in order: the first row whose
share is at least the DAG's wins."""


def widths(root: Term) -> tuple[float, int]:
    """The share of the DAG's operation nodes (constants and variables left out) whose
    result is wider than 64 bits, and the widest result (bits)."""
    ops = [t for t in post_order([root]) if t.op not in ("const", "bconst", "var", "bvar")]
    if not ops:
        return 0.0, 0
    return sum(t.width > 64 for t in ops) / len(ops), max(t.width for t in ops)


def _one_bit_inputs(root: Term) -> bool:
    return any(t.op == "var" and t.width == 1 for t in post_order([root]))


def loop_plan(root: Term, nodes: int) -> LoopPlan:
    """The loop form for a kernel whose body is the DAG `root` of `nodes` nodes."""
    if nodes > MAX_VECTOR_NODES:
        return SCALAR
    share, widest = widths(root)
    if widest > MAX_VECTOR_WIDTH or _one_bit_inputs(root):
        return SCALAR
    for bound, plan in WIDE_SHARE_RULES:
        if share <= bound:
            return plan
    return SCALAR


def loop_metadata(plan: LoopPlan, branch: str) -> tuple[str, list[str]]:
    """`branch` (a loop's back-edge `br`) with the metadata that forces the plan's lanes,
    and the metadata lines for the module's end (none when LLVM chooses)."""
    if plan.lanes is None:
        return branch, []
    return f"{branch}, !llvm.loop !900", [
        "!900 = distinct !{!900, !901, !902}",
        f'!901 = !{{!"llvm.loop.vectorize.width", i32 {plan.lanes}}}',
        '!902 = !{!"llvm.loop.vectorize.enable", i1 true}',
    ]
