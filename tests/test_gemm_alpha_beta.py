"""D = alpha*(A@B) + beta*C, as BLAS, cuBLAS and torch.addmm define it, on every schedule
shape, output format and engine: against exact rationals where the result is
representable, and against the epilogue's definition (one fp32 FMA or mul then add, one
rounding to the output format, computed here with fractions) where rounding matters.
C joins the chain only with alpha = beta = 1; c_join=chain with other scalars is one
UserError (exit 2 on the CLI)."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

import tensorcore_smt as tc
from tensorcore_smt import UserError
from tensorcore_smt.cli import main
from tensorcore_smt.errors import ExitCode
from tensorcore_smt.gemm.schedule import CJoin, Schedule

SHAPES = [
    "serial",
    "serial[order=descending]",
    "serial[c_join=epilogue]",
    "serial[promote=32]",
    "serial[split_k=2]",
    "serial[split_k=2,split_tile=64,reduce=pairwise]",
    "serial[split_k=3,split=interleaved,split_tile=32]",
    "serial[split_k=3,split=interleaved,split_tile=32,reduce=pairwise,promote=32]",
    "serial[epilogue=mul-add]",
]
"""Every plan shape: one chain, promotion, split-K contiguous / interleaved with serial and
pairwise reduction, C in the chain or the epilogue, fma and mul-add epilogues."""

ENGINES = ["numpy", "compiled"]
SCALARS = [(2.0, 0.5), (0.0, 1.0), (1.0, 0.0), (-0.25, -3.0), (1.0, 1.0)]
K = 256


def _frac(x) -> Fraction:
    return Fraction(float(x))


def _rn(x: Fraction, mbits: int, emin: int, emax: int, saturate: bool = False) -> Fraction:
    """x rounded to nearest even into a binary format with `mbits` fraction bits and
    exponents emin..emax (subnormals below 2^emin; beyond the largest finite value:
    infinity, or that value when `saturate`)."""
    if x == 0:
        return Fraction(0)
    sign = -1 if x < 0 else 1
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    q = Fraction(2) ** (max(e, emin) - mbits)  # the spacing at x
    n, r = divmod(a / q, 1)
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and n % 2):
        n += 1
    v = n * q
    top = (2 - Fraction(1, 2**mbits)) * Fraction(2) ** emax
    if v > top:
        return sign * top if saturate else Fraction(sign) * 10**400  # "infinity"
    return sign * v


FORMATS = {
    "fp32": (23, -126, 127, np.float32),
    "bf16": (7, -126, 127, ml_dtypes.bfloat16),
    "fp16": (10, -14, 15, np.float16),
    "e4m3": (3, -6, 8, ml_dtypes.float8_e4m3fn),
}
E4M3_MAX = Fraction(448)


def _rn_to(x: Fraction, out: str) -> Fraction:
    m, lo, hi, _ = FORMATS[out]
    if out == "e4m3":  # no infinities; the GEMM's FP8 output saturates at 448
        v = _rn(x, m, lo, hi)
        return max(-E4M3_MAX, min(E4M3_MAX, v))
    return _rn(x, m, lo, hi)


def _rn32(x: Fraction) -> Fraction:
    return _rn_to(x, "fp32")


def _ints(rng, shape, lo, hi, dt):
    return rng.integers(lo, hi, shape).astype(np.float64).astype(dt)


def _exact(A, B, C, alpha, beta) -> list[list[Fraction]]:
    """alpha*(A@B) + beta*C in rationals (beta = 0 does not read C)."""
    M, N = A.shape[0], B.shape[1]
    out = []
    for i in range(M):
        row = []
        for j in range(N):
            ab = sum((_frac(A[i, k]) * _frac(B[k, j]) for k in range(A.shape[1])), Fraction(0))
            v = _frac(alpha) * ab
            if beta != 0:
                v += _frac(beta) * _frac(C[i, j])
            row.append(v)
        out.append(row)
    return out


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("sched", SHAPES)
def test_exact_alpha_beta_c_on_every_schedule_shape(sched, engine):
    """Small integers: every partial sum is exact, so every schedule gives the exact
    alpha*(A@B) + beta*C in fp32, whatever its chains, splits and epilogue."""
    rng = np.random.default_rng(11)
    A = _ints(rng, (3, K), -3, 4, np.float16)
    B = _ints(rng, (K, 4), -3, 4, np.float16)
    C = _ints(rng, (3, 4), -50, 50, np.float32)
    for alpha, beta in SCALARS:
        D = tc.matmul(f"hopper/{sched}", A, B, C, alpha=alpha, beta=beta, engine=engine)
        want = _exact(A, B, C, alpha, beta)
        got = [[_frac(x) for x in r] for r in D]
        assert got == want, (sched, alpha, beta)


@pytest.mark.parametrize("engine", ENGINES)
def test_alpha_two_beta_half_on_a_unit_product(engine):
    """A@B = 1 and C = 10: alpha = 2, beta = 0.5 gives 7 on every schedule, alpha = 0
    gives beta*C = 10, and beta = 0 ignores a NaN C."""
    A = np.zeros((1, 32), np.float16)
    B = np.zeros((32, 1), np.float16)
    A[0, 0] = B[0, 0] = 1
    C = np.full((1, 1), 10, np.float32)
    for sched in SHAPES[:4]:
        h = f"hopper/{sched}"
        assert tc.matmul(h, A, B, C, alpha=2.0, beta=0.5, engine=engine)[0, 0] == 7
        assert tc.matmul(h, A, B, C, alpha=0.0, engine=engine)[0, 0] == 10
        nan = np.full((1, 1), np.nan, np.float32)
        assert tc.matmul(h, A, B, nan, alpha=3.0, beta=0.0, engine=engine)[0, 0] == 3


def _epilogue_reference(acc, C, alpha: float, beta: float, mul_add: bool, out: str):
    """The epilogue from its definition: alpha and beta in fp32, RN32(beta*c), then
    fma(alpha, acc, beta*c) (or RN32(alpha*acc) + beta*c), then one rounding to `out`."""
    a32, b32 = _rn32(_frac(alpha)), _rn32(_frac(beta))
    res = []
    for x, c in zip(acc.reshape(-1), C.reshape(-1)):
        ax = a32 * _frac(x)
        if mul_add:
            ax = _rn32(ax)
        bc = _rn32(b32 * _frac(c)) if beta != 0 else Fraction(0)
        res.append(_rn_to(_rn32(ax + bc), out))
    return res


ROUNDING_SHAPES = [s for s in SHAPES if "c_join" not in s] + ["serial[c_join=epilogue]"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("out", list(FORMATS))
@pytest.mark.parametrize("sched", ROUNDING_SHAPES)
def test_rounded_epilogue_matches_its_definition(sched, out, engine):
    """Random operands, alpha = 0.1 and beta = -0.3 (not fp32 values): D is the schedule's
    own accumulator (the same schedule with alpha = 1, no C, fp32 out) put through the
    epilogue as defined, on every schedule shape and output format."""
    rng = np.random.default_rng(3)
    A = rng.standard_normal((4, K)).astype(np.float16)
    B = rng.standard_normal((K, 5)).astype(np.float16)
    C = (rng.standard_normal((4, 5)) * 8).astype(np.float32)
    h = f"hopper/{sched}"
    acc = tc.matmul(h, A, B, engine=engine)
    assert acc.dtype == np.float32
    mul_add = "mul-add" in sched
    for alpha, beta in ((0.1, -0.3), (1.0, 0.7), (-3.0, 0.0)):
        D = tc.matmul(h, A, B, C, alpha=alpha, beta=beta, out_dtype=FORMATS[out][3], engine=engine)
        want = _epilogue_reference(acc, C, alpha, beta, mul_add, out)
        got = [_frac(x) for x in D.reshape(-1)]
        assert got == want, (sched, out, alpha, beta)


def test_scales_fold_into_alpha_and_c_joins_the_epilogue():
    """scale_a * scale_b is alpha (torch._scaled_mm): C is not scaled by it."""
    A = np.zeros((1, 32), ml_dtypes.float8_e4m3fn)
    B = np.zeros((32, 1), ml_dtypes.float8_e4m3fn)
    A[0, 0] = B[0, 0] = 1
    C = np.full((1, 1), 10, np.float32)
    info: list = []
    D = tc.matmul("hopper", A, B, C, scale_a=2.0, scale_b=3.0, run_info=info)
    assert D[0, 0] == 16 and info[0].schedule.alpha == 6.0 and not info[0].plan.c_in_chain
    with pytest.raises(UserError, match="c_join=chain"):
        tc.matmul("hopper/serial[c_join=chain]", A, B, C, scale_a=2.0)


def test_where_c_joins_is_one_rule():
    assert Schedule().c_in_chain
    assert not Schedule(alpha=2.0).c_in_chain
    assert not Schedule(beta=0.5).c_in_chain
    assert Schedule(beta=1.0).c_in_chain
    assert not Schedule(promote=128).c_in_chain
    assert Schedule(c_join=CJoin.CHAIN).c_in_chain
    for bad in ({"alpha": 2.0}, {"beta": 0.0}, {"beta": -1.0}):
        with pytest.raises(UserError, match="c_join=chain computes A\\*B \\+ C"):
            Schedule(c_join=CJoin.CHAIN, **bad)


def test_cli_refuses_chain_with_other_scalars():
    r = CliRunner().invoke(
        main, ["gemm", "--arch", "hopper/serial[c_join=chain,beta=0.5]", "--random", "4,4,16"]
    )
    assert r.exit_code == ExitCode.USAGE, r.output
    assert len(r.output.strip().splitlines()) == 1 and "c_join=chain" in r.output
