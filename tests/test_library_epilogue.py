"""The epilogues torch reaches through cuBLAS (F.linear with a bias, torch.addmm with
alpha and beta) as schedule data: the `fma-c` epilogue (the accumulator scaled and
rounded first, beta*C fused into the add) checked against exact rationals on both
engines and by a solver witness, and the decision tables schedules/library/05-epilogue-*
and 06-epilogue-* checked on recorded H200 and H100 calls: the decided recipe reproduces
them bit for bit, and the same recipe with the bias or C joined elsewhere does not.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.formats import Format, Rounding, round_fraction

FFMA = "fma.rn.f32"
RNG = np.random.default_rng(4605)


def _rn32(q: Fraction) -> np.float32:
    bits = round_fraction(q, Format.FP32, Rounding.RNE)
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


@pytest.mark.parametrize("engine", ["numpy", "compiled"])
def test_fma_c_is_beta_c_fused_onto_the_rounded_scaled_accumulator(engine):
    """epilogue=fma-c: D = RN(beta*C + RN(alpha*acc)), one rounding after the fused
    add, computed here from exact rationals; it differs from fma(alpha, acc, beta*C) on
    some of these elements (so the field changes outputs)."""
    M, N, K = 6, 7, 24
    A = RNG.standard_normal((M, K)).astype(np.float32)
    B = RNG.standard_normal((K, N)).astype(np.float32)
    C = RNG.standard_normal((M, N)).astype(np.float32)
    alpha, beta = 0.7, 1.3
    acc = np.asarray(tc.matmul("hopper/serial", A, B, instr=FFMA, engine=engine))
    got = tc.matmul(
        "hopper/serial[epilogue=fma-c]", A, B, C, alpha=alpha, beta=beta, instr=FFMA, engine=engine
    )
    fma = tc.matmul("hopper/serial", A, B, C, alpha=alpha, beta=beta, instr=FFMA, engine=engine)
    a32, b32 = Fraction(float(np.float32(alpha))), Fraction(float(np.float32(beta)))
    want = np.empty((M, N), np.float32)
    for i in range(M):
        for j in range(N):
            ax = Fraction(float(_rn32(a32 * Fraction(float(acc[i, j])))))
            want[i, j] = _rn32(b32 * Fraction(float(C[i, j])) + ax)
    assert np.asarray(got).view(np.uint32).tolist() == want.view(np.uint32).tolist()
    assert (np.asarray(fma).view(np.uint32) != want.view(np.uint32)).any()


def test_fma_c_with_unit_scalars_is_the_plain_epilogue():
    """alpha = beta = 1: RN(C + RN(acc)) = RN(acc + C), the fma epilogue's value."""
    A = RNG.standard_normal((4, 32)).astype(np.float16)
    B = RNG.standard_normal((32, 5)).astype(np.float16)
    C = RNG.standard_normal((1, 5)).astype(np.float16)
    x = tc.matmul("hopper/serial[c_join=epilogue,epilogue=fma-c]", A, B, C)
    y = tc.matmul("hopper/serial[c_join=epilogue]", A, B, C)
    assert np.asarray(x).view(np.uint16).tolist() == np.asarray(y).view(np.uint16).tolist()


def test_solver_witness_fma_against_fma_c():
    """The solvers find an input where the two epilogues differ, re-checked on the
    emulator (tests/test_gemm_solvers.py witness_for)."""
    from test_gemm_solvers import witness_for

    o = witness_for(
        "hopper/serial[alpha=0.7,beta=1.3]",
        "hopper/serial[alpha=0.7,beta=1.3,epilogue=fma-c]",
        2,
        FFMA,
    )
    assert o.witness.reproduces
