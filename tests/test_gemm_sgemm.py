"""Full-fp32 GEMMs on NVIDIA: cuBLAS SGEMM as a chain of fp32 FMAs (PTX fma.rn.f32,
archs/nvidia.toml family ffma) along K, and BLAS's alpha = 0 rule (A and B not read).

The chain is checked against an independent reference: exact rationals, rounded to fp32
to nearest even after every fused multiply-add (formats.round_fraction); the
compiled engine against the numpy engine bit for bit.
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.engine import Engine
from tensorcore_smt.formats import Format, Rounding, round_fraction
from tensorcore_smt.gemm.hypothesis import default_instruction, full_fp32_instruction
from tensorcore_smt.spec.presets import PRESETS

FMA = "fma.rn.f32"
NVIDIA = [name for name, pr in PRESETS.items() if pr.vendor == "nvidia"]


def _u32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def _frac(x: np.float32) -> Fraction:
    return Fraction(float(x))


def _fma32(a: np.float32, b: np.float32, c: np.float32) -> np.float32:
    """RN_fp32(a*b + c) from exact rationals (finite operands); an exact zero sum is -0
    only when a*b and c are both negative zeros (IEEE 754 §6.3)."""
    exact = _frac(a) * _frac(b) + _frac(c)
    neg_zero = exact == 0 and np.signbit(c) and (np.signbit(a) != np.signbit(b))
    neg_zero = neg_zero and (a == 0 or b == 0)
    bits = round_fraction(exact, Format.FP32, Rounding.RNE, negative_zero=bool(neg_zero))
    return np.uint32(bits).view(np.float32)


def _reference(A, B, C=None) -> np.ndarray:
    """d = C (or +0); d = fma(a_k, b_k, d) for k = 0, 1, ..., K-1, per output."""
    M, K = A.shape
    N = B.shape[1]
    D = np.zeros((M, N), dtype=np.float32)
    for i in range(M):
        for j in range(N):
            d = np.float32(0.0) if C is None else np.float32(C[i, j])
            for k in range(K):
                d = _fma32(A[i, k], B[k, j], d)
            D[i, j] = d
    return D


def _operands(rng, M, K, N):
    """fp32 operands over a wide exponent range, with subnormals and exact cancellations."""
    A = (rng.standard_normal((M, K)) * 2.0 ** rng.integers(-30, 30, (M, K))).astype(np.float32)
    B = (rng.standard_normal((K, N)) * 2.0 ** rng.integers(-30, 30, (K, N))).astype(np.float32)
    A[0, :4] = np.array([1e-40, -3e-42, 2.0**-126, 0.0], dtype=np.float32)  # subnormals
    B[:4, 0] = np.array([2.0**-10, 1.5, -1.0, 7.0], dtype=np.float32)
    A[1, 1], A[1, 2] = 3.0, -3.0  # a product and its negation
    B[2, :] = B[1, :]
    return A, B


def test_every_nvidia_preset_has_the_fp32_fma():
    for arch in NVIDIA:
        inst = PRESETS[arch].instructions[FMA]
        p = inst.params
        assert (inst.kind, inst.unit, p.K, p.algorithm.value) == ("fma", "FFMA", 1, "sfma")
        assert {p.a_fmt, p.b_fmt, p.c_fmt, p.d_fmt} == {Format.FP32}
        assert p.rounding == Rounding.RNE and not p.flush_inputs and not p.flush_outputs
        assert full_fp32_instruction(arch) == FMA
    assert default_instruction("volta", Format.FP32, Format.FP32) == FMA
    assert default_instruction("hopper", Format.FP32, Format.FP32) != FMA  # TF32 wgmma


@pytest.mark.parametrize("with_c", [False, True])
def test_fma_chain_equals_the_exact_reference(with_c):
    rng = np.random.default_rng(21)
    A, B = _operands(rng, 4, 37, 5)
    C = rng.standard_normal((4, 5)).astype(np.float32) if with_c else None
    info: list = []
    D = tc.matmul("hopper", A, B, C, instr=FMA, engine="numpy", run_info=info)
    assert info[0].instr == FMA and info[0].plan.steps() == 37 and info[0].plan.c_in_chain
    assert np.array_equal(_u32(D), _u32(_reference(A, B, C)))
    # not a plain fp64 matmul rounded once: the FMA chain rounds after every step
    assert not np.array_equal(_u32(D), _u32((A.astype(np.float64) @ B).astype(np.float32)))


def test_fma_chain_epilogue_and_descending_order():
    """C in the epilogue: D = RN(1*acc + RN(1*C)); descending k: the chain from k = K-1."""
    rng = np.random.default_rng(22)
    A, B = _operands(rng, 3, 20, 4)
    C = rng.standard_normal((3, 4)).astype(np.float32)
    D = tc.matmul("ampere/serial[c_join=epilogue]", A, B, C, instr=FMA, engine="numpy")
    acc = _reference(A, B)
    want = np.array(
        [[_fma32(np.float32(1), acc[i, j], C[i, j]) for j in range(4)] for i in range(3)],
        dtype=np.float32,
    )
    assert np.array_equal(_u32(D), _u32(want))
    Dd = tc.matmul("ampere/serial[order=descending]", A, B, instr=FMA, engine="numpy")
    assert np.array_equal(_u32(Dd), _u32(_reference(A[:, ::-1], B[::-1, :])))


SCHEDULES = [
    "serial",
    "serial[order=descending]",
    "serial[promote=16]",
    "serial[split_k=3,split_tile=8,reduce=pairwise]",
    "serial[split_k=2,split=interleaved,split_tile=4,promote=8]",
    "serial[c_join=epilogue,alpha=0.5,beta=-2,out=bf16]",
    "serial[epilogue=mul-add,alpha=3,beta=0.25]",
]


@pytest.mark.parametrize("sched", SCHEDULES)
def test_compiled_fma_chain_equals_numpy(sched):
    rng = np.random.default_rng(23)
    A, B = _operands(rng, 5, 41, 7)
    A[2, :3] = np.array([np.inf, np.nan, -np.inf], dtype=np.float32)
    C = rng.standard_normal((5, 7)).astype(np.float32)
    h = f"hopper/{sched}"
    want = tc.matmul(h, A, B, C, instr=FMA, engine="numpy")
    info: list = []
    got = tc.matmul(h, A, B, C, instr=FMA, engine="compiled", run_info=info)
    assert info[0].engine == Engine.COMPILED
    assert got.dtype == want.dtype
    w = {2: np.uint16, 4: np.uint32}[want.dtype.itemsize]
    assert np.array_equal(got.view(w), want.view(w)), sched
    nan_bits = _u32(tc.matmul("hopper", A, B, instr=FMA, engine="numpy"))[2]
    assert 0x7FFFFFFF in nan_bits  # the canonical NaN of fp32 operations


CASES_ALPHA0 = [
    ("hopper", np.float16, "serial"),
    ("hopper", ml_dtypes.float8_e4m3fn, "serial[promote=32,split_k=2,split_tile=32]"),
    ("ampere", np.float32, "serial[epilogue=mul-add,out=bf16]"),
    ("volta", np.float32, "serial"),
]


@pytest.mark.parametrize("engine", ["numpy", "compiled"])
@pytest.mark.parametrize("arch,dt,sched", CASES_ALPHA0)
def test_alpha_zero_does_not_read_a_and_b(engine, arch, dt, sched):
    """alpha = 0 (either sign): D = beta*C, +0 without C or with beta = 0, whatever NaN
    and Inf A@B holds (reference BLAS xGEMM)."""
    M, K, N = 3, 64, 4
    A = np.full((M, K), np.inf, dtype=np.float32).astype(dt)
    A[0, 0] = np.nan
    B = np.ones((K, N), dtype=np.float32).astype(dt)
    B[0, 1] = 0.0  # Inf * 0 is invalid
    C = np.array([[1.5, -0.0, 3e38, -2.0]] * M, dtype=np.float32)
    h = f"{arch}/{sched}"
    for alpha in (0.0, -0.0):
        D = tc.matmul(h, A, B, C, alpha=alpha, beta=2.0, out_dtype=np.float32, engine=engine)
        want = np.array([[3.0, -0.0, np.inf, -4.0]] * M, dtype=np.float32)  # RN_fp32(2*C)
        assert np.array_equal(_u32(D), _u32(want)), (alpha, D)
        for args in ((C,), ()):
            kw = {"beta": 0.0} if args else {}
            Z = tc.matmul(h, A, B, *args, alpha=alpha, out_dtype=np.float32, engine=engine, **kw)
            assert not _u32(Z).any(), Z  # +0 everywhere
    D16 = tc.matmul(h, A, B, C, alpha=0.0, beta=-1.0, out_dtype=np.float16, engine=engine)
    assert D16.dtype == np.float16
    assert np.array_equal(
        D16.view(np.uint16), np.array([[-1.5, 0.0, -np.inf, 2.0]] * M, np.float16).view(np.uint16)
    )
    # alpha != 0 does read them: the NaN propagates
    assert np.isnan(tc.matmul(h, A, B, C, alpha=1e-30, beta=2.0, engine=engine)[0]).any()
