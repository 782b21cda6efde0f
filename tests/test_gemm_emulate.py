"""tensorcore_smt.matmul: the vectorised emulator against element.py run per output on
the concrete interpreter, batch dimensions, zero-padding of K, dtypes and bad input."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt import UserError
from tensorcore_smt.bv.concrete import CONCRETE
from tensorcore_smt.bv.core import BV
from tensorcore_smt.engine import Engine
from tensorcore_smt.engine.choice import COMPILE_ROWS
from tensorcore_smt.gemm.element import element

RNG = np.random.default_rng(2323)
U = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def _u(x: np.ndarray) -> np.ndarray:
    return x.view(U[x.dtype.itemsize * 8])


def _per_element(run, A, B, C=None, c_fmt=None) -> np.ndarray:
    """element() on the concrete interpreter, one output at a time (the reference)."""
    p, plan = run.params, run.plan
    M, K = A.shape
    N = B.shape[1]
    Kp = plan.n_blocks * p.K
    a = np.zeros((M, Kp), dtype=np.uint64)
    a[:, :K] = _u(A)
    b = np.zeros((Kp, N), dtype=np.uint64)
    b[:K] = _u(B)
    wa, wb = p.a_fmt.spec.storage, p.b_fmt.spec.storage
    out = np.zeros((M, N), dtype=np.uint64)
    for i in range(M):
        for j in range(N):
            cb = None
            if C is not None:
                cb = BV(CONCRETE, int(_u(C)[i, j]), c_fmt.spec.storage)
            d = element(
                [BV(CONCRETE, int(x), wa) for x in a[i]],
                [BV(CONCRETE, int(x), wb) for x in b[:, j]],
                cb,
                p,
                plan,
                run.schedule,
                c_fmt,
            )
            out[i, j] = int(d.v)
    return out


CASES = [
    ("hopper", np.float16, "serial", 40),
    ("hopper", ml_dtypes.bfloat16, "serial[order=descending]", 48),
    ("hopper", ml_dtypes.float8_e4m3fn, "serial[promote=64]", 200),
    ("hopper", ml_dtypes.float8_e5m2, "serial[split_k=3,split_tile=32,reduce=pairwise]", 96),
    ("ampere", np.float16, "serial[split_k=2,split=interleaved,split_tile=32,promote=32]", 128),
    ("ampere", np.float32, "serial[alpha=0.5,out=bf16]", 24),
    ("cdna3", np.float16, "serial[epilogue=mul-add,alpha=3]", 20),
    ("ada", ml_dtypes.float8_e4m3fn, "cublas-fp8[out=e4m3]", 130),
]


@pytest.mark.parametrize("arch,dt,sched,K", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_vectorised_equals_element_per_output(arch, dt, sched, K):
    M, N = 3, 4
    A = (RNG.standard_normal((M, K)) * 2.0 ** RNG.integers(-6, 6, (M, K))).astype(dt)
    B = RNG.standard_normal((K, N)).astype(dt)
    info: list = []
    D = tc.matmul(f"{arch}/{sched}", A, B, run_info=info)
    want = _per_element(info[0], A, B)
    assert (_u(D).astype(np.uint64) == want).all()


def test_c_in_chain_and_in_epilogue():
    A = RNG.standard_normal((4, 32)).astype(np.float16)
    B = RNG.standard_normal((32, 5)).astype(np.float16)
    C = RNG.standard_normal((4, 5)).astype(np.float32)
    info: list = []
    D = tc.matmul("hopper", A, B, C, run_info=info)
    assert info[0].plan.c_in_chain
    assert (_u(D) == _per_element(info[0], A, B, C, tc.Format.FP32)).all()
    info = []
    C16 = C.astype(ml_dtypes.bfloat16)
    D = tc.matmul("hopper/serial[c_join=epilogue,out=bf16]", A, B, C16, beta=0.5, run_info=info)
    assert D.dtype == ml_dtypes.bfloat16
    assert (_u(D) == _per_element(info[0], A, B, C16, tc.Format.BF16)).all()
    # the chain reads C in the instruction's c format: an fp16 C is widened exactly
    D1 = tc.matmul("hopper", A, B, C.astype(np.float16))
    D2 = tc.matmul("hopper", A, B, C.astype(np.float16).astype(np.float32))
    assert (_u(D1) == _u(D2)).all()


def test_batch_dimensions_broadcast():
    A = RNG.standard_normal((2, 3, 5, 16)).astype(np.float16)
    B = RNG.standard_normal((3, 16, 4)).astype(np.float16)
    D = tc.matmul("ampere", A, B)
    assert D.shape == (2, 3, 5, 4)
    for i in range(2):
        for j in range(3):
            assert (_u(D[i, j]) == _u(tc.matmul("ampere", A[i, j], B[j]))).all()


def test_k_is_zero_padded_to_the_instruction():
    A = RNG.standard_normal((3, 21)).astype(np.float16)
    B = RNG.standard_normal((21, 2)).astype(np.float16)
    Ap = np.concatenate([A, np.zeros((3, 11), np.float16)], axis=1)
    Bp = np.concatenate([B, np.zeros((11, 2), np.float16)], axis=0)
    assert (_u(tc.matmul("hopper", A, B)) == _u(tc.matmul("hopper", Ap, Bp))).all()


def test_bit_patterns_need_the_instruction():
    A = RNG.standard_normal((2, 16)).astype(np.float16)
    B = RNG.standard_normal((16, 2)).astype(np.float16)
    instr = "m16n8k16.f32.f16.f16.f32"
    D = tc.matmul("ampere", _u(A), _u(B), instr=instr)
    assert (D == tc.matmul("ampere", A, B)).all()
    with pytest.raises(UserError, match="need instr"):
        tc.matmul("ampere", _u(A), _u(B))


def test_scales_make_alpha():
    A = RNG.standard_normal((2, 64)).astype(ml_dtypes.float8_e4m3fn)
    B = RNG.standard_normal((64, 3)).astype(ml_dtypes.float8_e4m3fn)
    plain = tc.matmul("hopper/cublas-fp8", A, B)
    scaled = tc.matmul("hopper/cublas-fp8", A, B, scale_a=0.25, scale_b=4.0)
    assert (_u(plain) == _u(scaled)).all()  # 0.25 * 4 = 1 exactly
    halved = tc.matmul("hopper/cublas-fp8", A, B, scale_a=0.5, scale_b=1.0)
    assert (halved == plain * np.float32(0.5)).all()


def test_fp8_serial_and_promoted_differ_at_k256():
    """Random search: fast accumulation (one F = 13 chain) and promotion every 128
    differ on some K = 256 input (solver-found witnesses live with `tcsmt diff`)."""
    A = RNG.standard_normal((16, 256)).astype(ml_dtypes.float8_e4m3fn)
    B = RNG.standard_normal((256, 16)).astype(ml_dtypes.float8_e4m3fn)
    fast = tc.matmul("hopper/serial", A, B)
    promoted = tc.matmul("hopper/serial[promote=128]", A, B)
    exact = A.astype(np.float64) @ B.astype(np.float64)
    assert (fast != promoted).sum() > 0
    # promotion is the more accurate of the two on these inputs
    assert np.abs(promoted - exact).mean() < np.abs(fast - exact).mean()


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda A, B: tc.matmul("hopper", A, B[:15]), "inner dimensions"),
        (lambda A, B: tc.matmul("hopper", A[0], B), "at least 2 dimensions"),
        (lambda A, B: tc.matmul("hopper", A.astype(np.complex64), B), "not an operand dtype"),
        (lambda A, B: tc.matmul("volta", A.astype(ml_dtypes.bfloat16), B), "volta has no"),
        (lambda A, B: tc.matmul("hopper/nosuch", A, B), "unknown schedule"),
        (lambda A, B: tc.matmul("hopper/serial[split_k=99]", A, B), "split_k=99"),
        (lambda A, B: tc.matmul("hopper/serial[split_k=4]", A, B), "split_k=4: K=16"),
        (lambda A, B: tc.matmul("hopper", A, B, np.zeros((3, 3), np.float32)), "broadcast"),
        (lambda A, B: tc.matmul("hopper", A, B, engine="gpu"), "engine"),
        (
            lambda A, B: tc.matmul("hopper", A, B, instr="m16n8k16.f32.bf16.bf16.f32"),
            "got a float16 array for a bf16 operand",  # the intake rule of mma too
        ),
    ],
)
def test_bad_input_is_one_user_error(call, match):
    A = RNG.standard_normal((2, 16)).astype(np.float16)
    B = RNG.standard_normal((16, 2)).astype(np.float16)
    with pytest.raises(UserError, match=match) as e:
        call(A, B)
    assert "\n" not in str(e.value)


FIELD_WITNESSES = [
    # field, dtype, K, base schedule, changed schedule, with C
    ("order", np.float16, 256, "serial", "serial[order=descending]", False),
    ("promote", ml_dtypes.float8_e4m3fn, 256, "serial", "serial[promote=128]", False),
    ("split_k", np.float16, 256, "serial", "serial[split_k=2]", False),
    (
        "split",
        np.float16,
        256,
        "serial[split_k=2,split_tile=32]",
        "serial[split_k=2,split_tile=32,split=interleaved]",
        False,
    ),
    (
        "split_tile",
        np.float16,
        256,
        "serial[split_k=2,split=interleaved,split_tile=32]",
        "serial[split_k=2,split=interleaved,split_tile=64]",
        False,
    ),
    (
        "reduce",
        np.float16,
        384,
        "serial[split_k=3]",
        "serial[split_k=3,reduce=pairwise]",
        False,
    ),
    ("c_join", np.float16, 64, "serial[c_join=chain]", "serial[c_join=epilogue]", True),
    ("alpha", np.float16, 64, "serial", "serial[alpha=3]", False),
    ("beta", np.float16, 64, "serial[c_join=epilogue]", "serial[c_join=epilogue,beta=0.5]", True),
    (
        "epilogue",
        np.float16,
        64,
        "serial[alpha=0.1,c_join=epilogue]",
        "serial[alpha=0.1,c_join=epilogue,epilogue=mul-add]",
        True,
    ),
    ("out", np.float16, 64, "serial", "serial[out=bf16]", False),
    ("saturate", np.float16, 64, "serial[out=e4m3]", "serial[out=e4m3,saturate=false]", False),
]


@pytest.mark.parametrize(
    "field,dt,K,base,changed,with_c", FIELD_WITNESSES, ids=[f[0] for f in FIELD_WITNESSES]
)
def test_every_schedule_field_changes_some_output(field, dt, K, base, changed, with_c):
    """A witness for each field, found by random search: the two schedules differ in
    that field only and give different D on these matrices."""
    from tensorcore_smt.gemm.measure import differ

    rng = np.random.default_rng(7)
    scale = 2.0 ** rng.integers(-4, 12, (32, K)) if field == "saturate" else 1.0
    A = (rng.standard_normal((32, K)) * scale).astype(dt)
    B = rng.standard_normal((K, 32)).astype(dt)
    C = rng.standard_normal((32, 32)).astype(np.float32) if with_c else None
    d0 = tc.matmul(f"hopper/{base}", A, B, C)
    d1 = tc.matmul(f"hopper/{changed}", A, B, C)
    assert differ(d0, d1) > 0


def test_compiled_engine_hook(monkeypatch):
    """matmul hands the compiled GEMM runner (tensorcore_smt.gemm.compiled.run_gemm)
    the operand tables and the outputs' indices: a runner that runs element() per
    output on the concrete interpreter reproduces the numpy engine; engine="compiled"
    without a runner (the module missing, or without run_gemm) is one UserError.
    engine=None takes engine/choice.py's default: $TCSMT_ENGINE when set, else numpy
    below COMPILE_ROWS instruction steps."""
    import sys
    import types

    calls = []

    def run_gemm(p, plan, schedule, a_t, b_t, outputs, c_bits, c_fmt, out):
        a_idx, b_idx = outputs.rows(0, len(outputs))
        calls.append(len(a_idx))
        wa, wb = p.a_fmt.spec.storage, p.b_fmt.spec.storage
        for o in range(len(a_idx)):
            a = [BV(CONCRETE, int(x), wa) for x in a_t[:, a_idx[o]]]
            b = [BV(CONCRETE, int(x), wb) for x in b_t[:, b_idx[o]]]
            c = None if c_bits is None else BV(CONCRETE, int(c_bits[o]), c_fmt.spec.storage)
            out[o] = int(element(a, b, c, p, plan, schedule, c_fmt).v)

    name = "tensorcore_smt.gemm.compiled"
    A1, B1 = np.ones((2, 16), np.float16), np.ones((16, 2), np.float16)
    monkeypatch.setitem(sys.modules, name, None)  # the module cannot be imported
    with pytest.raises(UserError, match="engine='compiled' is not available here"):
        tc.matmul("hopper", A1, B1, engine="compiled")
    assert calls == []
    monkeypatch.setitem(sys.modules, name, types.SimpleNamespace())  # no run_gemm
    with pytest.raises(UserError, match="engine='compiled' is not available here"):
        tc.matmul("hopper", A1, B1, engine="compiled")
    monkeypatch.setitem(sys.modules, name, types.SimpleNamespace(run_gemm=run_gemm))
    A = RNG.standard_normal((2, 2, 40)).astype(np.float16)
    B = RNG.standard_normal((40, 3)).astype(np.float16)
    C = RNG.standard_normal((2, 3)).astype(ml_dtypes.bfloat16)
    for hyp in ("hopper", "hopper/serial[promote=16,out=bf16]"):
        want = tc.matmul(hyp, A, B, C, engine="numpy")
        got = tc.matmul(hyp, A, B, C, engine="compiled")
        assert _u(got).tolist() == _u(want).tolist()
    assert calls == [12, 12]
    monkeypatch.delenv("TCSMT_ENGINE", raising=False)
    info: list = []
    tc.matmul("hopper", A, B, run_info=info)  # engine=None: small GEMMs stay on numpy
    assert calls == [12, 12] and COMPILE_ROWS > 12 * 3 and info[-1].engine == Engine.NUMPY
    monkeypatch.setenv("TCSMT_ENGINE", "compiled")  # the default replaced
    tc.matmul("hopper", A, B, run_info=info)
    assert calls == [12, 12, 12] and info[-1].engine == Engine.COMPILED
    tc.matmul("hopper", A, B, engine=Engine.NUMPY, run_info=info)  # asked for: no default
    assert calls == [12, 12, 12] and info[-1].engine == Engine.NUMPY
    with pytest.raises(UserError, match="unknown engine 'llvm'"):
        tc.matmul("hopper", A, B, engine="llvm")


COMPILED = [
    ("hopper", np.float16, 40, None),
    ("hopper/serial[order=descending,out=fp16]", np.float16, 64, "chain"),
    (
        "hopper/serial[promote=64,split_k=3,split_tile=32,reduce=pairwise,out=bf16]",
        ml_dtypes.float8_e4m3fn,
        200,
        "epilogue",
    ),
    (
        "hopper/cublas-fp8[split=interleaved,split_k=2,split_tile=64]",
        ml_dtypes.float8_e4m3fn,
        256,
        None,
    ),
]


@pytest.mark.parametrize("hyp,dt,K,c", COMPILED, ids=[x[0] for x in COMPILED])
def test_compiled_engine_equals_numpy(hyp, dt, K, c):
    """matmul on the compiled engine's GEMM runner gives the numpy engine's bits, batch
    dimensions, zero-padding, scales and C included."""
    rng = np.random.default_rng(K)
    A = (rng.standard_normal((2, 5, K)) * 2.0 ** rng.integers(-8, 8, (2, 5, K))).astype(dt)
    B = rng.standard_normal((K, 7)).astype(dt)
    C = None
    if c == "chain":
        C = rng.standard_normal((5, 7)).astype(np.float32)
    elif c == "epilogue":
        C = rng.standard_normal((2, 5, 7)).astype(ml_dtypes.bfloat16)
    want = tc.matmul(hyp, A, B, C, engine="numpy", scale_a=0.5 if c == "epilogue" else None)
    got = tc.matmul(hyp, A, B, C, engine="compiled", scale_a=0.5 if c == "epilogue" else None)
    assert _u(got).tolist() == _u(want).tolist()
