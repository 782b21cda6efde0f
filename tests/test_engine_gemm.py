"""The compiled GEMM runner (gemm/compiled.py) equals gemm/element.py on numpy bit for bit.

matmul with engine="compiled" hands the runner the operand tables; engine="numpy" runs
element.py vectorised on the numpy interpreter. Schedules cover every Plan shape: one
chain, promotion, split-K (contiguous, interleaved, serial and pairwise reduction), C in
the chain and in the epilogue, alpha, beta, mul-add and output conversion with saturation.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tensorcore_smt as tc

RNG = np.random.default_rng(5)


def _u(x) -> np.ndarray:
    x = np.asarray(x)
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


def _operands(M: int, K: int, N: int, dt):
    A = (RNG.standard_normal((M, K)) * 2.0 ** RNG.integers(-8, 8, (M, K))).astype(dt)
    B = (RNG.standard_normal((K, N)) * 2.0 ** RNG.integers(-8, 8, (K, N))).astype(dt)
    specials = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-6], dtype=np.float32)
    A.flat[: len(specials)] = specials.astype(dt)  # special values and a subnormal
    return A, B


CASES = [
    ("hopper", np.float16, "serial", 72, False),
    ("hopper", ml_dtypes.bfloat16, "serial[order=descending]", 48, True),
    ("hopper", ml_dtypes.float8_e4m3fn, "serial[promote=64]", 200, False),
    ("hopper", ml_dtypes.float8_e5m2, "serial[split_k=3,split_tile=32,reduce=pairwise]", 96, False),
    (
        "ampere",
        np.float16,
        "serial[split_k=2,split=interleaved,split_tile=32,promote=32]",
        128,
        True,
    ),
    ("ampere", np.float32, "serial[alpha=0.5,out=bf16]", 24, False),
    ("cdna3", np.float16, "serial[epilogue=mul-add,alpha=3,c_join=epilogue]", 20, True),
    ("ada", ml_dtypes.float8_e4m3fn, "cublas-fp8[out=e4m3]", 130, False),
    ("hopper", np.float16, "serial[c_join=epilogue,beta=0.5,out=bf16]", 40, True),
    ("volta", np.float16, "serial", 36, True),
]


@pytest.mark.parametrize("arch,dt,sched,K,with_c", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_compiled_gemm_equals_numpy(arch, dt, sched, K, with_c):
    M, N = 6, 9
    A, B = _operands(M, K, N, dt)
    C = RNG.standard_normal((M, N)).astype(np.float32) if with_c else None
    want = tc.matmul(f"{arch}/{sched}", A, B, C, engine="numpy")
    got = tc.matmul(f"{arch}/{sched}", A, B, C, engine="compiled")
    assert got.dtype == want.dtype
    assert _u(got).tolist() == _u(want).tolist()


def test_batched_gemm_equals_numpy():
    A = RNG.standard_normal((2, 3, 5, 32)).astype(np.float16)
    B = RNG.standard_normal((3, 32, 7)).astype(np.float16)
    want = tc.matmul("hopper", A, B, engine="numpy")
    assert _u(tc.matmul("hopper", A, B, engine="compiled")).tolist() == _u(want).tolist()


def test_large_gemm_over_threads_equals_numpy():
    """Enough outputs that the runner splits them across threads."""
    A, B = _operands(64, 32, 96, np.float16)
    want = tc.matmul("hopper/serial[promote=16]", A, B, engine="numpy")
    got = tc.matmul("hopper/serial[promote=16]", A, B, engine="compiled")
    assert _u(got).tolist() == _u(want).tolist()


def test_outputs_in_any_order_equal_numpy(monkeypatch):
    """The chain kernel groups outputs into runs that share a row of A and have
    consecutive columns of B; outputs handed over in a shuffled order (runs of one,
    broken runs) give the same bits."""
    from tensorcore_smt.gemm import compiled as engine_gemm
    from tensorcore_smt.gemm import emulate
    from tensorcore_smt.gemm.outputs import OutputList

    calls = []

    def shuffled(p, plan, schedule, a_table, b_table, outputs, c_bits, c_fmt, out):
        ia, ib = outputs.rows(0, len(outputs))
        calls.append(len(ia))
        order = np.random.default_rng(9).permutation(len(ia))
        order[: len(order) // 2] = np.sort(order[: len(order) // 2])  # some runs survive
        c = None if c_bits is None else c_bits[order]
        d = np.empty_like(out)
        engine_gemm.run_gemm(
            p, plan, schedule, a_table, b_table, OutputList(ia[order], ib[order]), c, c_fmt, d
        )
        out[order] = d

    A, B = _operands(40, 64, 80, np.float16)
    C = RNG.standard_normal((40, 80)).astype(np.float32)
    want = tc.matmul("hopper/serial[promote=32]", A, B, C, engine="numpy")
    monkeypatch.setattr(emulate, "compiled_runner", lambda: shuffled)
    got = tc.matmul("hopper/serial[promote=32]", A, B, C, engine="compiled")
    assert calls == [40 * 80]
    assert _u(got).tolist() == _u(want).tolist()


def test_many_small_tiles_on_threads_equal_numpy(monkeypatch):
    """Tiles that cut rows of D anywhere (runs broken at tile edges), split K and C in
    the epilogue, on two worker threads: the numpy engine's bits."""
    from tensorcore_smt.gemm import compiled as engine_gemm

    monkeypatch.setattr(engine_gemm, "MAX_TILE", 77)
    monkeypatch.setattr(engine_gemm, "MIN_OUTPUTS_PER_THREAD", 64)
    monkeypatch.setenv("TCSMT_THREADS", "2")
    A, B = _operands(23, 96, 41, np.float16)
    C = RNG.standard_normal((23, 41)).astype(np.float32)
    hyp = "hopper/serial[split_k=2,split_tile=48,c_join=epilogue,beta=0.5,out=bf16]"
    want = tc.matmul(hyp, A, B, C, engine="numpy")
    got = tc.matmul(hyp, A, B, C, engine="compiled")
    assert _u(got).tolist() == _u(want).tolist()
