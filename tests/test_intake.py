"""Operands as callers hold them (tensorcore_smt/intake.py): every input form gives the
numpy interpreter's bits through the compiled engine, the kernel reads the caller's
memory (no copy) at the caller's element width, d comes back in the narrowest dtype,
streams of batches give the bits of one big batch, and a bad bit pattern or dtype is
one UserError line."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt import intake
from tensorcore_smt.engine import kernel
from tensorcore_smt.errors import UserError
from tensorcore_smt.formats import Format
from tensorcore_smt.validation.rows import random_rows

FP16 = ("hopper", "m16n8k16.f32.f16.f16.f32")
BF16 = ("hopper", "m16n8k16.f32.bf16.bf16.f32")
FP8 = ("hopper", "m16n8k32.f32.e4m3.e4m3.f32")
TF32 = ("hopper", "m16n8k8.f32.tf32.tf32.f32")


def _rows(case, n: int = 2000, seed: int = 5):
    p = tc.resolve(*case)
    a, b, c, _ = random_rows(p.a_fmt, p.b_fmt, p.c_fmt, p.K, n, seed)
    return p, a, b, c


def _as(x: np.ndarray, fmt: Format, form: str) -> np.ndarray:
    """The uint64 patterns `x` in one input form: "bits" (the unsigned dtype of the
    format's width), "float" (the format's float dtype, a view of those bits), "int64"
    (signed, non-negative) or "uint64"."""
    w = fmt.spec.storage
    bits = x.astype(intake.bits_dtype(fmt))
    if form == "bits":
        return bits
    if form == "float":
        return bits.view(intake.FORMAT_DTYPE[fmt])
    if form == "int64":
        return x.astype(np.int64)
    assert form == "uint64" and w <= 64
    return x


@pytest.fixture
def kernel_reads(monkeypatch):
    """What each compiled run read: for every operand array handed to the kernel, its
    element bits and whether it is the caller's memory."""
    seen: list[tuple[int, np.ndarray]] = []
    real = kernel._as_container

    def spy(x, width):
        got = real(x, width)
        seen.append((got.dtype.itemsize * 8, got))
        return got

    monkeypatch.setattr(kernel, "_as_container", spy)
    return seen


@pytest.mark.parametrize(
    "case,form",
    [
        (FP16, "bits"),
        (FP16, "float"),
        (FP16, "int64"),
        (FP16, "uint64"),
        (BF16, "float"),
        (FP8, "bits"),
        (FP8, "float"),
        (TF32, "float"),
    ],
    ids=lambda v: v if isinstance(v, str) else v[1],
)
def test_every_input_form_gives_the_numpy_bits(case, form, kernel_reads):
    p, a, b, c = _rows(case)
    want = tc.simulate(p, None, a, b, c, engine="numpy")
    A, B, C = (_as(x, f, form) for x, f in ((a, p.a_fmt), (b, p.b_fmt), (c, p.c_fmt)))
    got = tc.simulate(p, None, A, B, C, engine="compiled")
    assert got.dtype == want.dtype == intake.bits_dtype(p.d_fmt)  # uint32 for an fp32 d
    assert np.array_equal(got, want)
    read = kernel_reads[-3:]
    for (bits, arr), given in zip(read, (A, B, C)):
        assert bits == given.dtype.itemsize * 8  # the kernel of the caller's width
        assert np.shares_memory(arr, given)  # the caller's memory itself, no copy


def test_d_is_written_into_the_narrowest_dtype_or_a_given_array(tmp_path):
    p, a, b, c = _rows(FP16, 3000)
    want = tc.simulate_params(p, a, b, c, engine="numpy")
    assert want.dtype == np.uint64  # simulate_params keeps its uint64 contract
    out = np.lib.format.open_memmap(tmp_path / "d.npy", mode="w+", dtype=np.uint32, shape=(3000,))
    a16, b16, c32 = a.astype(np.uint16), b.astype(np.uint16), c.astype(np.uint32)
    got = tc.simulate(p, None, a16, b16, c32, engine="compiled", out=out)
    assert got is out
    assert np.array_equal(np.load(tmp_path / "d.npy", mmap_mode="r"), want)
    half = tc.resolve("hopper", "m16n8k16.f16.f16.f16.f16")
    a, b, c, _ = random_rows(half.a_fmt, half.b_fmt, half.c_fmt, half.K, 500, 2)
    d = tc.simulate(half, None, a, b, c, engine="compiled")
    assert d.dtype == np.uint16
    assert np.array_equal(d, tc.simulate(half, None, a, b, c, engine="numpy"))
    with pytest.raises(UserError, match="out: got dtype uint8"):
        tc.simulate(p, None, a16, b16, c32, out=np.empty(3000, np.uint8))


def test_a_stream_of_batches_gives_the_bits_of_one_batch():
    p, a, b, c = _rows(FP8, 5000, 9)
    whole = tc.simulate(p, None, a, b, c, engine="compiled")
    batches = (
        (a[lo : lo + 1200], b[lo : lo + 1200], c[lo : lo + 1200]) for lo in range(0, 5000, 1200)
    )
    parts = list(tc.simulate_stream(p, None, batches, engine="compiled"))
    assert [len(x) for x in parts] == [1200, 1200, 1200, 1200, 200]
    assert np.array_equal(np.concatenate(parts), whole)


@pytest.mark.parametrize(
    "case,make,match",
    [
        # a uint16 array for an e4m3 operand: 0x100 is no 8-bit pattern
        (FP8, lambda a: a.astype(np.uint16) | np.uint16(0x100), "does not fit in 8-bit e4m3"),
        # a negative signed value is no bit pattern, at the format's width or wider
        (FP8, lambda a: -a.astype(np.int8).clip(1, None), "does not fit in 8-bit e4m3"),
        (FP16, lambda a: -a.astype(np.int64).clip(1, None), "does not fit in 16-bit fp16"),
        (FP16, lambda a: a.astype(np.uint16).view(ml_dtypes.bfloat16), "expected float16"),
        (FP16, lambda a: a.astype(np.complex64), "expected float16 values or unsigned"),
    ],
)
def test_a_bad_operand_is_one_user_error(case, make, match):
    p, a, b, c = _rows(case, 50)
    for engine in ("numpy", "compiled"):
        with pytest.raises(UserError, match=match) as e:
            tc.simulate(p, None, make(a), b, c, engine=engine)
        assert "\n" not in str(e.value)


def test_operands_are_the_callers_memory():
    """Bit patterns and float arrays come back as unsigned views of the same memory;
    only a by-value conversion (float32 values for an fp16 operand) makes a new array."""
    fp16 = Format.FP16
    x = np.arange(64, dtype=np.uint16).reshape(8, 8)[:, ::2]  # strided: still no copy
    for arr in (x, x.view(np.float16), x.view(np.int16), x.astype(np.uint64)):
        bits = intake.operand_bits(arr, fp16, "a")
        assert bits.dtype.kind == "u" and np.shares_memory(bits, arr)
        assert np.array_equal(bits, x)
    conv = intake.operand_bits(np.float32([1.0, 2.0]), fp16, "a")
    assert conv.dtype == np.uint16 and conv.tolist() == [0x3C00, 0x4000]
    assert intake.operand_bits([[1, 2]], fp16, "a").tolist() == [[1, 2]]
