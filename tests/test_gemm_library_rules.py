"""The library's own arithmetic as schedule data (gemm/schedule.py): fp32 -> TF32 operand
rounding, split-K reductions in the output type, C joined after the rounding or to the
first partial, halving-tree and warp reductions (FFMA SGEMM, GEMV), FP8 fast accumulation
with split-K.

Each rule is checked against an independent reference (exact rationals rounded by
formats.round_fraction, numpy's fp32/fp16 arithmetic, fp32 bit manipulation), the numpy
and compiled engines are compared bit for bit, and a solver witness shows each new field
changing an output, re-checked on the emulator (tests/test_gemm_solvers.py witness_for).
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.errors import UserError
from tensorcore_smt.formats import Format, Rounding, round_fraction
from tensorcore_smt.gemm.plan import make_plan
from tensorcore_smt.gemm.schedule import (
    PartialRound,
    Reduce,
    ReduceFormat,
    halving_tree,
    parse_schedule,
    reduce_tree,
)
from tensorcore_smt.gemm.tf32_probe import (
    CLASSES,
    FULL_FP32,
    decide,
    predictions,
    probe_values,
)

FFMA = "fma.rn.f32"
FP8 = "wgmma.m64n8k32.f32.e4m3.e4m3"
TF32 = "wgmma.m64n8k8.f32.tf32.tf32"
RNG = np.random.default_rng(46)


def _u(x) -> np.ndarray:
    x = np.ascontiguousarray(np.asarray(x))
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


def _frac(x) -> Fraction:
    return Fraction(float(x))


def _rn(q: Fraction, fmt: Format) -> float:
    """The exact rational q rounded to nearest even in `fmt`, as a float."""
    bits = round_fraction(q, fmt, Rounding.RNE)
    dt = {Format.FP32: np.uint32, Format.FP16: np.uint16, Format.BF16: np.uint16}[fmt]
    view = {Format.FP32: np.float32, Format.FP16: np.float16, Format.BF16: ml_dtypes.bfloat16}
    return float(np.array([bits], dtype=dt).view(view[fmt])[0])


# --- fp32 -> TF32 operands ------------------------------------------------------------


def _tf32_reference(x: np.ndarray, mode: str) -> np.ndarray:
    """fp32 patterns as TF32 by bit arithmetic on finite values: truncate clears the 13
    low bits; rne adds 0xFFF plus the kept lsb; rna adds 0x1000 (carries into the
    exponent are the rounding up of the magnitude)."""
    u = x.view(np.uint32).astype(np.uint64)
    if mode == "rne":
        u = u + 0xFFF + ((u >> 13) & 1)
    elif mode == "rna":
        u = u + 0x1000
    return (u & ~np.uint64(0x1FFF)).astype(np.uint32)


@pytest.mark.parametrize("mode", ["truncate", "rne", "rna"])
@pytest.mark.parametrize("engine", ["numpy", "compiled"])
def test_operand_round_is_the_stated_conversion(mode, engine):
    """V @ I and I @ V return each fp32 value of V as the unit reads it (one nonzero
    product per output, exact): equal to the bit-arithmetic conversion on both sides."""
    V = (RNG.standard_normal((8, 8)) * 2.0 ** RNG.integers(-40, 40, (8, 8))).astype(np.float32)
    V.flat[:4] = np.array([1 + 2**-11, 1 + 3 * 2**-11, -(1 + 2**-11), 1 + 2**-11 - 2**-23])
    eye = np.eye(8, dtype=np.float32)
    hyp = f"hopper/serial[operand_round={mode}]"
    want = _tf32_reference(V, mode)
    assert _u(tc.matmul(hyp, V, eye, engine=engine)).tolist() == want.tolist()
    assert _u(tc.matmul(hyp, eye, V, engine=engine)).tolist() == want.tolist()


def test_truncate_is_what_the_unit_did_before():
    """The default keeps the former behaviour: the unit reads the fp32 pattern (its low
    13 bits ignored), so an fp32 value above a TF32 tie is truncated, not rounded."""
    A = np.array([[1 + 2**-11 + 2**-20]], dtype=np.float32)
    B = np.ones((1, 1), dtype=np.float32)
    assert parse_schedule("serial").text() == "serial"
    assert float(tc.matmul("hopper", A, B)[0, 0]) == 1.0
    assert float(tc.matmul("hopper/serial[operand_round=rne]", A, B)[0, 0]) == 1 + 2**-10


def test_operand_round_leaves_other_formats_alone():
    """fp16 operands are read whole: operand_round changes nothing there."""
    A = RNG.standard_normal((3, 40)).astype(np.float16)
    B = RNG.standard_normal((40, 5)).astype(np.float16)
    x = tc.matmul("hopper/serial[operand_round=rna]", A, B, engine="numpy")
    assert _u(x).tolist() == _u(tc.matmul("hopper", A, B, engine="numpy")).tolist()


def test_tf32_probe_predictions_differ_pairwise():
    """The probe's four answers predict four different outputs on both sides, so one run
    on a GPU decides among them; each prediction is recognised as itself only."""
    preds = predictions()
    names = list(preds)
    assert set(names) == {"truncate", "rne", "rna", FULL_FP32}
    for i, x in enumerate(names):
        for y in names[i + 1 :]:
            assert (preds[x][0] != preds[y][0]).any() and (preds[x][1] != preds[y][1]).any()
    assert decide(preds["rne"])["agrees_with"] == ["rne"]
    V = np.ascontiguousarray(probe_values()).view(np.uint32)
    low = V & 0x1FFF
    assert set(np.unique(low).tolist()) == set(CLASSES.values())
    assert ((low == 0x1000) & ((V >> 13) & 1 == 0)).any()  # a tie with an even lsb
    assert ((low == 0x1000) & ((V >> 13) & 1 == 1)).any()  # a tie with an odd lsb


# --- split-K in the output type -------------------------------------------------------


def _split_partials(A, B, S: int, tile: int) -> list[np.ndarray]:
    """The fp32 partials of contiguous split-K (S splits of tile-wide k-tiles) as the
    serial schedule computes each split's chain from +0 (a GEMM of that K range)."""
    K = A.shape[1]
    tiles = -(-K // tile)
    q = -(-tiles // S)
    out = []
    for s in range(S):
        ks = slice(s * q * tile, min(K, (s + 1) * q * tile))
        out.append(np.asarray(tc.matmul("hopper", A[:, ks], B[ks, :], out_dtype=np.float32)))
    return out


def _fp16_inputs(M=4, K=64, N=5):
    A = (RNG.standard_normal((M, K)) * 4).astype(np.float16)
    B = (RNG.standard_normal((K, N)) * 4).astype(np.float16)
    return A, B


@pytest.mark.parametrize(
    "reduce_fmt,round_partials",
    [
        ("out", "none"),
        ("out", "all"),
        ("acc", "all"),
        ("out", "first"),
        ("acc", "first"),
        ("acc-out", "none"),
    ],
)
def test_split_k_in_the_output_type_equals_the_rational_reference(reduce_fmt, round_partials):
    """fp16 output, 4 contiguous splits of 16: each partial rounded to fp16 where the
    schedule says (RN16 of the exact partial), then ((x0 + x1) + x2) + x3 with each sum
    the exact rational sum rounded to fp16 (reduce_fmt=out), to fp32 then fp16
    (acc-out), or to fp32, the fp16 rounding at the end (reduce_fmt=acc)."""
    A, B = _fp16_inputs()
    parts = _split_partials(A, B, 4, 16)
    hyp = (
        f"hopper/serial[split_k=4,split_tile=16,reduce_fmt={reduce_fmt},"
        f"round_partials={round_partials}]"
    )
    got = np.asarray(tc.matmul(hyp, A, B, out_dtype=np.float16, engine="numpy"))
    sum_fmt = Format.FP16 if reduce_fmt == "out" else Format.FP32
    for i in range(A.shape[0]):
        for j in range(B.shape[1]):
            xs = [_frac(p[i, j]) for p in parts]
            if round_partials == "all":
                xs = [_frac(_rn(x, Format.FP16)) for x in xs]
            elif round_partials == "first":
                xs[0] = _frac(_rn(xs[0], Format.FP16))
            acc = xs[0]
            for x in xs[1:]:
                acc = _frac(_rn(acc + x, sum_fmt))
                if reduce_fmt == "acc-out":
                    acc = _frac(_rn(acc, Format.FP16))
            assert float(got[i, j]) == _rn(acc, Format.FP16), (i, j)


def test_in_place_serial_split_k_with_a_bias_is_data():
    """An in-place serial split-K in the output type (CUTLASS serial split-K: D_0 =
    RN16(RN32(p_0 + bias)), the first partition's fp32 epilogue, then D_s = RN16(RN32(
    D_{s-1} + p_s)), each later one reading D back) is reduce_fmt=acc-out,
    round_partials=first, c_join=partial; against the rational reference, the bias
    broadcast over rows."""
    A, B = _fp16_inputs(3, 48, 4)
    bias = (RNG.standard_normal((1, 4)) * 8).astype(np.float16)
    parts = _split_partials(A, B, 3, 16)
    hyp = (
        "hopper/serial[split_k=3,split_tile=16,reduce_fmt=acc-out,round_partials=first,"
        "c_join=partial]"
    )
    got = np.asarray(tc.matmul(hyp, A, B, bias, out_dtype=np.float16, engine="numpy"))
    for i in range(3):
        for j in range(4):
            d = _frac(_rn(_frac(parts[0][i, j]) + _frac(bias[0, j]), Format.FP32))
            d = _frac(_rn(d, Format.FP16))
            for p in parts[1:]:
                d = _frac(_rn(_frac(_rn(d + _frac(p[i, j]), Format.FP32)), Format.FP16))
            assert float(got[i, j]) == float(d), (i, j)


def test_partial_rounding_needs_partials_and_plans_carry_it():
    with pytest.raises(UserError, match="reduce_fmt"):
        parse_schedule("serial[reduce_fmt=out]")
    s = parse_schedule("serial[split_k=3,split_tile=1,reduce=pairwise,round_partials=first]")
    plan = make_plan(s, 3, 1)
    assert plan.rounded == frozenset({2})  # pairwise of 3 starts with p2: (p2 + p0) + p1
    assert s.round_partials == PartialRound.FIRST and s.reduce_fmt == ReduceFormat.ACC
    assert parse_schedule(s.text()) == s
    assert plan.library_steps() == ("round_partials",)
    assert make_plan(parse_schedule("serial[split_k=3,split_tile=1]"), 3, 1).library_steps() == ()


# --- C after the rounding, alpha/beta -------------------------------------------------


def test_c_after_the_rounding_is_an_fp32_elementwise_add():
    """c_join=output: D = RN16(RN32(RN16(RN32(alpha*acc)) + RN32(beta*C))), numpy's fp32
    and fp16 arithmetic on the fp32 accumulator of the serial schedule."""
    A, B = _fp16_inputs(5, 40, 6)
    C = (RNG.standard_normal((5, 6)) * 3).astype(np.float16)
    alpha, beta = np.float32(0.37), np.float32(1.75)
    acc = np.asarray(tc.matmul("hopper", A, B, out_dtype=np.float32))
    d = (alpha * acc).astype(np.float16)
    want = (d.astype(np.float32) + beta * C.astype(np.float32)).astype(np.float16)
    hyp = "hopper/serial[c_join=output,alpha=0.37,beta=1.75]"
    got = tc.matmul(hyp, A, B, C, out_dtype=np.float16, engine="numpy")
    assert _u(got).tolist() == _u(want).tolist()
    fused = tc.matmul("hopper/serial[alpha=0.37,beta=1.75]", A, B, C, out_dtype=np.float16)
    assert (_u(fused) != _u(got)).any()  # the join changes bits on these inputs


def test_c_in_the_first_partial_of_one_chain_is_the_epilogue_add():
    """With one partial and alpha = 1, C added to it in fp32 is fma(1, acc, C) = RN(acc
    + C): c_join=partial and c_join=epilogue agree (both against the fp32 numpy sum)."""
    A, B = _fp16_inputs(3, 32, 4)
    C = RNG.standard_normal((3, 4)).astype(np.float32)
    acc = np.asarray(tc.matmul("hopper", A, B, out_dtype=np.float32))
    want = acc + C
    for join in ("partial", "epilogue"):
        got = tc.matmul(f"hopper/serial[c_join={join}]", A, B, C, engine="numpy")
        assert _u(got).tolist() == _u(want).tolist()


# --- halving trees, warps: FFMA SGEMM and GEMV orders ---------------------------------


def test_halving_and_warp_trees():
    assert halving_tree(2) == (0, 1)
    assert halving_tree(4) == ((0, 2), (1, 3))
    assert halving_tree(8) == (((0, 4), (2, 6)), ((1, 5), (3, 7)))
    assert halving_tree(3) == ((0, 2), 1)
    assert reduce_tree(8, Reduce.SERIAL, 4) == (((0, 2), (1, 3)), ((4, 6), (5, 7)))
    assert reduce_tree(8, Reduce.TREE, 2) == (((0, 1), (4, 5)), ((2, 3), (6, 7)))
    s = parse_schedule("serial[split_k=8,split_tile=1,warp=8]")
    assert s.warp is None and s.reduce == Reduce.TREE  # one group: the halving tree


def _fma32(a, b, c) -> np.float32:
    return np.float32(_rn(_frac(a) * _frac(b) + _frac(c), Format.FP32))


def test_gemv_interleaved_lanes_and_a_warp_tree_against_exact_fmas():
    """A GEMV as a block of 8 threads: thread t takes k = 2t, 2t+1, 2t+16, ... (width-2
    interleave), a serial chain of exact-rational-rounded FMAs; lanes reduced in warps of
    4 by the butterfly tree, the two warps then added."""
    K, L, W = 48, 8, 2
    A = (RNG.standard_normal((1, K)) * 2.0 ** RNG.integers(-8, 8, (1, K))).astype(np.float32)
    B = (RNG.standard_normal((K, 3)) * 2.0 ** RNG.integers(-8, 8, (K, 3))).astype(np.float32)
    hyp = f"hopper/serial[split_k={L},split=interleaved,split_tile={W},warp=4]"
    got = np.asarray(tc.matmul(hyp, A, B, instr=FFMA, engine="numpy"))
    for j in range(3):
        lanes = []
        for t in range(L):
            d = np.float32(0.0)
            for k in range(K):
                if (k // W) % L == t:
                    d = _fma32(A[0, k], B[k, j], d)
            lanes.append(d)

        def tree(xs):
            while len(xs) > 1:
                h = len(xs) // 2
                xs = [np.float32(xs[i] + xs[i + h]) for i in range(h)]
            return xs[0]

        want = np.float32(tree(lanes[:4]) + tree(lanes[4:]))
        assert float(got[0, j]) == float(want), j


# --- FP8 fast accumulation with split-K -----------------------------------------------


def test_fast_accumulation_with_split_k_adds_two_fast_chains_in_fp32():
    """fast-accum[split_k=2]: each half of K one unpromoted FP8 chain, the halves added
    in fp32 (numpy), then rounded to bf16."""
    K = 256
    A = (RNG.standard_normal((4, K))).astype(ml_dtypes.float8_e4m3fn)
    B = (RNG.standard_normal((K, 5))).astype(ml_dtypes.float8_e4m3fn)
    h = [
        np.asarray(tc.matmul("hopper/fast-accum", A[:, s], B[s, :], out_dtype=np.float32))
        for s in (slice(0, 128), slice(128, K))
    ]
    want = (h[0] + h[1]).astype(ml_dtypes.bfloat16)
    got = tc.matmul("hopper/fast-accum[split_k=2]", A, B, out_dtype=ml_dtypes.bfloat16)
    assert _u(got).tolist() == _u(want).tolist()


# --- numpy and compiled engines agree -------------------------------------------------


ENGINE_CASES = [
    (np.float32, "serial[operand_round=rna]", 40, False, None),
    (np.float32, "serial[operand_round=rne,split_k=2,split_tile=16]", 40, True, None),
    (np.float16, "serial[split_k=4,split_tile=16,reduce_fmt=out]", 64, False, np.float16),
    (
        ml_dtypes.bfloat16,
        "serial[split_k=3,split_tile=16,round_partials=first,reduce_fmt=out,c_join=partial]",
        48,
        True,
        ml_dtypes.bfloat16,
    ),
    (np.float16, "serial[split_k=4,split_tile=16,round_partials=all,reduce=tree]", 64, True, None),
    (np.float16, "serial[split_k=4,split_tile=16,reduce_fmt=acc-out]", 64, True, np.float16),
    (np.float16, "serial[c_join=output,alpha=0.5,beta=3]", 32, True, np.float16),
    (np.float16, "serial[c_join=output,epilogue=mul-add]", 32, True, ml_dtypes.bfloat16),
    (np.float16, "serial[split_k=4,split_tile=16,c_join=partial,beta=2,reduce=tree]", 64, True, None),
    (ml_dtypes.float8_e4m3fn, "fast-accum[split_k=2,reduce_fmt=out]", 256, False, ml_dtypes.bfloat16),
]  # fmt: skip


@pytest.mark.parametrize("dt,sched,K,with_c,out", ENGINE_CASES, ids=[c[1] for c in ENGINE_CASES])
def test_compiled_equals_numpy_on_the_new_fields(dt, sched, K, with_c, out):
    M, N = 5, 7
    A = (RNG.standard_normal((M, K)) * 2.0 ** RNG.integers(-6, 6, (M, K))).astype(dt)
    B = (RNG.standard_normal((K, N)) * 2.0 ** RNG.integers(-6, 6, (K, N))).astype(dt)
    A.flat[:3] = np.array([np.inf, np.nan, -0.0], dtype=np.float32).astype(dt)
    C = RNG.standard_normal((1, N)).astype(np.float16) if with_c else None
    want = tc.matmul(f"hopper/{sched}", A, B, C, out_dtype=out, engine="numpy")
    got = tc.matmul(f"hopper/{sched}", A, B, C, out_dtype=out, engine="compiled")
    assert _u(got).tolist() == _u(want).tolist()


def test_compiled_equals_numpy_on_gemv_warp_trees():
    A = RNG.standard_normal((1, 300)).astype(np.float32)
    B = RNG.standard_normal((300, 9)).astype(np.float32)
    hyp = "hopper/serial[split_k=64,split=interleaved,split_tile=4,warp=32,reduce=tree]"
    want = tc.matmul(hyp, A, B, instr=FFMA, engine="numpy")
    got = tc.matmul(hyp, A, B, instr=FFMA, engine="compiled")
    assert _u(got).tolist() == _u(want).tolist()


# --- solvers: each new field changes an output, the witness re-checked ----------------


SOLVER_PAIRS = [
    ("operand_round", "hopper/serial", "hopper/serial[operand_round=rna]", 8, TF32),
    ("reduce_fmt", "hopper/serial[split_k=2,split_tile=32,out=bf16]",
     "hopper/serial[split_k=2,split_tile=32,out=bf16,reduce_fmt=out]", 64, FP8),
    ("round_partials", "hopper/serial[split_k=2,split_tile=32,out=bf16]",
     "hopper/serial[split_k=2,split_tile=32,out=bf16,round_partials=all]", 64, FP8),
    ("c_join", "hopper/serial[c_join=epilogue,out=bf16]",
     "hopper/serial[c_join=output,out=bf16]", 32, FP8),
]  # fmt: skip


@pytest.mark.parametrize("field,x,y,K,instr", SOLVER_PAIRS, ids=[p[0] for p in SOLVER_PAIRS])
def test_solver_witness_for_each_new_field(field, x, y, K, instr):
    from test_gemm_solvers import witness_for

    o = witness_for(x, y, K, instr)
    assert o.witness.reproduces


# --- the H100 recordings --------------------------------------------------------------


@pytest.mark.parametrize(
    "shape,schedule",
    [
        ("random_16_16_4096", "serial[split_k=128,split_tile=32]"),
        ("random_64_64_4096", "serial[split_k=64,split_tile=64]"),
    ],
)
def test_h100_sgemm_at_k4096_splits_k_64_or_128_ways(shape, schedule):
    """cuBLAS SGEMM on an H100 (results/hardware/h100/gemm/fp32.npz): 8 x 8 recorded
    elements reproduced bit for bit by the deep split, and not by split_k=32."""
    import json
    from pathlib import Path

    from tensorcore_smt.hardware.recordings import Kind, inputs

    path = Path(__file__).parents[1] / "results/hardware/h100/gemm/fp32.npz"
    z = np.load(path)
    seed = json.loads(str(z["meta"]))["seed"]
    _, m, n, k = shape.split("_")
    a, b = inputs(Kind.RANDOM, Format.FP32, int(m), int(n), int(k), seed)
    rows, cols, d = z[f"{shape}_rows"][:8], z[f"{shape}_cols"][:8], z[f"{shape}_d"][:8, :8]
    a, b = a[rows], b[:, cols]
    got = tc.matmul(f"hopper/{schedule}", a, b, instr=FFMA, engine="compiled")
    assert _u(got).tolist() == d.tolist()
    other = tc.matmul("hopper/serial[split_k=32,split_tile=128]", a, b, instr=FFMA)
    assert (_u(other) != d).sum() > 32
