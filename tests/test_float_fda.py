"""The fp64 formulation of fused dot-add units (engine/float_fda.py) equals the model.

The compiled GEMM runner takes it for units where float_fda.applies on finite operand
tables; every test compares its D with the numpy interpreter of the model (element.py)
bit for bit, on the schedules of the engines' test matrix (tests/test_engine_gemm.py)
with finite operands, on random and extreme operands (subnormals, zeros of both signs,
cancellation, the largest values, products below e_zero's grid), on C holding Inf, NaN,
-0 and subnormals, and on results that overflow to Inf. The tables it reads are checked
against ml_dtypes' own conversions.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest
from ieee_proofs import bitwuzla_unsat

import tensorcore_smt as tc
from tensorcore_smt.engine import float_fda
from tensorcore_smt.formats import Format
from tensorcore_smt.gemm import compiled
from tensorcore_smt.gemm.emulate import prepare, resolve_hypothesis

RNG = np.random.default_rng(45)

DTYPES = {
    Format.BF16: ml_dtypes.bfloat16,
    Format.FP16: np.float16,
    Format.E4M3: ml_dtypes.float8_e4m3fn,
    Format.E5M2: ml_dtypes.float8_e5m2,
}


def _params(hyp: str, dt, K: int = 64):
    f = {v: k for k, v in DTYPES.items()}[dt]
    return prepare(resolve_hypothesis(hyp, None, None), f, f, K, None, None, None, None, None)


@pytest.fixture
def fast_calls(monkeypatch):
    """The fp64 chain kernels the runner asks for (made or cached), the formulation
    taken for 8-bit operands too (the runner leaves them to the general kernel, which
    is faster there)."""
    monkeypatch.setattr(compiled, "FLOAT_MIN_BITS", 8)
    calls = []
    real = compiled._float_chain_fn

    def spy(*args, **kw):
        calls.append(args[0])
        return real(*args, **kw)

    monkeypatch.setattr(compiled, "_float_chain_fn", spy)
    return calls


@pytest.mark.parametrize("fmt", list(DTYPES))
def test_decoded_tables_match_ml_dtypes(fmt):
    """Values: ml_dtypes' conversion of every finite pattern; exponents: the unbiased
    exponent of the leading one for normal values, emin for subnormals, ZERO_EXP for
    zeros."""
    d = float_fda.decoded(fmt)
    pats = np.arange(1 << fmt.spec.storage, dtype=np.uint64)
    ref = pats.astype({8: np.uint8, 16: np.uint16}[fmt.spec.storage]).view(DTYPES[fmt])
    ref = ref.astype(np.float64)
    assert np.array_equal(d.finite, np.isfinite(ref))
    fin = d.finite
    assert d.value is not None
    assert np.array_equal(d.value[fin].astype(np.float64), ref[fin])
    _, e = np.frexp(ref[fin])
    lead = (e - 1).astype(np.int64)
    want = np.maximum(lead, fmt.spec.emin)
    want[ref[fin] == 0] = float_fda.ZERO_EXP
    assert np.array_equal(d.exp[fin].astype(np.int64), want)


@pytest.mark.parametrize("fmt", list(DTYPES) + [Format.FP32])
def test_kernel_decoding_of_every_pattern(fmt):
    """The step's decoding compiled on its own (float_fda.decode_module): the value
    times 2^-rebias of every finite pattern is ml_dtypes' (numpy's for fp32: a sample
    of 2^20 patterns and the edges), the exponent the model's table (decoded)."""
    import ctypes

    from tensorcore_smt.engine import jit
    from tensorcore_smt.engine.kernel_ir import KERNEL

    w = fmt.spec.storage
    if w == 32:
        pats = np.concatenate(
            [RNG.integers(0, 1 << 32, 1 << 20), np.arange(1 << 12), (1 << 31) + np.arange(1 << 12)]
        ).astype(np.uint32)
        ref = pats.view(np.float32).astype(np.float64)
    else:
        u = {8: np.uint8, 16: np.uint16}[w]
        pats = np.arange(1 << w).astype(u)
        ref = pats.view(DTYPES[fmt]).astype(np.float64)
    fin = np.isfinite(ref)
    got = []
    for what in (0, 1):
        fn = jit.load(jit.compile_object(float_fda.decode_module(fmt, what)), KERNEL)
        out = np.empty(len(pats), dtype=np.uint64)
        proto = ctypes.CFUNCTYPE(
            None, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p
        )
        proto(fn)(0, len(pats), pats.ctypes.data, out.ctypes.data)
        got.append(out)
    value = got[0].view(np.float64) * 2.0 ** float_fda.rebias(fmt)
    assert np.array_equal(value[fin], ref[fin])
    exp = got[1].view(np.int64)
    _, e = np.frexp(ref[fin])
    want = np.maximum(e - 1, fmt.spec.emin).astype(np.int64)
    want[ref[fin] == 0] = float_fda.ZERO_EXP
    assert np.array_equal(exp[fin], want)


