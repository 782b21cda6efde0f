"""reveal on the calls users make of this machine's CPU libraries: `reproduced` claimed
only from 10^4 outputs on discriminating inputs, for every oracle; the hypotheses of
sdot-style trees (chains given as data, an fp64 tail) ordered by the learnt arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.order import core
from tensorcore_smt.order.core import ClassResult, _prefer
from tensorcore_smt.order.evaluate import Arithmetic, Products, TreeArithmetic, Width

UNFUSED = "x86-fma[fused_products=false]"


class _Orc:
    unfused = UNFUSED


def _cls(arith: TreeArithmetic) -> ClassResult:
    hyps = [
        "x86-fma/serial[chains=0|1]",
        "x86-fma/serial[chains=0|1|2,wide=1]",
        f"{UNFUSED}/serial[chains=0|1]",
        f"{UNFUSED}/serial[chains=0|1|2,wide=1]",
    ]
    c = ClassResult(1, [[0, 1, 0, 1]], (0, 1), hyps[0], others=hyps[1:])
    c.arithmetic = arith
    return c


@pytest.mark.parametrize(
    "arith,first",
    [
        (TreeArithmetic((Arithmetic(),)), "x86-fma/serial[chains=0|1]"),
        (TreeArithmetic((Arithmetic(Products.ROUNDED),)), f"{UNFUSED}/serial[chains=0|1]"),
        (
            TreeArithmetic((Arithmetic(), Arithmetic(Products.ROUNDED, Width.FP64)), Width.FP64),
            "x86-fma/serial[chains=0|1|2,wide=1]",
        ),
        (
            TreeArithmetic(
                (Arithmetic(Products.ROUNDED), Arithmetic(Products.ROUNDED, Width.FP64)),
                Width.FP64,
            ),
            f"{UNFUSED}/serial[chains=0|1|2,wide=1]",
        ),
    ],
)
def test_hypotheses_ordered_by_the_learnt_arithmetic(arith, first):
    c = _cls(arith)
    before = {c.hypothesis, *c.others}
    _prefer(c, _Orc())
    assert c.hypothesis == first and {c.hypothesis, *c.others} == before


ORACLES = [
    ("numpy:dot", 40, "fp32"),
    ("numpy:gemv", 40, "fp32"),
    ("torch:cpu", 40, "fp32"),
    ("model:x86-fma/serial[split_k=2,split=interleaved,split_tile=4]", 40, "fp32"),
]


@pytest.mark.parametrize("oracle,k,dtype", ORACLES, ids=[o[0][:12] for o in ORACLES])
def test_reproduced_only_on_10k_discriminating_outputs(oracle, k, dtype, monkeypatch):
    """Every live oracle's check draws its inputs from arithmetic.discriminating (wide
    exponents, cancelling pairs, subnormals) and claims `reproduced` only from 10^4
    outputs of each class; 9,999 leave it unclaimed."""
    if oracle.startswith("torch"):
        pytest.importorskip("torch")
    drawn = []
    real = core.discriminating

    def spy(fmt, m, kk, n, seed):
        a, b = real(fmt, m, kk, n, seed)
        drawn.append(m * n)
        return a, b

    monkeypatch.setattr(core, "discriminating", spy)
    few = tc.reveal(oracle, k, dtype, check_outputs=9_999)
    assert few.reproduced is None and "not claimed" in few.reason, few.reason
    drawn.clear()
    r = tc.reveal(oracle, k, dtype)
    assert r.reproduced is True, r.reason
    assert all(c.checked_outputs >= 10_000 for c in r.classes)
    assert sum(drawn) >= 10_000 * len(r.classes)  # every output checked was drawn there
    assert r.hypothesis is not None  # sdot-style trees are named too


@pytest.mark.slow
def test_torch_cpu_one_column_k1000_is_an_unfused_chain_schedule():
    """torch's fp32 GEMV-like call (N = 1, K = 1000): four lanes of a separate multiply
    and add, the first starting with products 0..4 (no split layout gives it): named with
    chains given as data on the unfused variant, reproduced on 10^4 outputs."""
    pytest.importorskip("torch")
    r = tc.reveal("torch:cpu", 1000, shape=(256, 1))
    assert r.hypothesis.startswith(f"{UNFUSED}/serial[") and "chains=0..4&8..996/4" in r.hypothesis
    assert r.reproduced is True and r.first.hypothesis_checked >= 10_000, r.reason
    a = np.ones((3, 1000), np.float32)
    assert np.asarray(tc.matmul(r.hypothesis, a, a.T[:, :1]))[0, 0] == 1000.0


class _Bf16Out:
    """A GEMM whose bf16 output counts only 256 units exactly: numpy's fp32 matmul of
    bf16 inputs, rounded to bf16 (the windowed probe's subject, with a known tree)."""

    @staticmethod
    def make():
        import ml_dtypes

        from tensorcore_smt.formats import Format
        from tensorcore_smt.order.oracles import Gemm

        class Bf16Out(Gemm):
            name, fmt, out = "test:bf16-out", Format.BF16, Format.BF16

            def run(self, a, b):
                d = np.matmul(a.astype(np.float32), b.astype(np.float32))
                return d.astype(ml_dtypes.bfloat16)

        return Bf16Out((24, 20))


def test_windowed_probe_reads_bf16_outputs_above_k258():
    """Above K = 258 a bf16 output cannot hold a pair's count: the probe carries units on
    one window of 256 positions a call and adds the windows' counts. Its pair sizes are
    those the same kernel gives with fp32 outputs (every unit in one call), pivots shared
    by rows and columns included."""
    from tensorcore_smt.order.oracles import NumpyMatmul

    k = 600
    orc = _Bf16Out.make()
    assert orc.window(k) == 256 and orc.window(258) is None
    rng = np.random.default_rng(5)
    rows = rng.integers(0, k, 24)
    cols = np.concatenate([rows[:6], rng.integers(0, k, 14)])  # shared pivots too
    got = orc.sizes_call(k, rows, cols)
    want = NumpyMatmul((24, 20)).sizes_call(k, rows, cols)
    assert (got == want).all() and (got[rows[:, None] != cols[None, :]] >= 2).all()
    assert 3 <= orc.calls <= 2 * (k - 1).bit_length() * 3  # bits x sides x windows


@pytest.mark.slow
def test_torch_cpu_bf16_k600_answered():
    """torch's bf16 CPU matmul above K = 258 (once refused): the windowed probe reads its
    tree, the arithmetic is learnt and the hypothesis (oneDNN's VDPBF16PS chain, a fresh
    chain every 512) reproduces 10^4 discriminating outputs."""
    pytest.importorskip("torch")
    r = tc.reveal("torch:cpu", 600, "bf16", shape=(64, 64))
    assert r.reproduced is True and r.first.hypothesis_checked >= 10_000, r.reason
    assert r.hypothesis.startswith("x86-")
