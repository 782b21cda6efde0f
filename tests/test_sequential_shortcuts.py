"""The sequential references leave out steps that cannot change a value: converting c
already in the accumulator's format, rounding products the format always holds exactly,
and converting a result already in d's format. With and without those shortcuts the
model must give the same bits, on every kind of row (specials, cancellation, random)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from strategies import ROW_KINDS, random_rows

from tensorcore_smt.api import simulate_one, simulate_params
from tensorcore_smt.bv.core import BV
from tensorcore_smt.bv.smtlib import to_smtlib
from tensorcore_smt.bv.symbolic import SymbolicBackend, evaluate
from tensorcore_smt.bv.vector import VECTOR
from tensorcore_smt.formats import Format, Rounding, decode
from tensorcore_smt.model import dot_add
from tensorcore_smt.model.ieee import add_known_zero, add_unpacked, products_exact_in
from tensorcore_smt.model.params import Algorithm, Order
from tensorcore_smt.spec.presets import PRESETS

# the module (the package exports a function of the same name)
seq_module = importlib.import_module("tensorcore_smt.model.sequential")


def _variants():
    """Sequential references over several instructions' formats, every order, and the
    options the shortcuts must respect (a fixed NaN, flushes, fused products)."""
    bases = [
        PRESETS["volta"].instructions["m8n8k4.f32.f16.f16.f32"].params,
        PRESETS["volta"].instructions["m8n8k4.f16.f16.f16.f16"].params,
        PRESETS["ampere"].instructions["m16n8k8.f32.bf16.bf16.f32"].params,
        PRESETS["ampere"].instructions["m16n8k4.f32.tf32.tf32.f32"].params,
    ]
    out = []
    for i, base in enumerate(bases):
        for j, order in enumerate(Order):
            p = base.with_(
                algorithm=Algorithm.SEQUENTIAL,
                order=order,
                acc_fmt=Format.FP32,
                acc_rounding=list(Rounding)[(i + j) % len(Rounding)],
                rounding=list(Rounding)[(i + 2 * j) % len(Rounding)],
            )
            out.append(p)
        out.append(out[-1].with_(nan_bits=0x7FC00001 if base.d_fmt == Format.FP32 else 0x7E01))
        out.append(out[-2].with_(flush_outputs=True, flush_products=True))
        out.append(out[-3].with_(fused_products=True))
        out.append(out[-4].with_(acc_fmt=Format.FP16))
    return out


VARIANTS = _variants()


def _rows(p, seed: int):
    """Rows of every kind; in a third of them some products and c are zeros of random
    sign (the concrete interpreter sees those as constants and adds them as zeros)."""
    rng = np.random.default_rng(seed)
    parts = [random_rows(rng, p, 30, [kind]) for kind in ROW_KINDS]
    a, b, c = (np.concatenate([x[n] for x in parts]) for n in range(3))
    sa, sc = p.a_fmt.spec, p.c_fmt.spec
    for r in range(0, len(c), 3):
        for k in range(p.K):
            if rng.random() < 0.5:
                a[r, k] = int(rng.integers(0, 2)) << (sa.storage - 1)
        if rng.random() < 0.5:
            c[r] = int(rng.integers(0, 2)) << (sc.storage - 1)
    return a, b, c


@pytest.mark.parametrize("i", range(len(VARIANTS)))
def test_shortcuts_give_the_bits_of_the_full_steps(i, monkeypatch):
    """Vector interpreter with and without the shortcuts, and the concrete interpreter
    (which also adds a zero operand as a zero) on every row."""
    p = VARIANTS[i]
    a, b, c = _rows(p, 4000 + i)
    fast = simulate_params(p, a, b, c)
    conc = [
        simulate_one(p, list(map(int, a[r])), list(map(int, b[r])), int(c[r]))
        for r in range(len(c))
    ]
    monkeypatch.setattr(seq_module, "SKIP_EXACT_STEPS", False)
    full = simulate_params(p, a, b, c)
    for r in range(len(c)):
        where = (
            f"{p}: a={[hex(int(x)) for x in a[r]]} b={[hex(int(x)) for x in b[r]]} c={int(c[r]):#x}"
        )
        assert int(fast[r]) == int(full[r]), (
            f"{where}: shortcut {int(fast[r]):#x} != full {int(full[r]):#x}"
        )
        assert conc[r] == int(full[r]), f"{where}: concrete {conc[r]:#x} != full {int(full[r]):#x}"


def test_a_query_with_zero_products_adds_no_rounding_for_them(monkeypatch):
    """The fp16-accumulation reference of Valpey et al.'s (2025) exact-multiplication row with one
    free product: the three zero products and c = 0 cost no rounding (under half the
    DAG of the full steps), and the DAG evaluates to the full steps' bits."""
    p = VARIANTS[0].with_(acc_fmt=Format.FP16, acc_rounding=Rounding.RNE, order=Order.C_FIRST)

    def dag():
        sb = SymbolicBackend()
        zero = BV.const(sb, 0, 16)
        d = dot_add(
            [sb.var("a0", 16)] + [zero] * 3, [sb.var("b0", 16)] + [zero] * 3, BV.const(sb, 0, 32), p
        )
        return d, to_smtlib([d.v]).count("define-fun")

    d, small = dag()
    monkeypatch.setattr(seq_module, "SKIP_EXACT_STEPS", False)
    _, large = dag()
    assert small * 2 < large, (small, large)
    rng = np.random.default_rng(9)
    a0, b0 = rng.integers(0, 1 << 16, 300), rng.integers(0, 1 << 16, 300)
    a = np.zeros((300, 4), dtype=np.uint64)
    b = np.zeros((300, 4), dtype=np.uint64)
    a[:, 0], b[:, 0] = a0, b0
    full = simulate_params(p, a, b, np.zeros(300, dtype=np.uint64))
    for r in range(300):
        got, want = evaluate(d.v, {"a0": int(a0[r]), "b0": int(b0[r])}), int(full[r])
        assert got == want, f"a0={int(a0[r]):#x} b0={int(b0[r]):#x}: DAG {got:#x} != {want:#x}"


