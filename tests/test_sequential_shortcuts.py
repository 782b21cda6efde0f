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
from tensorcore_smt.formats import Format, Rounding
from tensorcore_smt.model.ieee import products_exact_in
from tensorcore_smt.model.params import Algorithm, Order
from tensorcore_smt.presets import PRESETS

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


@pytest.mark.parametrize("i", range(len(VARIANTS)))
def test_shortcuts_give_the_bits_of_the_full_steps(i, monkeypatch):
    p = VARIANTS[i]
    rng = np.random.default_rng(4000 + i)
    parts = [random_rows(rng, p, 40, [kind]) for kind in ROW_KINDS]
    a, b, c = (np.concatenate([x[n] for x in parts]) for n in range(3))
    fast = simulate_params(p, a, b, c)
    fast_one = [
        simulate_one(p, list(map(int, a[r])), list(map(int, b[r])), int(c[r])) for r in range(8)
    ]
    monkeypatch.setattr(seq_module, "SKIP_EXACT_STEPS", False)
    full = simulate_params(p, a, b, c)
    for r in range(len(c)):
        assert int(fast[r]) == int(full[r]), (
            f"{p}: a={[hex(int(x)) for x in a[r]]} b={[hex(int(x)) for x in b[r]]} "
            f"c={int(c[r]):#x}: shortcut {int(fast[r]):#x} != full {int(full[r]):#x}"
        )
    assert fast_one == [int(x) for x in full[:8]]


def test_which_products_a_format_holds_exactly():
    assert products_exact_in(Format.FP16, Format.FP16, Format.FP32)
    assert products_exact_in(Format.E4M3, Format.E5M2, Format.FP32)
    assert not products_exact_in(Format.FP16, Format.FP16, Format.FP16)  # precision
    assert not products_exact_in(Format.BF16, Format.BF16, Format.FP32)  # range
    assert not products_exact_in(Format.TF32, Format.TF32, Format.FP32)  # range
    assert not products_exact_in(Format.FP32, Format.FP32, Format.FP32)
