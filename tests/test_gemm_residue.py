"""The residue-first K layout (schedule field residue_tile=T): a CUTLASS 2.x mainloop
loads the partial k-tile (K mod T elements, zero-filled to T) first and the full k-tiles
after it, so the instruction's k-groups start at K mod T. Run by every engine and the
solver model through plan.k_layout."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.errors import UserError
from tensorcore_smt.gemm.model import resolve_model, run_rows
from tensorcore_smt.gemm.plan import k_layout, k_positions, make_plan, plan_for
from tensorcore_smt.gemm.schedule import parse_schedule


def _zero_filled(a: np.ndarray, b: np.ndarray, T: int) -> tuple[np.ndarray, np.ndarray]:
    """A and B with the first k-tile (K mod T elements) zero-filled to T, by hand."""
    r = a.shape[1] % T
    if r == 0:
        return a, b
    za = np.zeros((a.shape[0], T - r), a.dtype)
    zb = np.zeros((T - r, b.shape[1]), b.dtype)
    return (
        np.concatenate([a[:, :r], za, a[:, r:]], 1),
        np.concatenate([b[:r], zb, b[r:]], 0),
    )


def test_layout_is_the_residue_tile_then_full_tiles():
    """k_layout and k_positions against the layout built element by element."""
    s = parse_schedule("serial[residue_tile=32]")
    for K in range(1, 200):
        Kp, gap = k_layout(s, K, 16)
        r = K % 32
        want = list(range(r)) + [32 + i for i in range(K - r)] if r else list(range(K))
        assert k_positions(K, gap).tolist() == want
        assert Kp == -(-K // 32) * 32 and Kp % 16 == 0
    plain = parse_schedule("serial")
    assert k_layout(plain, 37, 16) == (48, (0, 0))
    assert k_positions(37, (0, 0)).tolist() == list(range(37))


@pytest.mark.parametrize("engine", ["numpy", "compiled"])
@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
def test_residue_first_is_the_zero_filled_first_tile(engine, dtype):
    """Every K and T: the residue_tile schedule computes what plain serial computes on
    operands whose first k-tile is zero-filled by hand (numpy and compiled engines)."""
    import ml_dtypes

    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    rng = np.random.default_rng(7)
    for K in (5, 17, 40, 100, 130):
        for T in (16, 32, 64, 128):
            a = (rng.standard_normal((3, K)) * 2.0 ** rng.integers(-9, 9, (3, K))).astype(dt)
            b = (rng.standard_normal((K, 4)) * 2.0 ** rng.integers(-9, 9, (K, 4))).astype(dt)
            got = tc.matmul(f"hopper/serial[residue_tile={T}]", a, b, engine=engine)
            want = tc.matmul("hopper/serial", *_zero_filled(a, b, T), engine=engine)
            assert np.array_equal(np.asarray(got).view(np.uint32), np.asarray(want).view(np.uint32))


@pytest.mark.parametrize("engine", ["numpy", "compiled"])
def test_residue_first_moves_the_group_a_small_product_falls_in(engine):
    """K = 40, products 2^20 (k = 0), -2^20 (k = 8), 2^-20 (k = 20); exact sum 2^-20.
    Zero-padded at the end, the 16-wide groups are [0, 16) (the large products cancel
    exactly) and [16, 32) (the small one alone): the exact sum. Residue first (T = 32,
    K mod T = 8): groups [0, 8) and [8, 24): the small product meets -2^20 and the
    running 2^20 in one fused sum aligned 40 binades above it, and is lost (Hopper's
    unit keeps 25 fraction bits; Fasi et al. 2021)."""
    K = 40
    a = np.zeros((1, K), np.float16)
    b = np.zeros((K, 1), np.float16)
    a[0, 0], b[0, 0] = 2.0**10, 2.0**10
    a[0, 8], b[8, 0] = -(2.0**10), 2.0**10
    a[0, 20], b[20, 0] = 2.0**-10, 2.0**-10
    exact = sum(Fraction(float(a[0, k])) * Fraction(float(b[k, 0])) for k in range(K))
    assert exact == Fraction(1, 2**20)
    end = tc.matmul("hopper/serial", a, b, engine=engine)
    first = tc.matmul("hopper/serial[residue_tile=32]", a, b, engine=engine)
    assert Fraction(float(np.asarray(end)[0, 0])) == exact
    assert float(np.asarray(first)[0, 0]) == 0.0


def test_solver_model_runs_the_layout():
    """The solver model's element (GemmModel.run, what the SMT encoding runs) gives the
    emulator's bits under residue_tile."""
    rng = np.random.default_rng(3)
    K = 45
    m = resolve_model("hopper/serial[residue_tile=32]", K, fmt=None)
    a = (rng.standard_normal((6, K)) * 2.0 ** rng.integers(-9, 9, (6, K))).astype(np.float16)
    b = (rng.standard_normal((6, K)) * 2.0 ** rng.integers(-9, 9, (6, K))).astype(np.float16)
    c = np.zeros(6, np.uint32)
    got = run_rows(m, a.view(np.uint16), b.view(np.uint16), c)
    for i in range(6):
        want = tc.matmul("hopper/serial[residue_tile=32]", a[i : i + 1], b[i][:, None])
        assert int(got[i]) == int(np.asarray(want).view(np.uint32)[0, 0])
    assert m.K_padded == 64 and m.plan.gap == (13, 19)


def test_bad_residue_tile_is_one_clear_error():
    with pytest.raises(UserError, match="residue_tile=24 is not a multiple"):
        plan_for(parse_schedule("serial[residue_tile=24]"), 40, 16)
    with pytest.raises(UserError, match="residue_tile"):
        parse_schedule("serial[residue_tile=0]")
    with pytest.raises(UserError, match="residue_tile"):
        parse_schedule("serial[residue_tile=32,stream_k=4]")
    with pytest.raises(UserError, match="residue_tile=32: K's layout depends on K"):
        make_plan(parse_schedule("serial[residue_tile=32]"), 48, 16)
    s = parse_schedule("serial[residue_tile=64,split_k=2]")
    assert parse_schedule(s.text()) == s and "residue_tile=64" in s.text()
