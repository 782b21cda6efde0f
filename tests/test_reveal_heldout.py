"""What reveal learns of this machine's numpy and torch CPU kernels, measured against the
real library on held-out inputs (order/heldout.py): fresh wide-range, cancelling and
subnormal inputs reveal never saw, every output compared bit for bit with the tree under
its learnt arithmetic and with the GEMM hypothesis (tc.matmul)."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.formats import Format
from tensorcore_smt.order.evaluate import Arithmetic, Products, TreeArithmetic, Width
from tensorcore_smt.order.heldout import heldout_inputs, measure


def library(oracle: str, dtype: str):
    """The library call itself, written here apart from reveal's oracles: numpy.dot of
    contiguous rows and columns, numpy.matmul (a GEMV where N = 1: a matrix times a
    vector), torch.matmul on the CPU in the input's dtype."""
    if oracle == "numpy:dot":

        def dot(a, b):
            a = np.ascontiguousarray(a, np.float32)
            cols = [np.ascontiguousarray(b[:, j], np.float32) for j in range(b.shape[1])]
            return np.array([[np.dot(r, c) for c in cols] for r in a], np.float32)

        return dot
    if oracle == "numpy:gemv":
        return lambda a, b: np.matmul(a.astype(np.float32), b[:, 0].astype(np.float32))[:, None]
    if oracle == "numpy:matmul":
        return lambda a, b: np.matmul(a.astype(np.float32), b.astype(np.float32))
    torch = pytest.importorskip("torch")
    tdt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]

    def mm(a, b):
        d = torch.matmul(torch.from_numpy(a).to(tdt), torch.from_numpy(b).to(tdt))
        return d.float().numpy()

    return mm


def _held(oracle, k, dtype, shape, outputs, check_outputs=10_000):
    r = tc.reveal(oracle, k, dtype, shape, check_outputs=check_outputs)
    h = measure(r, outputs, seed=101, library=library(oracle, dtype))
    return r, h


FAST = [
    ("numpy:dot", 40, "fp32", None),  # 32-wide SIMD body, a tail of 8 in a C double
    ("numpy:gemv", 100, "fp32", (37, 1)),  # unaligned M, K with a tail
    ("numpy:matmul", 40, "fp32", (13, 11)),  # unaligned M and N: edge classes
    ("torch:cpu", 64, "fp32", None),
    ("torch:cpu", 96, "fp32", (1, 64)),  # M = 1
]