def test_which_products_a_format_holds_exactly():
    assert products_exact_in(Format.FP16, Format.FP16, Format.FP32)
    assert products_exact_in(Format.E4M3, Format.E5M2, Format.FP32)
    assert not products_exact_in(Format.FP16, Format.FP16, Format.FP16)  # precision
    assert not products_exact_in(Format.BF16, Format.BF16, Format.FP32)  # range
    assert not products_exact_in(Format.TF32, Format.TF32, Format.FP32)  # range
    assert not products_exact_in(Format.FP32, Format.FP32, Format.FP32)


@pytest.mark.parametrize("mode", list(Rounding), ids=lambda m: m.name)
@pytest.mark.parametrize("fmt", [Format.FP16, Format.FP32], ids=lambda f: f.name)
def test_adding_a_known_zero_is_the_ieee_sum(fmt, mode):
    """ieee.add_known_zero(x, +-0) gives add_unpacked's bits (vector interpreter): every
    fp16 pattern (NaN payloads, zeros, subnormals, Inf), random and special fp32 ones,
    both zero signs."""
    w = fmt.spec.storage
    if fmt == Format.FP16:
        xs = np.arange(1 << 16, dtype=np.uint64)
    else:
        edge = [0, 1 << 31, 0x7F800000, 0xFF800000, 0x7F800001, 0xFFC00000, 1, 0x807FFFFF]
        rand = np.random.default_rng(5).integers(0, 1 << 32, 20000, dtype=np.uint64)
        xs = np.concatenate([rand, np.array(edge, dtype=np.uint64)])
    for z in (0, 1 << (w - 1)):
        zero = decode(BV(VECTOR, np.full(len(xs), z, dtype=np.uint64), w), fmt)
        xb = BV(VECTOR, xs, w)
        want = np.broadcast_to(
            np.asarray(add_unpacked(decode(xb, fmt), zero, fmt, mode).v), xs.shape
        )
        got = np.broadcast_to(np.asarray(add_known_zero(xb, zero, fmt, mode).v), xs.shape)
        bad = np.nonzero(got != want)[0]
        assert not len(bad), (
            f"{int(xs[bad[0]]):#x} + {z:#x}: {int(got[bad[0]]):#x} != {int(want[bad[0]]):#x}"
        )
