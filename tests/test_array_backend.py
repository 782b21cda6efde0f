"""The vector interpreter on an array-API namespace (bv/xp.py) against numpy's (bv/vector.py).

The array backend runs the model through the Python array API with int64 lanes (widths
of 64 bits and more on the host); here it runs on numpy's namespace, so `make test` checks
that code path without torch. tests/test_torch.py (`make test-torch`) runs it on torch.
"""

from __future__ import annotations

import numpy as np
import pytest

from tensorcore_smt.api import simulate_params
from tensorcore_smt.errors import UserError
from tensorcore_smt.spec.presets import PRESETS, parse_variant
from tensorcore_smt.validation.rows import random_rows

# one instruction of each algorithm family and operand width, plus variants that take
# other paths (exact accumulator, renormalizing carries, sequential sums, splits)
CASES = [
    ("volta", None),
    ("hopper", "m16n8k16.f32.f16.f16.f32"),
    ("ampere", "m16n8k8.f32.tf32.tf32.f32"),
    ("ampere", "m8n8k4.f64.f64.f64.f64"),
    ("ada", "m16n8k32.f32.e4m3.e5m2.f32"),
    ("cdna2", "v_mfma_f32_32x32x8f16"),
    ("cdna3", "v_mfma_f32_16x16x32_fp8_fp8"),
    ("cdna3", "v_mfma_f64_16x16x4_f64"),
    ("hopper[align=exact]", "m16n8k16.f32.f16.f16.f32"),
    ("volta[carry_bits=2,carry_overflow=renormalize]", None),
    ("ieee-fp32-rne", None),
    ("volta[split=markidis]", None),
]


@pytest.mark.parametrize("variant,instr", CASES)
def test_array_backend_on_numpy_matches_vector(variant: str, instr: str | None) -> None:
    p = parse_variant(variant).params(instr)
    a, b, c, _ = random_rows(p.a_fmt, p.b_fmt, p.c_fmt, p.K, 1500, seed=7)
    want = simulate_params(p, a, b, c)
    got = simulate_params(p, a, b, c, device="numpy")
    assert got.dtype == want.dtype
    bad = np.nonzero(got != want)[0]
    assert len(bad) == 0, f"{variant} {instr}: {len(bad)} rows differ, first {bad[:5]}"


def test_every_preset_default_on_numpy_namespace() -> None:
    for name, preset in PRESETS.items():
        p = preset.instructions[preset.default_instr].params
        a, b, c, _ = random_rows(p.a_fmt, p.b_fmt, p.c_fmt, p.K, 400, seed=3)
        assert np.array_equal(
            simulate_params(p, a, b, c, device="numpy"), simulate_params(p, a, b, c)
        ), name


def test_unknown_device_is_a_user_error() -> None:
    p = PRESETS["volta"].instructions[PRESETS["volta"].default_instr].params
    a = np.zeros((1, p.K), dtype=np.uint64)
    with pytest.raises(UserError):
        simulate_params(p, a, a, np.zeros(1, dtype=np.uint64), device="no-such-device")
