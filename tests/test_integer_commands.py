"""Integer, AMD and x86 instructions in the GEMM commands and the API: random integer
matrices, the library default of every preset per input format, mixed signed/unsigned
operands, float arrays read by value, integer alpha/beta, integer bounds and integer
matmuls inside a torch model. Every result is checked against integer arithmetic done
here in numpy int64 / Python ints, independently of the model."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import tensorcore_smt as tc
from tensorcore_smt.cli import main
from tensorcore_smt.formats import Format
from tensorcore_smt.gemm.arrays import fits
from tensorcore_smt.gemm.hypothesis import default_instruction
from tensorcore_smt.gemm.measure import random_integers
from tensorcore_smt.intake import FORMAT_DTYPE
from tensorcore_smt.model.params import BitOp, IntClamp
from tensorcore_smt.spec.presets import PRESETS


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def values(x: np.ndarray, fmt: Format) -> np.ndarray:
    """The integers an operand array holds: int8 arrays as they are, unsigned arrays as
    `fmt`'s bit patterns (two's complement for signed formats)."""
    if x.dtype.kind == "i":
        return x.astype(np.int64)
    w = fmt.spec.storage
    v = x.astype(np.int64) & ((1 << w) - 1)
    if fmt.spec.signed:
        v = np.where(v >= 1 << (w - 1), v - (1 << w), v)
    return v


def s32(x: np.ndarray) -> np.ndarray:
    """Integers wrapped into two's-complement s32."""
    return ((np.asarray(x, dtype=object) + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int64)


def reference(a: np.ndarray, b: np.ndarray, op: BitOp) -> np.ndarray:
    """sum_k a_k op b_k exactly: products, or popc of AND / XOR of single bits."""
    if op == BitOp.XOR:
        return (a[:, :, None] ^ b[None, :, :]).sum(axis=1)
    return a @ b  # AND of bits is their product


def integer_instructions(arch: str, clamp: IntClamp | None = IntClamp.WRAP):
    """The dense integer instructions of a preset whose c and d formats agree."""
    for inst in PRESETS[arch].instructions.values():
        p = inst.params
        if not p.a_fmt.spec.is_integer or p.c_fmt != p.d_fmt or inst.name.startswith("mma.sp"):
            continue
        if clamp is None or p.int_clamp == clamp:
            yield inst


# -- defect: random integer matrices (tcsmt gemm --random, --dtype s8 ...) ----------------


@pytest.mark.parametrize("fmt", [Format.S8, Format.U8, Format.S4, Format.U4, Format.B1])
def test_random_integers_cover_the_whole_range(fmt):
    x = random_integers((64, 64), fmt, np.random.default_rng(1))
    v = values(x, fmt)
    lo, hi = fmt.spec.int_range
    assert int(v.min()) == lo and int(v.max()) == hi  # every end drawn in 4096 draws
    assert x.dtype == (np.int8 if fmt == Format.S8 else np.uint8)


@pytest.mark.parametrize(
    "arch,instr",
    [
        ("hopper", "m16n8k32.s32.s8.s8.s32"),
        ("hopper", "m16n8k32.s32.s8.u8.s32"),
        ("ampere", "m16n8k64.s32.u4.s4.s32"),
        ("turing", "m8n8k128.s32.b1.b1.s32.xor.popc"),
        ("hopper", "m16n8k256.s32.b1.b1.s32.and.popc"),
        ("rdna3", "v_wmma_i32_16x16x16_iu4_i4_u4"),
    ],
)
def test_gemm_random_on_integer_instructions_is_exact(arch, instr, tmp_path):
    """`tcsmt gemm --random` on integer forms (a KeyError traceback before): D is the
    integer product of the very matrices drawn (the same seed redrawn here), and the
    command reports error 0 against the exact product."""
    p = PRESETS[arch].instructions[instr].params
    out = tmp_path / "d.npy"
    r = run("gemm", "--arch", arch, "--instr", instr, "--random", "3,5,512", "--seed", "7",
            "--out", str(out), "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)["runs"][0]
    assert res["exact"]["max_ulps"] == 0.0 and res["fp64_matmul"]["max_ulps"] == 0.0
    rng = np.random.default_rng(7)
    A = random_integers((3, 512), p.a_fmt, rng)
    B = random_integers((512, 5), p.b_fmt, rng)
    want = reference(values(A, p.a_fmt), values(B, p.b_fmt), p.bit_op)
    assert np.array_equal(np.load(out).astype(np.int64), want)


@pytest.mark.parametrize("dtype", ["s8", "u8", "s4", "u4", "b1"])
def test_gemm_dtype_picks_the_integer_default(dtype):
    r = run("gemm", "--arch", "hopper", "--dtype", dtype, "--random", "2,2,256", "--json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)["runs"][0]
    f = Format.parse(dtype)
    assert res["instruction"] == default_instruction("hopper", f, f)
    assert res["exact"]["max_ulps"] == 0.0


def test_gemm_reports_the_wrap_of_an_overflowing_integer_gemm(tmp_path):
    """u8 x u8 at K = 40000: 255^2 * 40000 > 2^31, the s32 accumulator wraps; D is the
    wrapped sum and the error against the exact product is not 0."""
    A = np.full((1, 40000), 255, np.uint8)
    B = np.full((40000, 1), 255, np.uint8)
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "b.npy", B)
    r = run("gemm", "--arch", "ampere", "--dtype", "u8", "--a", str(tmp_path / "a.npy"),
            "--b", str(tmp_path / "b.npy"), "--out", str(tmp_path / "d.npy"), "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    d = np.load(tmp_path / "d.npy")
    assert int(d[0, 0]) == int(s32(np.array([255 * 255 * 40000]))[0])
    assert json.loads(r.output)["runs"][0]["exact"]["max_rel"] > 0


# -- defect: every preset has a GEMM default for every input format it takes --------------


def _chainable_keys(arch: str) -> dict[tuple[Format, Format], str]:
    """(a, b) formats of every dense, unscaled instruction whose c and d agree."""
    keys = {}
    for inst in PRESETS[arch].instructions.values():
        p = inst.params
        if p.scale_fmt is not None or p.c_fmt != p.d_fmt or inst.name.startswith("mma.sp"):
            continue
        keys.setdefault((p.a_fmt, p.b_fmt), inst.name)
    return keys


@pytest.mark.parametrize("arch", sorted(PRESETS))
def test_every_preset_has_a_gemm_default_for_every_input_it_takes(arch):
    for (fa, fb), example in _chainable_keys(arch).items():
        name = default_instruction(arch, fa, fb)  # UserError when missing
        p = PRESETS[arch].instructions[name].params
        # fp32 inputs run the TF32 form where there is one (torch's default)
        assert fits(fa, p.a_fmt) and fits(fb, p.b_fmt), (arch, name, example)
        assert p.c_fmt == p.d_fmt and p.scale_fmt is None


def _small_operands(fmt: Format, shape, rng) -> np.ndarray:
    """Random operands of `fmt` in the dtype that carries it: integers over the whole
    range (`random_integers`); floats small integers -3..3, which every format here
    holds exactly."""
    if fmt.spec.is_integer:
        return random_integers(shape, fmt, rng)
    return rng.integers(-3, 4, size=shape).astype(np.float64).astype(FORMAT_DTYPE[fmt])


@pytest.mark.parametrize("arch", sorted(PRESETS))
def test_matmul_runs_every_default_against_exact_arithmetic(arch):
    """tc.matmul(preset, A, B) with each input format's default instruction on small
    random inputs agrees with exact arithmetic: integer units exactly (nothing wraps at
    this size); float units on small integers (|sum| <= 9 * 64 < 2^11), which every
    unit here adds exactly. Integer operands other than s8 / s8 x u8 come as bit
    patterns, which carry no format: those name the default through instr=."""
    rng = np.random.default_rng(3)
    for fa, fb in _chainable_keys(arch):
        name = default_instruction(arch, fa, fb)
        p = PRESETS[arch].instructions[name].params
        K = 2 * p.K
        A = _small_operands(fa, (3, K), rng)
        B = _small_operands(fb, (K, 2), rng)
        by_dtype = not fa.spec.is_integer or (fa == Format.S8 and fb in (Format.S8, Format.U8))
        D = tc.matmul(arch, A, B) if by_dtype else tc.matmul(arch, A, B, instr=name)
        if fa.spec.is_integer:
            want = reference(values(A, fa), values(B, fb), p.bit_op)
        else:
            want = A.astype(np.float64) @ B.astype(np.float64)
        got = np.asarray(D).astype(np.float64)
        assert np.array_equal(got, want), (arch, name)


# -- defect: mixed signed/unsigned operands, float arrays read by value -------------------


def test_matmul_takes_int8_times_uint8():
    """int8 A with uint8 B on an s8 x u8 instruction (refused before: "give both as
    floats or both as bit patterns", though neither is a float): the integer product,
    also without instr= (the s8.u8 default) and on AMD's iu8 form."""
    rng = np.random.default_rng(5)
    A = rng.integers(-128, 128, (4, 96)).astype(np.int8)
    B = rng.integers(0, 256, (96, 3)).astype(np.uint8)
    want = A.astype(np.int64) @ B.astype(np.int64)
    for arch, instr in (
        ("hopper", "m16n8k16.s32.s8.u8.s32"),
        ("hopper", None),
        ("rdna4", "v_wmma_i32_16x16x16_iu8_i8_u8"),
    ):
        D = tc.matmul(arch, A, B, instr=instr)
        assert D.dtype == np.int32 and np.array_equal(D.astype(np.int64), want)
    with pytest.raises(tc.UserError, match="B is u8 but m16n8k16.s32.s8.s8.s32 takes s8"):
        tc.matmul("hopper", A, B, instr="m16n8k16.s32.s8.s8.s32")


def test_matmul_reads_float_arrays_by_value_as_mma_does():
    """A float32 array whose values fp16 holds exactly is an fp16 operand for tc.matmul
    as for tc.mma (the intake rule): the same bits as with float16 arrays; a value fp16
    does not hold is refused naming the operand."""
    rng = np.random.default_rng(6)
    instr = "m16n8k16.f32.f16.f16.f32"
    A16 = rng.standard_normal((2, 16)).astype(np.float16)
    B16 = rng.standard_normal((16, 3)).astype(np.float16)
    D16 = tc.matmul("hopper", A16, B16, instr=instr)
    D32 = tc.matmul("hopper", A16.astype(np.float32), B16.astype(np.float64), instr=instr)
    assert np.array_equal(D16.view(np.uint32), D32.view(np.uint32))
    M = tc.mma("hopper", instr, A16.astype(np.float32), B16.astype(np.float32), np.zeros((2, 3)))
    assert np.array_equal(M.view(np.uint32), D16.view(np.uint32))
    bad = A16.astype(np.float32)
    bad[0, 0] = np.float32(1 + 2**-20)
    with pytest.raises(tc.UserError, match="A: float32 value .* is not exactly a fp16 number"):
        tc.matmul("hopper", bad, B16, instr=instr)
    import ml_dtypes

    with pytest.raises(tc.UserError, match="got a bfloat16 array for a fp16 operand"):
        tc.matmul("hopper", A16.astype(ml_dtypes.bfloat16), B16, instr=instr)


# -- defect: alpha and beta on integer GEMMs (ValueError "s32 has no NaN" before) ---------


@pytest.mark.parametrize("engine", ["numpy", "compiled"])
def test_integer_alpha_beta_are_int32_arithmetic(engine):
    """D = alpha*(A@B) + beta*C in int32, wrapping, as cuBLASLt's CUBLAS_COMPUTE_32I
    epilogue with int32 scalars: against Python integers reduced modulo 2^32, including
    scalars at the ends of the int32 range and alpha = 0 (A and B not read)."""
    rng = np.random.default_rng(8)
    A = rng.integers(-128, 128, (5, 64)).astype(np.int8)
    B = rng.integers(0, 256, (64, 3)).astype(np.uint8)
    C = rng.integers(-(2**31), 2**31, (5, 3)).astype(np.int32)
    ab = A.astype(object) @ B.astype(object)
    for alpha, beta in ((2, 3), (-7, 0), (0, 5), (2**31 - 1, -(2**31)), (1, -1)):
        D = tc.matmul("hopper", A, B, C, alpha=alpha, beta=beta, engine=engine)
        want = s32(alpha * ab + beta * C.astype(object))
        assert D.dtype == np.int32 and np.array_equal(D.astype(np.int64), want), (alpha, beta)


def test_integer_alpha_beta_that_are_not_int32_are_refused_in_words(tmp_path):
    A = np.ones((2, 32), np.int8)
    B = np.ones((32, 2), np.int8)
    for kw, what in (({"alpha": 0.5}, "alpha=0.5"), ({"beta": 2.0**31}, "beta=2147483648")):
        with pytest.raises(tc.UserError, match=f"{what}: an integer GEMM's epilogue takes int32"):
            tc.matmul("ampere", A, B, np.zeros((2, 2), np.int32), **kw)
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "b.npy", B)
    r = run("gemm", "--arch", "ampere/serial[alpha=0.5]", "--a", str(tmp_path / "a.npy"),
            "--b", str(tmp_path / "b.npy"))  # fmt: skip
    assert r.exit_code == 2 and "CUBLAS_COMPUTE_32I" in r.output
    assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output


def test_gemm_command_integer_alpha_beta_measures_exactly(tmp_path):
    rng = np.random.default_rng(9)
    A = rng.integers(-128, 128, (4, 64)).astype(np.int8)
    B = rng.integers(-128, 128, (64, 3)).astype(np.int8)
    C = rng.integers(-1000, 1000, (4, 3)).astype(np.int32)
    for name, x in (("a", A), ("b", B), ("c", C)):
        np.save(tmp_path / f"{name}.npy", x)
    r = run("gemm", "--arch", "hopper/serial[alpha=-3,beta=5]", "--a", str(tmp_path / "a.npy"),
            "--b", str(tmp_path / "b.npy"), "--c", str(tmp_path / "c.npy"),
            "--out", str(tmp_path / "d.npy"), "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    want = -3 * (A.astype(np.int64) @ B.astype(np.int64)) + 5 * C.astype(np.int64)
    assert np.array_equal(np.load(tmp_path / "d.npy").astype(np.int64), want)
    assert json.loads(r.output)["runs"][0]["exact"]["max_ulps"] == 0.0


# -- defect: integer matmuls inside tc.emulate; emulate on the new presets ---------------


@pytest.mark.parametrize("arch", ["cdna4", "rdna3", "rdna4", "hopper"])
def test_emulate_runs_integer_matmuls_natively_and_floats_on_the_preset(arch):
    """An int64 torch.matmul (index arithmetic) inside tc.emulate runs natively, exactly,
    named once in mode.native with one warning (it raised before); the fp16 product
    beside it is emulated with the preset's default (unusable on cdna4 and rdna before)."""
    import warnings

    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(4)
    idx = torch.randint(-(2**40), 2**40, (3, 4), generator=g)
    w = torch.randint(-(2**20), 2**20, (4, 2), generator=g)
    a = torch.randn(3, 64, generator=g).to(torch.float16)
    b = torch.randn(64, 5, generator=g).to(torch.float16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tc.emulate(arch) as mode:
            y1 = idx @ w
            y2 = idx @ w
            f = a @ b
    want = np.array(idx.numpy().astype(object) @ w.numpy().astype(object), dtype=np.int64)
    assert y1.dtype == torch.int64 and np.array_equal(y1.numpy(), want) and torch.equal(y1, y2)
    assert mode.native == ["matmul (int64)"]
    assert len([m for m in caught if "int64 tensors runs natively" in str(m.message)]) == 1
    assert torch.equal(f, tc.matmul(arch, a, b, out_dtype=torch.float16))
    assert mode.emulated == [("matmul", default_instruction(arch, Format.FP16, Format.FP16))]


# -- integer GEMMs that split K or promote: partials added in int32 -----------------------


@pytest.mark.parametrize("engine", ["numpy", "compiled"])
@pytest.mark.parametrize(
    "schedule",
    [
        "serial[split_k=2]",
        "serial[split_k=4,reduce=pairwise]",
        "serial[promote=128]",
        "serial[split_k=3,promote=256,reduce=tree]",
        "serial[split_k=2,reduce_fmt=out,round_partials=all]",
    ],
)
def test_integer_split_k_and_promotion_add_partials_in_int32(schedule, engine):
    """Split-K partials and promoted chains of an integer GEMM are added in int32
    (cuBLASLt CUBLAS_COMPUTE_32I), so every schedule gives the integer product; they
    were added as fp32 patterns before (2^30 off). Near the top the sum wraps modulo 2^32
    in every schedule alike."""
    rng = np.random.default_rng(10)
    A = rng.integers(-128, 128, (3, 4096)).astype(np.int8)
    B = rng.integers(-128, 128, (4096, 2)).astype(np.int8)
    A[0], B[:, 0] = -128, -128  # row 0 x column 0: 4096 * 16384 = 2^26
    want = A.astype(np.int64) @ B.astype(np.int64)
    D = tc.matmul(f"hopper/{schedule}", A, B, engine=engine)
    assert np.array_equal(D.astype(np.int64), want)
    C = np.full((3, 2), (1 << 31) - 1, np.int32)
    D = tc.matmul(f"hopper/{schedule}", A, B, C, beta=1, engine=engine)
    assert np.array_equal(D.astype(np.int64), s32(want + C.astype(np.int64)))


@pytest.mark.parametrize("arch", sorted(PRESETS))
def test_every_default_on_one_instruction_is_tc_mma(arch):
    """The single-instruction case of every float default (K = the instruction's K, no C):
    tc.matmul's chain of one step gives the bits tc.mma gives for D = A B + 0, on random
    operands whose rounding the unit does (normal values of the formats, not integers)."""
    rng = np.random.default_rng(11)
    for fa, fb in _chainable_keys(arch):
        if fa.spec.is_integer:
            continue
        name = default_instruction(arch, fa, fb)
        p = PRESETS[arch].instructions[name].params
        A = np.clip(rng.standard_normal((3, p.K)) * 2, -4, 4).astype(FORMAT_DTYPE[fa])
        B = np.clip(rng.standard_normal((p.K, 2)) * 2, -4, 4).astype(FORMAT_DTYPE[fb])
        D = np.asarray(tc.matmul(arch, A, B, instr=name))
        M = np.asarray(tc.mma(arch, name, A, B, np.zeros((3, 2), FORMAT_DTYPE[p.c_fmt])))
        w = p.d_fmt.spec.storage
        unsigned = {16: np.uint16, 32: np.uint32, 64: np.uint64}[w]
        assert np.array_equal(D.view(unsigned), M.view(unsigned)), (arch, name)


def test_gemm_compare_runs_each_architecture_on_its_integer_default(tmp_path):
    """--dtype u4 with --compare: each hypothesis runs its own library instruction for u4
    (the first one's was forced on the others: "unknown instruction ... for turing")."""
    r = run("gemm", "--arch", "hopper", "--dtype", "u4", "--random", "3,2,256",
            "--compare", "turing", "--compare", "rdna4", "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    runs = json.loads(r.output)["runs"]
    f = Format.U4
    assert [x["instruction"] for x in runs] == [
        default_instruction(a, f, f) for a in ("hopper", "turing", "rdna4")
    ]
    assert all(x["exact"]["max_ulps"] == 0.0 for x in runs)
