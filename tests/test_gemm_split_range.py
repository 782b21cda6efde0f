"""Split-K over element ranges (schedule field split_range=A): CUTLASS 2.x split-K gives
split s the elements [s*q, min((s+1)*q, K)) of the unpadded K, q = A*ceil(ceil(K/A)/S)
(gemm_k_size rounded to kAlignK), and each split's mainloop lays its own range out (with
residue_tile its own partial k-tile first). Run by every engine and the solver model
through plan.plan_for."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.errors import UserError
from tensorcore_smt.formats import Format
from tensorcore_smt.gemm.model import resolve_model, run_rows
from tensorcore_smt.gemm.plan import k_positions, make_plan, plan_for, range_layout
from tensorcore_smt.gemm.schedule import parse_schedule


def _bounds(K: int, S: int, A: int) -> list[tuple[int, int]]:
    q = A * math.ceil(math.ceil(K / A) / S)
    return [(lo, min(lo + q, K)) for lo in range(0, K, q)]


def _laid_out(x: np.ndarray, T: int | None, kb: int) -> np.ndarray:
    """One range of a row's K laid out by hand: residue first (zero-filled to T) or
    zero-padded at its end to a multiple of kb."""
    L = x.shape[-1]
    z = lambda n: np.zeros(x.shape[:-1] + (n,), x.dtype)  # noqa: E731
    if T is not None and L % T:
        r = L % T
        return np.concatenate([x[..., :r], z(T - r), x[..., r:]], -1)
    return np.concatenate([x, z(-L % kb)], -1)


def test_layout_is_each_range_on_its_own():
    """range_layout against the layout built range by range: positions, padded K and
    the k-blocks of each split."""
    for T in (None, 16, 32):
        s = parse_schedule(f"serial[split_k=3,split_range=4{f',residue_tile={T}' if T else ''}]")
        for K in range(9, 140):
            try:
                Kp, gaps, ranges = range_layout(s, K, 8)
            except UserError:
                assert len(_bounds(K, 3, 4)) < 3
                continue
            want, dst, blocks = [], 0, []
            for lo, hi in _bounds(K, 3, 4):
                laid = _laid_out(np.arange(lo, hi)[None] + 1, T, 8)[0]
                want += [dst + i for i, v in enumerate(laid) if v]
                blocks.append((dst // 8, (dst + len(laid)) // 8))
                dst += len(laid)
            assert k_positions(K, (0, 0), gaps).tolist() == want
            assert Kp == dst and ranges == tuple(blocks)


@pytest.mark.parametrize("engine", ["numpy", "compiled"])
def test_split_ranges_are_chains_on_hand_laid_ranges_summed_in_order(engine):
    """tc.matmul under split_range equals, bit for bit, one TF32 chain per range on the
    range's operands laid out by hand (plain serial schedule), the fp32 partials added in
    split order by numpy (an IEEE fp32 add each)."""
    rng = np.random.default_rng(11)
    for K, S, T in ((23, 2, None), (61, 3, 32), (100, 5, 16), (300, 6, 32), (64, 16, 16)):
        a = (rng.standard_normal((3, K)) * 2.0 ** rng.integers(-12, 12, (3, K))).astype(np.float32)
        b = (rng.standard_normal((K, 4)) * 2.0 ** rng.integers(-12, 12, (K, 4))).astype(np.float32)
        res = f",residue_tile={T}" if T else ""
        hyp = f"hopper/serial[operand_round=rne,split_k={S},split_range=4{res}]"
        got = np.asarray(tc.matmul(hyp, a, b, engine=engine))
        acc = None
        for lo, hi in _bounds(K, S, 4):
            pa = _laid_out(a[:, lo:hi], T, 8)
            pb = _laid_out(b[lo:hi].T, T, 8).T
            p = np.asarray(tc.matmul("hopper/serial[operand_round=rne]", pa, pb, engine=engine))
            acc = p if acc is None else (acc + p).astype(np.float32)
        assert np.array_equal(got.view(np.uint32), acc.view(np.uint32)), (K, S, T)
        one = np.asarray(tc.matmul("hopper/serial[operand_round=rne]", a, b, engine=engine))
        assert not np.array_equal(got.view(np.uint32), one.view(np.uint32))


def test_solver_model_runs_the_ranges():
    """The solver model's element (GemmModel.run, what the SMT encoding runs) gives the
    emulator's bits under split_range with residue_tile."""
    rng = np.random.default_rng(5)
    K, hyp = 61, "hopper/serial[operand_round=rne,split_k=3,split_range=4,residue_tile=16]"
    m = resolve_model(hyp, K, fmt=Format.FP32)
    a = (rng.standard_normal((6, K)) * 2.0 ** rng.integers(-9, 9, (6, K))).astype(np.float32)
    b = (rng.standard_normal((6, K)) * 2.0 ** rng.integers(-9, 9, (6, K))).astype(np.float32)
    got = run_rows(m, a.view(np.uint32), b.view(np.uint32), np.zeros(6, np.uint32))
    for i in range(6):
        want = tc.matmul(hyp, a[i : i + 1], b[i][:, None])
        assert int(got[i]) == int(np.asarray(want).view(np.uint32)[0, 0])
    assert len(m.plan.splits) == 3 and m.K_padded == 32 + 32 + 16


def test_bad_split_range_is_one_clear_error():
    with pytest.raises(UserError, match="split_range=4 cuts K.*split_k=1"):
        parse_schedule("serial[split_range=4]")
    with pytest.raises(UserError, match="split_tile=64 cannot"):
        parse_schedule("serial[split_k=2,split_range=4,split_tile=64]")
    with pytest.raises(UserError, match="split_range=0 is out of range"):
        parse_schedule("serial[split_k=2,split_range=0]")
    s = parse_schedule("serial[split_k=24,split_range=4,residue_tile=16]")
    with pytest.raises(UserError, match=r"leaves 8 split\(s\) without an element; allowed: "):
        plan_for(s, 64, 8)
    with pytest.raises(UserError, match="split_range=4: the split ranges depend on K"):
        make_plan(s, 64, 8)
    assert parse_schedule(s.text()) == s and "split_range=4" in s.text()
