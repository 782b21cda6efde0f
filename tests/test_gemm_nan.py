"""NaNs at the GEMM level follow the instruction's NaN rule (model/nan.py).

x86 (a-b-acc): the additions of split partials and the epilogue propagate a NaN operand's
payload, made quiet, as the CPU's own instructions do; an invalid operation gives the x86
indefinite 0xFFC00000. The revealed hypotheses of numpy's matmul (OpenBLAS here) must
reproduce its bits on rows with NaN payloads; every engine agrees on them.
"""

from __future__ import annotations

import numpy as np
import pytest

import tensorcore_smt as tc

K = 16


def _nan_rows(m: int, k: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random fp32 operands with 1 to 3 quiet or signalling NaNs of random payloads and
    signs in most rows of A and some columns of B, and Inf pairs that cancel."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    au, bu = a.view(np.uint32), b.view(np.uint32)
    for i in range(m):
        for kk in rng.choice(k, size=int(rng.integers(0, 4)), replace=False):
            payload = int(rng.integers(1, 1 << 22)) | int(rng.integers(0, 2)) << 22
            au[i, kk] = int(rng.integers(0, 2)) << 31 | 0x7F800000 | payload
    for j in range(0, n, 5):
        kk = int(rng.integers(0, k))
        bu[kk, j] = 0x7F800000 | int(rng.integers(1, 1 << 22))
    a[1, :2] = [np.inf, np.inf]  # Inf + (-Inf) across chains for columns where b differs
    b[0, ::2], b[1, ::2] = 1.0, -1.0
    return a, b


def test_numpy_matmul_nan_payloads_reproduced_by_the_revealed_split_k():
    """Every class of numpy:matmul's outputs (a split-K interleaved class among them at
    this shape, on OpenBLAS) gives np.matmul's bits, NaN payloads included."""
    r = tc.reveal("numpy:matmul", K, shape=(16, 16))
    assert r.reproduced is True
    labels = np.zeros((16, 16), np.int64)
    for c, cls in enumerate(r.classes):
        for m0, m1, n0, n1 in cls.blocks:
            labels[m0:m1, n0:n1] = c
    for seed in range(3):
        a, b = _nan_rows(16, K, 16, seed)
        with np.errstate(invalid="ignore", over="ignore"):
            want = np.matmul(a, b).view(np.uint32)
        assert np.isnan(want.view(np.float32)).sum() > 16
        for c, cls in enumerate(r.classes):
            got = np.asarray(tc.matmul(cls.hypothesis, a, b, instr=cls.instr)).view(np.uint32)
            mask = labels == c
            assert (got[mask] == want[mask]).all(), cls.hypothesis


def test_split_partials_keep_the_later_partials_nan():
    """x86: chain 1's NaN wins over chain 0's (the later addend before the running sum);
    a GPU preset writes its canonical NaN for the same sum."""
    a = np.ones((1, 4), np.float32)
    b = np.ones((4, 1), np.float32)
    a.view(np.uint32)[0, :2] = [0x7F800111, 0xFF800222]  # k = 0 in chain 0, k = 1 in chain 1
    sched = "serial[split_k=2,split=interleaved,split_tile=1]"
    got = np.asarray(tc.matmul(f"x86-fma/{sched}", a, b)).view(np.uint32)
    assert got[0, 0] == 0xFFC00222
    g = np.ones((1, 16), np.float32)
    g.view(np.uint32)[0, [0, 8]] = [0x7F800111, 0xFF800222]
    gpu = tc.matmul("ampere/serial[split_k=2,split_tile=8]", g, np.ones((16, 1), np.float32))
    assert np.asarray(gpu).view(np.uint32)[0, 0] == 0x7FFFFFFF
    a[0, :2] = [np.inf, -np.inf]
    got = np.asarray(tc.matmul(f"x86-fma/{sched}", a, b)).view(np.uint32)
    assert got[0, 0] == 0xFFC00000


SCHEDS = [
    "serial[split_k=2,split=interleaved,split_tile=1]",
    "serial[split_k=3,split_tile=2,reduce=pairwise,promote=4]",
    "serial[alpha=0.5,beta=2,c_join=epilogue]",
    "serial[epilogue=mul-add,alpha=3,beta=-1,c_join=epilogue,split_k=2,split_tile=1]",
]


@pytest.mark.parametrize("sched", SCHEDS)
def test_engines_agree_on_nan_payloads(sched):
    """The numpy interpreter and the compiled runner give the same bits on NaN payload
    operands and C, for split-K, promotion and the epilogue on x86-fma."""
    a, b = _nan_rows(6, K, 9, 7)
    c = np.random.default_rng(3).standard_normal((6, 9)).astype(np.float32)
    c.view(np.uint32)[::2, ::3] = 0x7F800333
    want = tc.matmul(f"x86-fma/{sched}", a, b, c, engine="numpy")
    got = tc.matmul(f"x86-fma/{sched}", a, b, c, engine="compiled")
    w, g = np.asarray(want).view(np.uint32), np.asarray(got).view(np.uint32)
    assert (w == g).all()
    payloads = w[np.isnan(w.view(np.float32))] & 0x3FFFFF
    assert len({int(x) for x in payloads}) > 2  # payloads, not one canonical NaN


def test_split_order_is_not_merged_where_nans_keep_their_payload():
    """Two promoted splits added d_1 + d_0 equal one promoted chain d_0, d_1 under a
    canonical NaN, not under x86's rule (the later addend's NaN wins): the order matters."""
    from tensorcore_smt.gemm.plan import equivalent_plan, make_plan
    from tensorcore_smt.gemm.schedule import parse_schedule

    text = "serial[split_k=2,split_tile=8,promote=8,combine=1+0]"
    plan = make_plan(parse_schedule(text), 16, 1)
    assert equivalent_plan(plan).splits != plan.splits
    assert equivalent_plan(plan, nan_payloads=True) == plan
    a = np.ones((1, 16), np.float32)
    a.view(np.uint32)[0, [0, 8]] = [0x7F800111, 0x7F800222]
    b = np.ones((16, 1), np.float32)
    got = np.asarray(tc.matmul(f"x86-fma/{text}", a, b))
    one = np.asarray(tc.matmul("x86-fma/serial[promote=8]", a, b))
    assert got.view(np.uint32)[0, 0] == 0x7FC00111 and one.view(np.uint32)[0, 0] == 0x7FC00222