@pytest.mark.parametrize("oracle,k,dtype,shape", FAST)
def test_cpu_library_reproduced_on_heldout_inputs(oracle, k, dtype, shape):
    """Reveal's own check kept short (2,000 outputs a class: not claimed), the model it
    learnt then gives the library's bits at every one of 4,096 held-out outputs, by the
    tree under its arithmetic and by the hypothesis alike."""
    if oracle.startswith("torch"):
        pytest.importorskip("torch")
    r, h = _held(oracle, k, dtype, shape, 4096, check_outputs=2000)
    assert r.reproduced is None and "not claimed" in r.reason, r.reason
    share = -(-4096 // len(r.classes))  # a class of one output a call gets its share too
    assert [f.outputs for f in h.classes] == [share] * len(r.classes), h.text()
    assert h.reproduced, h.text()
    for c, fig in zip(r.classes, h.classes):
        if c.arithmetic is not None:
            assert fig.tree_agreed == fig.outputs, h.text()
        if c.hypothesis is not None:
            assert fig.hypothesis_agreed == fig.outputs, h.text()


def test_heldout_measure_tells_a_wrong_arithmetic():
    """The same tree with products rounded before each addition (not fused), or summed
    in a C double, misses held-out outputs of numpy.matmul: the inputs discriminate."""
    r = tc.reveal("numpy:matmul", 64, shape=(8, 8))
    assert r.first.arithmetic == TreeArithmetic((Arithmetic(Products.FUSED, Width.FP32),))
    for wrong in (Arithmetic(Products.ROUNDED, Width.FP32), Arithmetic(Products.FUSED, Width.FP64)):
        for c in r.classes:
            c.arithmetic = TreeArithmetic((wrong,))
            c.hypothesis = None
        h = measure(r, 4096, seed=3, library=library("numpy:matmul", "fp32"))
        assert not h.reproduced
        missed = sum(f.outputs - f.tree_agreed for f in h.classes)
        assert missed > 100, (wrong, h.text())
        assert h.classes[0].first_miss is not None


def test_heldout_inputs_discriminate_and_are_exact():
    """Exact in the format; the four kinds of rows there: cancelling rows sum to far less
    than their largest product, subnormal rows hold subnormals, and the draw differs from
    reveal's own discriminating inputs of the same shape and seed."""
    from tensorcore_smt.order.arithmetic import discriminating

    a, b = heldout_inputs(Format.FP32, 16, 64, 8, seed=0)
    assert (a.astype(np.float32).astype(np.float64) == a).all()
    p = a[:, :, None] * b[None, :, :]  # M x K x N products, exact in fp64
    sums = np.abs(p.sum(axis=1))
    biggest = np.abs(p).max(axis=1)
    assert (sums[1::4] < 1e-3 * biggest[1::4]).all()  # cancelling rows
    assert (sums[0::4] > 1e-3 * biggest[0::4]).mean() > 0.5
    tiny = (a != 0) & (np.abs(a) < 2.0**-126)
    assert tiny[2::4].any() and not tiny[0::4].any()
    ra, _ = discriminating(Format.FP32, 16, 64, 8, seed=0)
    assert not (ra == a).all(axis=1).any()
    a16, _ = heldout_inputs(Format.BF16, 8, 32, 4, seed=0)
    import ml_dtypes

    assert (a16.astype(ml_dtypes.bfloat16).astype(np.float64) == a16).all()


SLOW = [("numpy:dot", k, "fp32", None) for k in (40, 64, 96, 100, 300, 1000, 4096)] + [
    ("numpy:gemv", 100, "fp32", (37, 1)),
    ("numpy:gemv", 1000, "fp32", None),
    ("numpy:gemv", 4096, "fp32", None),
    ("numpy:matmul", 100, "fp32", (37, 53)),
    ("numpy:matmul", 300, "fp32", (37, 53)),
    ("numpy:matmul", 1000, "fp32", (1, 256)),
    ("numpy:matmul", 1000, "fp32", (256, 1)),
    ("numpy:matmul", 4096, "fp32", (256, 256)),
    ("torch:cpu", 100, "fp32", None),
    ("torch:cpu", 300, "fp32", (37, 53)),
    ("torch:cpu", 1000, "fp32", (1, 256)),
    ("torch:cpu", 1000, "fp32", (256, 1)),
    ("torch:cpu", 4096, "fp32", (256, 256)),
    ("torch:cpu", 16384, "fp32", None),
    ("torch:cpu", 96, "bf16", None),
    ("torch:cpu", 200, "bf16", (1, 64)),  # bf16 outputs count one call's probe to K = 258
    ("torch:cpu", 600, "bf16", (64, 64)),  # above: windowed probes (oracles.windowed_sizes)
    ("torch:cpu", 1024, "bf16", None),
]
"""(torch's fp16 matmul on the CPU writes fp16, which cannot hold a pair probe's counts:
reveal refuses it in one line.)"""


@pytest.mark.slow
@pytest.mark.parametrize("oracle,k,dtype,shape", SLOW)
def test_cpu_library_reproduced_on_1e5_heldout_outputs(oracle, k, dtype, shape):
    if oracle.startswith("torch"):
        pytest.importorskip("torch")
    r, h = _held(oracle, k, dtype, shape, 100_000)
    assert r.reproduced is True, r.reason
    assert h.outputs >= 100_000 and h.reproduced, h.text()
    # every class is named by a hypothesis, and it gives every held-out output
    assert all(c.hypothesis_agreed == c.outputs for c in h.classes), h.text()
