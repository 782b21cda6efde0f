"""The compiled engine's count of leading zeros (engine/dag.py KernelBackend, lowered to
llvm.ctlz) against the concrete interpreter's (w - bit_length), and the kernels that use
it against the numpy interpreter."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import tensorcore_smt as tc
from tensorcore_smt.bv.concrete import CONCRETE
from tensorcore_smt.bv.symbolic import SymbolicBackend
from tensorcore_smt.engine import jit
from tensorcore_smt.engine.dag import KernelBackend, instruction_dag
from tensorcore_smt.engine.gemm_ir import map_module
from tensorcore_smt.engine.kernel_ir import KERNEL


def _clz_kernel(widths: list[int]):
    """out = clz(concat(x0, x1, ...)) (the low 16 bits) as a compiled map kernel."""
    s = KernelBackend()
    xs = [s.var(f"x{i}", w) for i, w in enumerate(widths)]
    x = xs[0]
    for y in xs[1:]:
        x = x.concat(y)
    c = x.clz()
    assert c.v.op == "clz"
    out = c.resize(16) if c.w > 16 else c
    addr = jit.load(jit.compile_object(map_module(out.v, widths), vectorize=False), KERNEL)
    sig = ctypes.CFUNCTYPE(
        None, ctypes.c_int64, ctypes.c_int64, *[ctypes.c_void_p] * (len(widths) + 1)
    )
    fn = sig(addr)

    def run(parts: list[np.ndarray]) -> np.ndarray:
        n = len(parts[0])
        res = np.empty(n, dtype=np.uint64)
        arrays = [np.ascontiguousarray(p, dtype=np.uint64) for p in parts]
        fn(0, n, *[a.ctypes.data for a in arrays], res.ctypes.data)
        return res

    return run


@pytest.mark.parametrize("w", [1, 2, 3, 5, 8, 11, 16])
def test_clz_every_value_of_small_widths(w):
    run = _clz_kernel([w])
    x = np.arange(1 << w, dtype=np.uint64)
    want = [CONCRETE.clz(int(v), w) for v in x]
    assert run([x]).tolist() == want


@pytest.mark.parametrize("widths", [[33], [41], [64], [64, 36], [64, 64], [8, 64, 64, 64]])
def test_clz_wide_values(widths):
    """Zero, every single bit, all ones and random values of wide integers (up to 200
    bits, legalised into 64-bit pieces)."""
    rng = np.random.default_rng(len(widths) * 100 + widths[-1])
    w = sum(widths)
    values = [0, (1 << w) - 1] + [1 << i for i in range(w)]
    for _ in range(200):  # random values of random bit lengths
        v = int.from_bytes(rng.bytes(32), "little") & ((1 << w) - 1)
        values.append(v >> int(rng.integers(0, w)))
    parts, shift = [], w
    for wi in widths:
        shift -= wi
        parts.append(np.array([(v >> shift) & ((1 << wi) - 1) for v in values], dtype=np.uint64))
    got = _clz_kernel(widths)(parts).tolist()
    assert got == [CONCRETE.clz(v, w) % (1 << 16) for v in values]


def test_constant_clz_folds_as_the_bisection_does():
    """A clz of a constant is a constant in both DAGs, of the same value."""
    for w in (1, 7, 41, 130):
        for v in (0, 1, (1 << w) - 1, 1 << (w // 2)):
            k = KernelBackend()
            b = SymbolicBackend()
            a = k.const(v, w)
            assert k.clz(a, w).value == b.clz(b.const(v, w), w).value == CONCRETE.clz(v, w)


def test_instruction_dags_use_one_clz_node_per_count():
    """The hopper bf16 step's normalisation is llvm.ctlz, not a bisection, and its
    compiled kernel still agrees with the numpy interpreter."""
    p = tc.resolve("hopper", "m16n8k16.f32.f16.f16.f32")
    from tensorcore_smt.bv.dag import post_order

    ops = [t.op for t in post_order([instruction_dag(p).root])]
    assert ops.count("clz") >= 1
    rng = np.random.default_rng(5)
    n = 4000
    a = rng.integers(0, 1 << 16, (n, p.K), dtype=np.uint16)
    b = rng.integers(0, 1 << 16, (n, p.K), dtype=np.uint16)
    c = rng.integers(0, 1 << 32, n, dtype=np.uint32)
    a[: n // 2] &= 0x3FFF  # finite values, many of them summing to small results
    b[: n // 2] &= 0x3FFF
    d1 = tc.simulate_params(p, a, b, c, engine="numpy")
    d2 = tc.simulate_params(p, a, b, c, engine="compiled")
    assert np.array_equal(np.asarray(d1), np.asarray(d2))