def _kernel_decoding(fmt: Format, what: int) -> np.ndarray:
    """float_fda.decode_module's output (uint64 bits) for every pattern of `fmt`."""
    import ctypes

    from tensorcore_smt.engine import jit
    from tensorcore_smt.engine.kernel_ir import KERNEL

    pats = np.arange(1 << fmt.spec.storage).astype({8: np.uint8, 16: np.uint16}[fmt.spec.storage])
    fn = jit.load(jit.compile_object(float_fda.decode_module(fmt, what)), KERNEL)
    out = np.empty(len(pats), dtype=np.uint64)
    proto = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)
    proto(fn)(0, len(pats), pats.ctypes.data, out.ctypes.data)
    return out


@pytest.mark.parametrize("fmt", list(DTYPES))
@pytest.mark.parametrize("normalised", [False, True])
def test_operand_tables_hold_the_kernels_decoding(fmt, normalised):
    """B's tables (the model's decode) hold, for every finite pattern, what the step's
    own decoding computes: the value (the decoding's times 2^rebias, exact in fp64;
    normalised: that times 2^-exponent, in [0, 2)) and the term exponent; so the
    table-driven kernel reads the operands the proved step reads."""
    fin = float_fda.decoded(fmt).finite
    pats = np.arange(1 << fmt.spec.storage).astype({8: np.uint8, 16: np.uint16}[fmt.spec.storage])
    value, exp = float_fda.operand_tables(pats.reshape(2, -1), fmt, normalised)
    assert value.dtype == np.float32 and exp.dtype == np.int16
    assert value.shape == exp.shape == (2, len(pats) // 2)
    want_v = _kernel_decoding(fmt, 0).view(np.float64) * 2.0 ** float_fda.rebias(fmt)
    want_e = _kernel_decoding(fmt, 1).view(np.int64)
    e = exp.reshape(-1).astype(np.int64)
    got_v = value.reshape(-1).astype(np.float64)
    if normalised:
        assert (np.abs(got_v) < 2).all()
        got_v = np.ldexp(got_v, np.where(e == float_fda.ZERO_EXP, 0, e))
    assert np.array_equal(got_v[fin].view(np.uint64), want_v[fin].view(np.uint64))
    assert np.array_equal(e[fin], want_e[fin])


def test_applies_to_nvidia_fda_units_and_not_to_others():
    for hyp, dt in (
        ("hopper", ml_dtypes.bfloat16),
        ("hopper/serial", np.float16),
        ("hopper/cublas-fp8", ml_dtypes.float8_e4m3fn),
        ("ampere", np.float16),
    ):
        assert float_fda.reasons(_params(hyp, dt).params) == [], hyp
    cases = {
        "cdna3": "alignment truncates",  # round-down alignment
        "hopper[align=exact]": "alignment truncates",
        "hopper[carry_bits=2]": "can wrap",
    }
    for hyp, why in cases.items():
        r = float_fda.reasons(_params(hyp, np.float16).params)
        assert any(why in x for x in r), (hyp, r)


def _extreme(M: int, K: int, N: int, dt) -> tuple[np.ndarray, np.ndarray]:
    """Operands spanning the format: subnormals, zeros of both signs, the largest
    finite values, a row that cancels another, scales far apart within a row."""
    fi = ml_dtypes.finfo(dt)
    tiny, big = float(fi.smallest_subnormal), float(fi.max)
    e = RNG.integers(int(np.log2(float(fi.smallest_normal))) - 3, int(np.log2(big)), (M, K))
    A = (RNG.standard_normal((M, K)) * np.exp2(e.astype(np.float64))).astype(dt)
    B = RNG.standard_normal((K, N)).astype(dt)
    A[0, :] = np.array([tiny, -tiny, 0.0, -0.0, big, -big] * K, dtype=np.float64)[:K].astype(dt)
    A[1, :] = -A[2, :]  # rows 1 and 2 cancel against the same column
    A[3, :] = 0.0
    A[4, : K // 2] = -0.0
    B[:, 0] = big
    B[:, 1] = tiny
    B[::3, 2] = -0.0
    return A, B


def _same(hyp: str, A, B, C=None) -> None:
    want = tc.matmul(hyp, A, B, C, engine="numpy")
    got = tc.matmul(hyp, A, B, C, engine="compiled")
    w = want.view(np.uint32) if want.dtype.itemsize == 4 else want.view(np.uint16)
    g = got.view(w.dtype)
    assert np.array_equal(g, w), f"{hyp}: {int((g != w).sum())} outputs differ"


HYPS = [
    ("hopper/serial", ml_dtypes.bfloat16, 96),
    ("hopper/serial", np.float16, 80),
    ("hopper/cublas-fp8", ml_dtypes.float8_e4m3fn, 256),
    ("hopper/serial", ml_dtypes.float8_e5m2, 64),
    ("ampere/serial", np.float16, 48),
    ("volta/serial", np.float16, 36),
    ("ampere/serial", ml_dtypes.bfloat16, 64),
    ("hopper/serial[split_k=3,split_tile=32,reduce=pairwise]", ml_dtypes.bfloat16, 96),
    ("hopper/serial[c_join=epilogue,beta=0.5,out=bf16]", np.float16, 40),
]


@pytest.mark.parametrize("hyp,dt,K", HYPS, ids=[f"{h}-{np.dtype(d).name}" for h, d, _ in HYPS])
def test_extreme_operands_equal_the_model(hyp, dt, K, fast_calls):
    A, B = _extreme(8, K, 10, dt)
    C = RNG.standard_normal((8, 10)).astype(np.float32)
    C.flat[:6] = [np.inf, -np.inf, np.nan, -0.0, 1e-42, 3.4e38]
    _same(hyp, A, B)
    _same(hyp, A, B, C)
    assert fast_calls, "the fp64 formulation did not run"


@pytest.mark.parametrize("dt", [ml_dtypes.bfloat16, np.float16])
def test_overflow_to_inf_and_on_from_inf(dt, fast_calls):
    """Finite products whose sum overflows fp32 (bf16) or a large C (fp16): the chain
    then carries Inf into later steps; cancellation to exactly zero gives +0."""
    K = 64
    big = float(ml_dtypes.finfo(dt).max)
    A = np.full((3, K), big, dtype=np.float64).astype(dt)
    A[1, :] = -A[1, :]
    A[2, ::2] = -A[2, ::2]  # pairs cancel: +0 after every step
    B = np.full((K, 4), big, dtype=np.float64).astype(dt)
    C = np.array([[3.4e38, -3.4e38, 0.0, -0.0]] * 3, dtype=np.float32)
    _same("hopper/serial", A, B)
    _same("hopper/serial", A, B, C)
    assert fast_calls


@pytest.fixture
def table_calls(monkeypatch):
    """The fp64 chain kernels the runner asks for, with B's decoding read from tables
    (compiled.float_tables) for every format and size, 8-bit operands included."""
    monkeypatch.setattr(compiled, "FLOAT_MIN_BITS", 8)
    monkeypatch.setattr(compiled, "float_tables", lambda *a: True)
    calls = []
    real = compiled._float_chain_fn

    def spy(*args, **kw):
        calls.append(kw.get("tables", False))
        return real(*args, **kw)

    monkeypatch.setattr(compiled, "_float_chain_fn", spy)
    return calls


TABLE_HYPS = [
    ("hopper/serial", ml_dtypes.bfloat16, 96),
    ("hopper/serial", np.float16, 80),
    ("hopper/cublas-fp8", ml_dtypes.float8_e4m3fn, 256),
    ("volta/serial", np.float16, 36),
    ("hopper/serial[split_k=3,split_tile=32,reduce=pairwise]", ml_dtypes.bfloat16, 96),
]


@pytest.mark.parametrize(
    "hyp,dt,K", TABLE_HYPS, ids=[f"{h}-{np.dtype(d).name}" for h, d, _ in TABLE_HYPS]
)
def test_table_kernel_equals_the_model(hyp, dt, K, table_calls):
    """B's values and exponents from tables: D equals the numpy interpreter's bit for
    bit on extreme operands (subnormals, signed zeros, the largest values, cancelling
    rows; C with Inf, NaN, -0, subnormals) and on random ones over the whole exponent
    range, with more than one run of lanes (N > RUN) and groups of rows."""
    A, B = _extreme(8, K, 10, dt)
    C = RNG.standard_normal((8, 10)).astype(np.float32)
    C.flat[:6] = [np.inf, -np.inf, np.nan, -0.0, 1e-42, 3.4e38]
    _same(hyp, A, B)
    _same(hyp, A, B, C)
    fi = ml_dtypes.finfo(dt)
    lo = int(np.log2(float(fi.smallest_subnormal)))
    M, N = 20, compiled.RUN + 37
    A = (RNG.standard_normal((M, K)) * np.exp2(RNG.integers(lo, 4, (M, K)))).astype(dt)
    B = (RNG.standard_normal((K, N)) * np.exp2(RNG.integers(lo, 4, (K, N)))).astype(dt)
    B[:, 5] = 0.0
    _same(hyp, A, B)
    assert table_calls and all(table_calls)


@pytest.mark.parametrize(
    "hyp,dt",
    [
        ("hopper[e_zero=-100]/serial", ml_dtypes.bfloat16),
        ("hopper[e_zero=-10]/serial", np.float16),
        ("hopper[e_zero=none]/serial", ml_dtypes.bfloat16),
    ],
)
@pytest.mark.parametrize("tables", [False, True])
def test_zero_products_above_the_others_equal_the_model(hyp, dt, tables, monkeypatch, fast_calls):
    """e_zero above C's least exponent and above small products (the presets put it
    below both, where it never wins), or unset: groups with no zero product, some, and
    only zero ones, C zero or tiny, so that e_zero decides e_max and with it every
    term's grid."""
    monkeypatch.setattr(compiled, "float_tables", lambda *a: tables)
    K, M, N = 48, 6, 7
    fi = ml_dtypes.finfo(dt)
    A = (RNG.standard_normal((M, K)) * float(fi.smallest_normal) * 4).astype(dt)
    B = (RNG.standard_normal((K, N)) * 2.0**-4).astype(dt)
    A[1, ::5] = 0.0  # some zero products in every group
    A[2, 16:32] = 0.0  # a group of zero products only, after a tiny sum
    B[:, 3] = -0.0
    A[3, :] = RNG.standard_normal(K).astype(dt)  # products above e_zero
    A[3, 7] = 0.0
    C = np.zeros((M, N), dtype=np.float32)
    e_zero = _params(hyp, dt).params.e_zero or -110  # unset: zero terms never win
    C[:, 1] = 2.0 ** (e_zero - 10)  # below e_zero: kept on its own grid, not on e_zero's
    C[:, 2] = -(2.0 ** (e_zero + 3))
    _same(hyp, A, B)
    _same(hyp, A, B, C)
    assert fast_calls


def test_fp32_products_where_the_parameters_allow():
    """fp16 and FP8 products fit fp32 (at most 22 significant bits, normal, the scale
    normal for every e_max of a group with a nonzero product, a group's sum within int32);
    bf16's do not (products down to 2^-266), nor fp16 with F = 40 (terms up to 2^42:
    a group's sum past int32)."""
    for hyp, dt in (
        ("hopper", np.float16),
        ("volta", np.float16),
        ("hopper/cublas-fp8", ml_dtypes.float8_e4m3fn),
        ("hopper/serial", ml_dtypes.float8_e5m2),
    ):
        assert float_fda.fp32_reasons(_params(hyp, dt).params) == [], hyp
    r = float_fda.fp32_reasons(_params("hopper", ml_dtypes.bfloat16).params)
    assert any("least product" in x for x in r), r
    p = _params("hopper", np.float16).params
    r = float_fda.fp32_reasons(dataclasses.replace(p, F=40))
    assert any("32-bit lanes" in x for x in r), r


@pytest.mark.parametrize(
    "hyp,dt",
    [
        ("hopper/serial", ml_dtypes.bfloat16),
        ("hopper/serial", np.float16),
        ("hopper/cublas-fp8", ml_dtypes.float8_e4m3fn),
    ],
)
def test_rows_of_a_multiple_of_256_columns_are_padded(hyp, dt):
    """B with 512 columns: the runner's copy of B (and of its tables) has longer rows
    (compiled.row_length), and every kernel (fp64, fp32 products from tables, general)
    still equals the numpy interpreter."""
    assert compiled.row_length(512) > 512 and compiled.row_length(500) == 500
    fi = ml_dtypes.finfo(dt)
    lo = int(np.log2(float(fi.smallest_subnormal)))
    M, K, N = 70, 128, 512
    A = (RNG.standard_normal((M, K)) * np.exp2(RNG.integers(lo, 4, (M, K)))).astype(dt)
    B = (RNG.standard_normal((K, N)) * np.exp2(RNG.integers(lo, 4, (K, N)))).astype(dt)
    _same(hyp, A, B)


def test_tables_where_they_pay():
    """Tables and fp32 products for fp16 and e4m3 (own values) with at least
    FLOAT_TABLE_ROWS rows of D per column of B, for bf16 (normalised values: its
    products do not fit fp32) with NORMALISED_TABLE_ROWS; not for fewer rows."""
    rows = compiled.FLOAT_TABLE_ROWS
    fp16 = _params("hopper", np.float16).params
    e4m3 = _params("hopper/cublas-fp8", ml_dtypes.float8_e4m3fn).params
    bf16 = _params("hopper", ml_dtypes.bfloat16).params
    assert compiled.float_tables(fp16, rows * 100, 100)
    assert compiled.float_tables(e4m3, rows * 100, 100)
    assert not compiled.float_tables(fp16, rows * 100 - 1, 100)
    assert not compiled.float_tables(bf16, rows * 100, 100)
    assert compiled.float_tables(bf16, compiled.NORMALISED_TABLE_ROWS * 100, 100)
    assert float_fda.tables_normalised(bf16) and not float_fda.tables_normalised(fp16)


def test_runner_takes_fp32_tables_for_e4m3_with_enough_rows():
    """Without the fixtures: e4m3 with FLOAT_TABLE_ROWS rows runs the table kernel with
    fp32 products (FLOAT_MIN_BITS keeps fewer rows on the general kernel), equal to the
    numpy interpreter."""
    seen = []
    real = compiled._float_chain_fn
    compiled._float_chain_fn = lambda *a, **k: seen.append(k.get("tables")) or real(*a, **k)
    try:
        dt = ml_dtypes.float8_e4m3fn
        A = RNG.standard_normal((compiled.FLOAT_TABLE_ROWS, 256)).astype(dt)
        B = RNG.standard_normal((256, 40)).astype(dt)
        _same("hopper/cublas-fp8", A, B)
    finally:
        compiled._float_chain_fn = real
    assert seen and all(seen)


def test_flush_to_zero_environment_falls_back_to_the_model_kernel(fast_calls):
    """With x86 flush-to-zero / denormals-are-zero set (torch.set_flush_denormal), the
    step's fp32 -> fp64 conversion would read subnormal operands as 0: the runner must
    not take the fp64 formulation then, and D still equals the numpy interpreter's."""
    torch = pytest.importorskip("torch")
    A, B = _extreme(6, 80, 300, np.float16)
    want = tc.matmul("hopper/serial", A, B, engine="numpy")
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU has no flush-to-zero control")
    try:
        got = tc.matmul("hopper/serial", A, B, engine="compiled")
    finally:
        torch.set_flush_denormal(False)
    assert not fast_calls
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_non_finite_operands_fall_back(fast_calls):
    """A NaN or Inf in A: the general kernel runs (and equals the model)."""
    A, B = _extreme(6, 32, 5, np.float16)
    A[0, 0] = np.inf
    A[1, 3] = np.nan
    _same("hopper/serial", A, B)
    assert not fast_calls


def test_runner_takes_it_for_16_bit_operands_only():
    """Without the fixture: bf16 runs the fp64 kernel, e4m3 the general one."""
    seen = []
    real = compiled._float_chain_fn
    compiled._float_chain_fn = lambda *a, **k: seen.append(a[0]) or real(*a, **k)
    try:
        for hyp, dt in (
            ("hopper/serial", ml_dtypes.bfloat16),
            ("hopper/serial", ml_dtypes.float8_e4m3fn),
        ):
            A = RNG.standard_normal((4, 64)).astype(dt)
            B = RNG.standard_normal((64, 3)).astype(dt)
            _same(hyp, A, B)
    finally:
        compiled._float_chain_fn = real
    assert [p.a_fmt for p in seen] == [Format.BF16]


def test_random_bulk_equal_the_model(fast_calls):
    """Many outputs over wide exponent ranges, both formats of 16 bits."""
    for dt in (ml_dtypes.bfloat16, np.float16):
        fi = ml_dtypes.finfo(dt)
        lo = int(np.log2(float(fi.smallest_subnormal)))
        M, K, N = 24, 128, 40
        A = (RNG.standard_normal((M, K)) * np.exp2(RNG.integers(lo, 4, (M, K)))).astype(dt)
        B = (RNG.standard_normal((K, N)) * np.exp2(RNG.integers(lo // 2, 4, (K, N)))).astype(dt)
        _same("hopper/serial", A, B)
    assert fast_calls


def _term_lemma(p, fmt: Format, fp32: bool = False):
    """z3 query: some finite a, b of `fmt` and e_max at least the product's exponent
    (up to the unit's largest) where trunc(fp64(a') * fp64(b') * 2^(F - e_max +
    rebias)) differs from the model's aligned product term (model/terms.py align of
    product_addend, signed): the fp64 formulation's step 2-3 for one term."""
    import z3

    from tensorcore_smt.bv.symbolic import SymbolicBackend
    from tensorcore_smt.bv.to_z3 import to_z3
    from tensorcore_smt.formats import EXP_W, decode
    from tensorcore_smt.model.terms import Addend, AlignMode, ProductExponent, align, product_addend

    s = SymbolicBackend()
    w, F = fmt.spec.storage, p.F
    a, b, e_max = s.var("a", w), s.var("b", w), s.var("emax", EXP_W)
    ua, ub = decode(a, fmt), decode(b, fmt)
    t = product_addend(ua, ub, ProductExponent.UNNORMALIZED)
    win = max(F, t.fb) + t.int_bits + 1
    kept, _ = align(
        Addend(t.sign, t.mag, t.exp, t.fb, t.is_zero), e_max, F, win, AlignMode.TRUNCATE
    )
    signed = t.sign.ite(-kept.resize(64), kept.resize(64))
    finite = ~(ua.is_nan | ua.is_inf | ub.is_nan | ub.is_inf)
    (model, exp, fin), env = to_z3([signed.v, t.exp.v, finite.v])

    def value(x):  # float_fda._Ir.value: the fields placed as fp32's
        x32 = z3.ZeroExt(32 - w, x)
        mag = (x32 & ((1 << (w - 1)) - 1)) << (23 - fmt.spec.mbits)
        sign = (x32 & (1 << (w - 1))) << (32 - w)
        f32 = z3.fpBVToFP(mag | sign, z3.Float32())
        return z3.fpToFP(z3.RNE(), f32, z3.Float64())

    if fp32:  # float_fda.fp32_reasons: own values, product and scale in fp32
        r = z3.fpBVToFP(z3.BitVecVal((float_fda.rebias(fmt) + 127) << 23, 32), z3.Float32())

        def value32(x):
            placed = z3.fpToFP(z3.RNE(), value(x), z3.Float32())
            return z3.fpMul(z3.RNE(), placed, r)

        prod = z3.fpMul(z3.RNE(), value32(env["a"]), value32(env["b"]))
        emax = z3.If(env["emax"] < F - 127, z3.BitVecVal(F - 127, EXP_W), env["emax"])
        arg = z3.SignExt(16, F - emax) + 127
        bits = z3.Concat(z3.BitVecVal(0, 1), z3.Extract(7, 0, arg), z3.BitVecVal(0, 23))
        x = z3.fpMul(z3.RNE(), prod, z3.fpBVToFP(bits, z3.Float32()))
        fast = z3.SignExt(32, z3.fpToSBV(z3.RTZ(), x, z3.BitVecSort(32)))
    else:
        prod = z3.fpMul(z3.RNE(), value(env["a"]), value(env["b"]))
        arg = z3.SignExt(16, F - env["emax"]) + 2 * float_fda.rebias(fmt) + 1023
        bits = z3.Concat(z3.BitVecVal(0, 1), z3.Extract(10, 0, arg), z3.BitVecVal(0, 52))
        x = z3.fpMul(z3.RNE(), prod, z3.fpBVToFP(bits, z3.Float64()))
        fast = z3.fpToSBV(z3.RTZ(), x, z3.BitVecSort(64))
    hi = float_fda.exponent_range(p)[1]
    return z3.And(fin, exp <= env["emax"], env["emax"] <= hi, fast != model)


PROOFS = [("hopper", ml_dtypes.float8_e4m3fn), ("hopper", ml_dtypes.float8_e5m2)]
"""Units whose term identity a solver proves in seconds in one query. For bf16 and fp16
(a 53-bit fp64 multiplier of 8- and 11-bit significands) neither bitwuzla nor z3
answered within 6-7 minutes; tests/test_float_fda_proof.py splits their query by a's
significand and proves c's term too."""


@pytest.mark.parametrize("hyp,dt", PROOFS)
def test_solver_proves_the_term_identity(hyp, dt):
    """bitwuzla: no finite a, b and e_max where the fp64 term differs from the model's
    (unsat), for the unit's F and exponent range (e4m3: about a second)."""
    p = _params(hyp, dt).params
    assert bitwuzla_unsat(_term_lemma(p, p.a_fmt))


@pytest.mark.parametrize("hyp,dt", PROOFS)
def test_solver_proves_the_fp32_term_identity(hyp, dt):
    """bitwuzla, for the products in fp32 (float_fda.fp32_reasons holds): no finite a, b
    and e_max where trunc(a b 2^(F - max(e_max, F - 127))), each step in fp32 on the
    operands' own values, differs from the model's term (unsat)."""
    p = _params(hyp, dt).params
    assert float_fda.fp32_reasons(p) == []
    assert bitwuzla_unsat(_term_lemma(p, p.a_fmt, fp32=True))


@pytest.mark.slow
@pytest.mark.parametrize("hyp,dt", PROOFS)
def test_a_second_solver_agrees_on_the_term_identity(hyp, dt):
    """z3 on the same query: unsat too, so two solvers agree (e4m3 about 46 s, e5m2
    about 29 s on one core)."""
    import z3

    p = _params(hyp, dt).params
    solver = z3.Solver()
    solver.add(_term_lemma(p, p.a_fmt))
    assert solver.check() == z3.unsat


@pytest.mark.parametrize("fp32", [False, True])
def test_solver_finds_a_rounding_conversion_wrong(monkeypatch, fp32):
    """The same query (fp64, or the products in fp32) with fptosi rounding to nearest
    instead of truncating: sat."""
    import z3

    p = _params("hopper", ml_dtypes.float8_e4m3fn).params
    monkeypatch.setattr(z3, "RTZ", z3.RNE)
    assert not bitwuzla_unsat(_term_lemma(p, p.a_fmt, fp32))


@pytest.mark.parametrize("fmt", [Format.BF16, Format.FP16, Format.E4M3, Format.E5M2])
def test_finite_table_agrees_with_the_decode_of_every_pattern(fmt):
    """The one-pass check (x & m == m) says what the model's decode says: tables of
    random finite patterns, then each special pattern planted at a random place (one
    beyond the first chunk too)."""
    finite = float_fda.decoded(fmt).finite
    pats = np.arange(1 << fmt.spec.storage)
    dtype = np.uint16 if fmt.spec.storage > 8 else np.uint8
    table = RNG.choice(pats[finite], size=(3, float_fda.CHUNK)).astype(dtype)
    assert float_fda.finite_table(table, fmt)
    for x in pats[~finite]:
        t = table.copy()
        t.reshape(-1)[RNG.integers(0, t.size)] = x
        assert not float_fda.finite_table(t, fmt), hex(x)
    if fmt == Format.E4M3:
        assert float_fda.special_mask(fmt) is None  # its NaN: the table look-up
