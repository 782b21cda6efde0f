"""fp32 products with TF32 allowed: the emulator rounds ordinary fp32 operands to TF32 as
the library does (gemm/profile_call.LIBRARY_TF32_ROUND: to nearest, ties to even, as the TF32 probe
decided on an H200 and an H100), under an
architecture name and under a profile, unless the hypothesis names `operand_round`."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.gemm.profile_call import LIBRARY_TF32_ROUND
from tensorcore_smt.gemm.schedule import OperandRound

torch = pytest.importorskip("torch")


def _rne_tf32(x: np.ndarray) -> np.ndarray:
    """fp32 -> TF32, ties to even, on the bits: add 0xFFF plus the kept lsb to the
    magnitude's pattern, clear the 13 low bits (finite values only)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    lsb = (u >> 13) & 1
    return ((u + 0xFFF + lsb) & ~np.uint64(0x1FFF)).astype(np.uint32).view(np.float32)


def _rna_tf32(x: np.ndarray) -> np.ndarray:
    """fp32 -> TF32, ties away from zero: half a TF32 ulp added, 13 low bits cleared."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x1000) & ~np.uint64(0x1FFF)).astype(np.uint32).view(np.float32)


def _operands(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """fp32 operands whose low 13 bits are random, with exact ties on a quarter of them."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((8, 64)).astype(np.float32)
    b = rng.standard_normal((64, 8)).astype(np.float32)
    for m in (a, b):
        u = m.view(np.uint32)
        u[::4] = (u[::4] & ~np.uint32(0x1FFF)) | np.uint32(0x1000)
    return a, b


@pytest.fixture
def tf32_high():
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    yield
    torch.set_float32_matmul_precision(before)


@pytest.mark.parametrize("target", ["hopper", "h100-cublas-13.0"])
def test_tf32_calls_round_operands_ties_to_even(tf32_high, target):
    assert LIBRARY_TF32_ROUND == OperandRound.RNE
    a, b = _operands(0)
    with tc.emulate(target):
        got = (torch.from_numpy(a) @ torch.from_numpy(b)).numpy()
    # independent reference: operands rounded by bit arithmetic, then the unit on values
    # already on the TF32 grid (where every conversion agrees)
    want = np.asarray(tc.matmul("hopper", _rne_tf32(a), _rne_tf32(b)))
    trunc = np.asarray(tc.matmul("hopper/serial[operand_round=truncate]", a, b))
    away = np.asarray(tc.matmul("hopper", _rna_tf32(a), _rna_tf32(b)))
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert not np.array_equal(got.view(np.uint32), trunc.view(np.uint32))
    assert not np.array_equal(got.view(np.uint32), away.view(np.uint32))


def test_named_operand_round_is_kept(tf32_high):
    a, b = _operands(1)
    with tc.emulate("hopper/serial[operand_round=truncate]"):
        got = (torch.from_numpy(a) @ torch.from_numpy(b)).numpy()
    want = np.asarray(tc.matmul("hopper/serial[operand_round=truncate]", a, b))
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
