"""Overflow-free integer chains: the largest K for which a chain of an integer
instruction, from C = 0, sums K products without any partial sum leaving the s32 range
(so that wrap-around, `.satfinite` and the exact sum agree), and a witness at K + 1.

1. Argument (model/integer.py, `term_range`, `chain_bound`). Every term a_k b_k lies in
   [tmin, tmax] with tmin <= 0 <= tmax (the formats' extreme products: -128 x -128 =
   16384 and -128 x 127 = -16256 for s8 x s8). A serial chain acc_{j+1} = MMA(a block j,
   b block j, acc_j) from acc_0 = 0 forms, inside and between its instructions, only
   partial sums of the K products, each in [K tmin, K tmax]. While K tmax <= 2^31 - 1
   and K tmin >= -2^31 no clamp acts and no wrap occurs: every instruction returns the
   exact sum (its c being the exact running sum), by induction over the chain. This
   holds for every input, so K = chain_bound(tmin, tmax) is proved; it is tight, as
   the next point shows.
2. Witness at K + 1: every a_k and b_k at the corner of the binding extreme (all -128
   for s8 x s8), run through tc.matmul with the instruction under wrap-around and under
   `.satfinite`: the exact sum (K + 1) t is outside the s32 range, so the two chains
   differ (and at K, all -128 too, both give the exact sum).

A structured-sparse instruction (mma.sp) adds its kept products whatever its metadata
(model/sparse.py): the argument holds for every metadata with K counting kept products,
and the chains run on the preset's dense instruction that is its dense unit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import UserError
from ..formats import Format
from ..model.integer import S32_MAX, S32_MIN, chain_bound, term_range
from ..model.params import Algorithm, BitOp, Sparsity

RUN_LIMIT = 1 << 26
"""Chains longer than this many products are not run through tc.matmul (b1 units: the
bound is 2^31 - 1 products); the argument still proves K."""


@dataclass
class ChainRun:
    """One chain of `K` equal products through tc.matmul under both clamps."""

    K: int
    a: int  # the value every a_k takes
    b: int  # the value every b_k takes
    exact: int
    wrap: int
    satfinite: int


@dataclass
class OverflowFree:
    """What is proved about overflow-free chains of one integer instruction."""

    hypothesis: str
    instruction: str
    tmin: int
    tmax: int
    K: int
    lines: list[str] = field(default_factory=list)
    at_K: ChainRun | None = None
    above: ChainRun | None = None
    seconds: float = 0.0
    not_run: str | None = None  # why no chain ran through tc.matmul (None: they ran)


def _corner(p, up: bool) -> tuple[int, int]:
    """Operand values whose term is tmax (up) or tmin."""
    if p.bit_op == BitOp.AND:
        return (1, 1) if up else (0, 0)
    if p.bit_op == BitOp.XOR:
        return (1, 0) if up else (0, 0)
    (a0, a1), (b0, b1) = p.a_fmt.spec.int_range, p.b_fmt.spec.int_range
    pairs = [(x, y) for x in (a0, a1) for y in (b0, b1)]
    return (max if up else min)(pairs, key=lambda t: (t[0] * t[1], -abs(t[0])))


def _operand(value: int, fmt: Format, shape: tuple[int, int]) -> np.ndarray:
    """A matrix of one value as bit patterns (uint8; matmul reads them in `fmt`)."""
    return np.full(shape, value % (1 << fmt.spec.storage), dtype=np.uint8)


def run_chain(variant: str, instr: str, K: int, a: int, b: int, engine: str | None) -> ChainRun:
    """K products a x b from C = 0 through tc.matmul, wrap-around and `.satfinite`."""
    from ..api import resolve
    from ..gemm.emulate import matmul

    p = resolve(variant, instr)
    A = _operand(a, p.a_fmt, (1, K))
    B = _operand(b, p.b_fmt, (K, 1))
    C = np.zeros((1, 1), dtype=np.int32)
    out = {}
    for clamp in ("wrap", "satfinite"):
        d = matmul(f"{variant}[int_clamp={clamp}]", A, B, C, instr=instr, engine=engine)
        out[clamp] = int(np.asarray(d).reshape(-1)[0])
    term = a * b if p.bit_op == BitOp.MUL else (a & b if p.bit_op == BitOp.AND else a ^ b)
    return ChainRun(K, a, b, K * term, out["wrap"], out["satfinite"])


def overflow_free(
    hypothesis: str, instr: str | None = None, engine: str | None = "compiled"
) -> OverflowFree:
    """The largest overflow-free K of a chain of the integer instruction (module
    docstring), with the chains at K and K + 1 run through tc.matmul."""
    from ..spec.presets import parse_variant

    t0 = time.perf_counter()
    v = parse_variant(hypothesis)
    inst = v.instruction(instr)
    p = v.params(inst.name)
    if p.algorithm != Algorithm.INTEGER:
        raise UserError(f"{inst.name} is no integer instruction; give --slices for exactness")
    tmin, tmax = term_range(p)
    K = chain_bound(tmin, tmax)
    up = K * tmax + tmax > S32_MAX  # which end binds at K + 1
    lines = [
        f"each term lies in [{tmin}, {tmax}] ({p.a_fmt.spec.name} x {p.b_fmt.spec.name}"
        + ("" if p.bit_op == BitOp.MUL else f", {p.bit_op.value}.popc")
        + ")",
        f"a chain from C = 0 forms only partial sums of its products: within [k {tmin}, "
        f"k {tmax}] after k of them",
        f"K = {K}: K tmax = {K * tmax} <= 2^31 - 1 and K tmin = {K * tmin} >= -2^31, so "
        "no clamp acts and no wrap occurs (induction over the chain's instructions)",
        f"K + 1 = {K + 1}: (K + 1) {'tmax' if up else 'tmin'} = "
        f"{(K + 1) * (tmax if up else tmin)} is outside the s32 range",
    ]
    run_on: str | None = inst.name
    if p.sparse != Sparsity.NONE:
        # the selection is data movement ahead of the integer sum: the argument holds for
        # every metadata, and the chains run on the dense unit of the kept products
        run_on = v.dense_twin(inst.name) if p.sparse == Sparsity.COMPRESSED else None
        lines.insert(
            0,
            f"{inst.name} keeps {p.sparse_keep} of every {p.sparse_group} k of A: each "
            f"instruction adds its {p.n_a} kept products, whatever the metadata, so K below "
            f"counts kept products (they span {p.sparse_group}/{p.sparse_keep} as many k of A)",
        )
        if run_on is not None:
            lines.append(
                f"the chains below run on {run_on}, the dense unit {inst.name} is on its "
                "kept entries (model/sparse.py)"
            )
    r = OverflowFree(hypothesis, inst.name, tmin, tmax, K, lines)
    if run_on is None:
        r.not_run = "no dense instruction of the preset is this sparse unit; the argument stands"
    elif K + 1 > RUN_LIMIT:
        r.not_run = "the chain is too long to run; the argument stands"
    else:
        a, b = _corner(p, up)
        r.at_K = run_chain(hypothesis, run_on, K, a, b, engine)
        r.above = run_chain(hypothesis, run_on, K + 1, a, b, engine)
    r.seconds = time.perf_counter() - t0
    return r


def check_runs(r: OverflowFree) -> list[str]:
    """What the runs show, in words (empty when none ran); each claim is re-checked
    here against the exact sums."""
    out = []
    if r.at_K is not None:
        k = r.at_K
        ok = k.wrap == k.satfinite == k.exact
        out.append(
            f"at K = {k.K} (a = {k.a}, b = {k.b}): wrap {k.wrap}, satfinite {k.satfinite}, "
            f"exact {k.exact}: {'all equal' if ok else 'NOT equal'}"
        )
    if r.above is not None:
        k = r.above
        wrapped = (k.exact - S32_MIN) % (1 << 32) + S32_MIN
        clamped = min(max(k.exact, S32_MIN), S32_MAX)
        ok = k.wrap == wrapped and k.satfinite == clamped and k.wrap != k.satfinite
        out.append(
            f"at K + 1 = {k.K}: exact {k.exact}; wrap {k.wrap}, satfinite {k.satfinite}: "
            + (
                "they differ, as wrap-around and the clamp of the exact sum say"
                if ok
                else "UNEXPECTED"
            )
        )
    return out


__all__ = ["RUN_LIMIT", "ChainRun", "OverflowFree", "check_runs", "overflow_free", "run_chain"]
